// The `minfer quantize` pipeline: read a GGUF (any supported type, split or not), choose each
// tensor's type with MixPlanner, requantize through F32 on a thread pool, write a GGUF.
//
//   QuantizeOptions o; o.file_type = FileType::Q4_K_M; o.n_threads = 4;
//   auto report = quantize_model("in.gguf", "out.gguf", o);
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "core/status.h"
#include "quantize/mix.h"

namespace minfer {

struct QuantizeOptions {
  FileType file_type = FileType::Q4_K_M;
  int n_threads = 1;
  bool pure = false;              // every quantizable tensor gets the base type
  size_t split_max_tensors = 0;   // > 0: write NAME-0000i-of-0000N.gguf parts
  bool copy = false;              // every tensor as it is (file_type ignored): re-split, rewrite
  // Quantizing a tensor that is already quantized (not F32/F16/BF16) loses quality twice; it is
  // refused unless this is set (llama-quantize's --allow-requantize). Dequantizing is allowed.
  bool allow_requantize = false;
  // Called after each tensor: (index, count, tensor name, chosen type name).
  std::function<void(size_t, size_t, const std::string&, std::string_view)> on_tensor;
};

struct QuantizeReport {
  size_t n_tensors = 0;
  size_t n_quantized = 0;
  uint64_t in_bytes = 0;     // tensor data read
  uint64_t out_bytes = 0;    // tensor data written
  uint64_t n_elements = 0;   // weights converted
  double seconds = 0;
};

Expected<QuantizeReport> quantize_model(const std::string& in_path, const std::string& out_path,
                                        const QuantizeOptions& opt);

}  // namespace minfer
