// Scalar reference dequantization and quantization of rows of every supported GGML type.
// These are the spec and the test oracle for the fast kernels; they favour clarity.
//
//   std::vector<float> out(n);
//   dequantize_row(DType::Q4_K, row_ptr, out.data(), n);       // n % 256 == 0
//   std::vector<uint8_t> q(row_bytes(DType::Q8_0, n));
//   quantize_row(DType::Q8_0, src, q.data(), n);
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace minfer {

// True for every type dequantize_row accepts (F32, F16, BF16, Q4_0 ... Q8_0, K-quants, IQ4).
bool can_dequantize(DType t);
// True for every type quantize_row accepts.
bool can_quantize(DType t);

// src: row_bytes(t, n) bytes; dst: [n] floats. n must be a multiple of the block size.
void dequantize_row(DType t, const void* src, float* dst, int64_t n);
// src: [n] floats; dst: row_bytes(t, n) bytes. Deterministic: the same input gives the same
// bytes on every machine. For F16/BF16/Q4_0/Q4_1/Q5_0/Q5_1/Q8_0 bit-exact with gguf-py/ggml.
void quantize_row(DType t, const float* src, void* dst, int64_t n);

}  // namespace minfer
