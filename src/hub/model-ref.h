// The one place a MODEL argument becomes a file, for every command: a path, a name in minfer's
// model folder, hf:ORG/REPO[@REV][:QUANT|:FILE] or ollama:[NS/]MODEL[:TAG]. A name already in a
// cache resolves with no network at all; otherwise it is downloaded first (progress on stderr).
//
//   auto m = resolve_model_ref("hf:bartowski/Qwen2.5-0.5B-Instruct-GGUF:Q4_K_M");
//   if (!m) die(m.error().message);
//   load(m->path);
//
//   for (const ListedModel& l : list_models()) print(l.name, l.size);   // `minfer list`
//   auto gone = remove_model("ollama:qwen2.5:0.5b");                     // `minfer rm`
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "hub/pull-events.h"

namespace minfer::hub {

struct ResolvedModel {
  std::string path;        // the model file (first part of a split model)
  std::string source;      // "path", "minfer", "hf", "ollama-minfer", "ollama"
  bool downloaded = false;
};

// `ev`: a download's steps and bytes for a caller that shows them (the server's /api/pull).
Expected<ResolvedModel> resolve_model_ref(const std::string& ref, bool allow_network = true, const PullEvents* ev = nullptr);

struct ListedModel {
  std::string name;                // works as MODEL
  std::string source;              // as in ResolvedModel
  std::string path;                // first file
  std::vector<std::string> files;  // every part
  int64_t size = 0;
  bool read_only = false;          // Ollama's store
};
std::vector<ListedModel> list_models();

// Deletes a cached model (never a plain path). Returns the paths removed.
Expected<std::vector<std::string>> remove_model(const std::string& ref);

}  // namespace minfer::hub
