// `minfer download NAME`, `minfer list [--json]`, `minfer rm NAME` (docs/models.md).
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <string>

#include "cli/commands.h"
#include "cli/options.h"
#include "hub/http-client.h"
#include "hub/model-ref.h"
#include "hub/progress.h"

namespace minfer::cli {

namespace {
const char* kNames =
    "a path, a name in minfer's model folder, hf:ORG/REPO[@REVISION][:QUANT|:FILE.gguf] or "
    "ollama:[NAMESPACE/]MODEL[:TAG]";
}

int cmd_download(int argc, char** argv) {
  CLI::App app{"Fetch a model into its cache (unless it is there) and print its local path last on stdout",
               "minfer download"};
  std::string name;
  app.add_option("NAME", name, kNames)->required();
  if (auto rc = parse_command_line(app, argc, argv)) return *rc;
  Expected<hub::ResolvedModel> r = make_error("unreached");
  {
    InterruptibleDownloads guard;
    r = hub::resolve_model_ref(name);
  }
  if (!r) {
    std::fprintf(stderr, "minfer download: %s\n", r.error().message.c_str());
    return hub::http_cancelled() ? 130 : 1;
  }
  if (!r->downloaded) std::fprintf(stderr, "%s is already cached\n", name.c_str());
  std::printf("%s\n", r->path.c_str());
  return 0;
}

int cmd_list(int argc, char** argv) {
  CLI::App app{"Show every model minfer can find: its model folder, the Hugging Face cache, minfer's and Ollama's "
               "stores. NAME works as MODEL in every command.",
               "minfer list"};
  bool as_json = false;
  app.add_flag("--json", as_json, "one JSON array: name, source, size, path, files, read_only");
  if (auto rc = parse_command_line(app, argc, argv)) return *rc;
  const auto models = hub::list_models();
  if (as_json) {
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& m : models)
      arr.push_back({{"name", m.name}, {"source", m.source}, {"size", m.size}, {"path", m.path}, {"files", m.files},
                     {"read_only", m.read_only}});
    std::printf("%s\n", arr.dump(2).c_str());
    return 0;
  }
  if (models.empty()) {
    std::fprintf(stderr, "no models found (minfer download NAME fetches one)\n");
    return 0;
  }
  size_t w = 4;
  for (const auto& m : models) w = std::max(w, m.name.size());
  std::printf("%-*s  %10s  %-14s %s\n", static_cast<int>(w), "NAME", "SIZE", "SOURCE", "PATH");
  for (const auto& m : models)
    std::printf("%-*s  %10s  %-14s %s%s\n", static_cast<int>(w), m.name.c_str(), hub::human_bytes(m.size).c_str(),
                m.source.c_str(), m.path.c_str(), m.files.size() > 1 ? (" (+" + std::to_string(m.files.size() - 1) + " parts)").c_str() : "");
  return 0;
}

int cmd_rm(int argc, char** argv) {
  CLI::App app{"Delete a cached model (Hugging Face cache: its snapshot links, and each blob nothing else uses)",
               "minfer rm"};
  std::string name;
  app.add_option("NAME", name, "a name as `minfer list` shows it")->required();
  if (auto rc = parse_command_line(app, argc, argv)) return *rc;
  auto r = hub::remove_model(name);
  if (!r) {
    std::fprintf(stderr, "minfer rm: %s\n", r.error().message.c_str());
    return 1;
  }
  for (const std::string& p : *r) std::printf("removed %s\n", p.c_str());
  return 0;
}

}  // namespace minfer::cli
