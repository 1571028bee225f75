// Which GGUF file(s) of a repository a name means, the way llama.cpp's `-hf org/repo:TAG` picks
// them: TAG matches case-insensitively where it is followed by '.' or '-' ("Q4_K_M" picks
// "model-Q4_K_M.gguf" and "Q4_K_M/model-Q4_K_M-00001-of-00003.gguf", not "model-Q4_K_M_L.gguf");
// without a tag Q4_K_M, then Q8_0, then the first model file. Files that are not language
// models (mmproj, imatrix, speculative draft heads: mtp-, eagle3-, dflash-, dspark-) are never
// picked. A split model is picked by its first part and brings every part. The first match in
// the listing wins (the Hub lists in path order).
//
//   auto pick = pick_gguf(files, "Q8_0");   // files: paths in the repo
//   if (!pick) explain(pick.error());       // names the GGUF files that are there
//   pick->files;                            // ["Q8_0/m-Q8_0-00001-of-00002.gguf", "...-00002-..."]
#pragma once

#include <string>
#include <vector>

#include "core/status.h"

namespace minfer::hub {

struct GgufPick {
  std::vector<std::string> files;  // the model's files, first part first
  std::string tag;                 // the quant tag in its name ("Q4_K_M"), "" if none
};

struct GgufSplitName {
  std::string prefix;  // the path without "-0000i-of-0000N.gguf" (or ".gguf")
  std::string tag;     // upper-cased trailing [-.]TAG of the prefix, "" if none
  int index = 1, count = 1;
  bool is_gguf = false;
};

GgufSplitName gguf_split_name(const std::string& path);

// True for a GGUF that holds a language model (not a projector, imatrix or draft head).
bool gguf_is_model_file(const std::string& path);

// `tag` empty: the default order. `tag` ending in ".gguf": that exact path (and its split parts).
Expected<GgufPick> pick_gguf(const std::vector<std::string>& files, const std::string& tag);

}  // namespace minfer::hub
