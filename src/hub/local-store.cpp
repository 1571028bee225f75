#include "hub/local-store.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "hub/env.h"
#include "hub/gguf-pick.h"

namespace fs = std::filesystem;

namespace minfer::hub {

namespace {

std::vector<std::string> gguf_names() {
  std::vector<std::string> names;
  for (const fs::path& p : dir_entries(local_model_dir())) {
    const std::string n = p.filename().string();
    std::error_code ec;
    if (fs::is_regular_file(p, ec) && n.ends_with(".gguf")) names.push_back(n);
  }
  return names;
}

bool later_part(const std::string& n) { return gguf_split_name(n).index != 1; }

}  // namespace

std::string local_model_dir() {
  if (const char* d = std::getenv("MINFER_MODEL_DIR"); d && *d) return d;
  const char* home = std::getenv("HOME");
  return (fs::path(home ? home : ".") / ".cache" / "minfer" / "models").string();
}

Expected<std::string> local_find(const std::string& model) {
  const fs::path dir = local_model_dir();
  const std::vector<std::string> names = gguf_names();
  for (const std::string& n : names)
    if (n == model || n == model + ".gguf") return (dir / n).string();
  std::vector<std::string> hits;
  for (const std::string& n : names)
    if (n.starts_with(model) && !later_part(n)) hits.push_back(n);
  if (hits.size() == 1) return (dir / hits[0]).string();
  if (model.find('/') != std::string::npos || model.ends_with(".gguf"))
    return make_error("model file '{}' not found", model);
  if (hits.empty()) {
    std::string msg = "no model named '" + model + "' in " + dir.string();
    std::string listing;
    for (const std::string& n : names)
      if (!later_part(n)) listing += "\n  " + n;
    if (!listing.empty()) msg += "; cached models:" + listing;
    msg += "\n(a path, a cached name, hf:ORG/REPO[:QUANT] or ollama:MODEL[:TAG]; `minfer list` shows what is here)";
    return Error{msg};
  }
  std::string msg = "'" + model + "' matches " + std::to_string(hits.size()) + " cached models; be more specific:";
  for (const std::string& n : hits) msg += "\n  " + n;
  return Error{msg};
}

std::vector<LocalModel> local_scan() {
  std::vector<LocalModel> out;
  const fs::path dir = local_model_dir();
  const std::vector<std::string> names = gguf_names();
  for (const std::string& n : names) {
    const GgufSplitName s = gguf_split_name(n);
    if (s.index != 1) continue;
    LocalModel m;
    m.name = n.substr(0, n.size() - 5);
    if (s.count > 1) {
      for (int i = 1; i <= s.count; ++i) {
        char part[64];
        std::snprintf(part, sizeof part, "-%05d-of-%05d.gguf", i, s.count);
        m.files.push_back((dir / (s.prefix + part)).string());
      }
    } else {
      m.files.push_back((dir / n).string());
    }
    std::error_code ec;
    for (const std::string& f : m.files) {
      const auto sz = fs::file_size(f, ec);
      if (!ec) m.size += static_cast<int64_t>(sz);
    }
    out.push_back(std::move(m));
  }
  return out;
}

Expected<std::vector<std::string>> local_remove(const std::string& name) {
  // Deleting takes the exact name (a prefix is fine for running a model, not for deleting one).
  const std::string file = name.ends_with(".gguf") ? name : name + ".gguf";
  std::vector<std::string> removed;
  for (const LocalModel& m : local_scan()) {
    if (fs::path(m.files[0]).filename().string() != file) continue;
    for (const std::string& f : m.files) {
      std::error_code ec;
      if (fs::remove(f, ec)) removed.push_back(f);
      else if (ec) return make_error("cannot remove {}: {}", f, ec.message());
    }
  }
  if (removed.empty())
    return make_error("no model named exactly '{}' in {} (a split model is removed by its first part; `minfer list` "
                      "shows the names)",
                      name, local_model_dir());
  return removed;
}

}  // namespace minfer::hub
