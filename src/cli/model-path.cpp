#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>
#include <algorithm>

#include "cli/commands.h"

namespace fs = std::filesystem;

namespace minfer::cli {

static fs::path model_dir() {
  if (const char* d = std::getenv("MINFER_MODEL_DIR"); d && *d) return d;
  const char* home = std::getenv("HOME");
  return fs::path(home ? home : ".") / ".cache" / "minfer" / "models";
}

std::string resolve_model(const std::string& model) {
  std::error_code ec;
  if (fs::is_regular_file(model, ec)) return model;
  const fs::path dir = model_dir();
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    if (e.is_regular_file(ec) && n.ends_with(".gguf")) names.push_back(n);
  }
  std::sort(names.begin(), names.end());
  for (const std::string& n : names)
    if (n == model || n == model + ".gguf") return (dir / n).string();
  std::vector<std::string> hits;
  for (const std::string& n : names)
    if (n.starts_with(model)) hits.push_back(n);
  // A split model matches through its first part only.
  std::erase_if(hits, [](const std::string& n) {
    return n.find("-of-") != std::string::npos && n.find("-00001-of-") == std::string::npos;
  });
  if (hits.size() == 1) return (dir / hits[0]).string();
  if (model.find('/') != std::string::npos || model.ends_with(".gguf")) {
    std::fprintf(stderr, "minfer: model file '%s' not found\n", model.c_str());
  } else if (hits.empty()) {
    std::fprintf(stderr, "minfer: no model named '%s' in %s", model.c_str(), dir.c_str());
    if (!names.empty()) {
      std::fprintf(stderr, "; cached models:");
      for (const auto& n : names) std::fprintf(stderr, "\n  %s", n.c_str());
    }
    std::fprintf(stderr, "\n");
  } else {
    std::fprintf(stderr, "minfer: '%s' matches %zu cached models; be more specific:", model.c_str(), hits.size());
    for (const auto& n : hits) std::fprintf(stderr, "\n  %s", n.c_str());
    std::fprintf(stderr, "\n");
  }
  return "";
}

}  // namespace minfer::cli
