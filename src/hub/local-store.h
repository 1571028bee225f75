// minfer's own model folder, $MINFER_MODEL_DIR (default ~/.cache/minfer/models): GGUF files put
// there by hand or by scripts/setup.sh, named by file name with or without ".gguf", or by a
// unique prefix. A split model is named through its first part.
//
//   auto path = local_find("SmolLM2");          // ".../SmolLM2-135M-Instruct-Q4_1.gguf"
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace minfer::hub {

std::string local_model_dir();

// The first part's path. The error lists what is there (or what the prefix matched).
Expected<std::string> local_find(const std::string& name);

struct LocalModel {
  std::string name;                // file name without .gguf (first part for a split model)
  std::vector<std::string> files;  // every part
  int64_t size = 0;
};
std::vector<LocalModel> local_scan();

Expected<std::vector<std::string>> local_remove(const std::string& name);

}  // namespace minfer::hub
