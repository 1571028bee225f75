// A GGUF metadata value as JSON: numbers, strings, booleans and (nested) arrays as they are; a
// float by its shortest decimal form (1e-05, not its widened double 9.99e-06). `minfer info
// --json` and Ollama's /api/show model_info print metadata with it.
//
//   for (const GgufKV& kv : file.metadata()) out[kv.key] = api::gguf_value_json(kv.value);
#pragma once

#include <nlohmann/json.hpp>

#include "gguf/value.h"

namespace minfer::api {

nlohmann::ordered_json gguf_value_json(const GgufValue& v);

}  // namespace minfer::api
