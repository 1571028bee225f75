// Per-type entry points behind quant.h's dispatch. Internal to the quant library.
// Every function: n is a multiple of the type's block size; src/dst sized as in quant.h.
#pragma once

#include <cstdint>

namespace minfer::quant_detail {

#define MINFER_QUANT_ROW_FNS(T)                                   \
  void dequantize_##T(const void* src, float* dst, int64_t n);    \
  void quantize_##T(const float* src, void* dst, int64_t n);

// float.cpp
MINFER_QUANT_ROW_FNS(f32)
MINFER_QUANT_ROW_FNS(f16)
MINFER_QUANT_ROW_FNS(bf16)
// legacy.cpp
MINFER_QUANT_ROW_FNS(q4_0)
MINFER_QUANT_ROW_FNS(q4_1)
MINFER_QUANT_ROW_FNS(q5_0)
MINFER_QUANT_ROW_FNS(q5_1)
MINFER_QUANT_ROW_FNS(q8_0)
// k-dequant.cpp (dequantize_*), k-quantize.cpp (quantize_*; Q8_K's is in k-dequant.cpp)
MINFER_QUANT_ROW_FNS(q2_k)
MINFER_QUANT_ROW_FNS(q3_k)
MINFER_QUANT_ROW_FNS(q4_k)
MINFER_QUANT_ROW_FNS(q5_k)
MINFER_QUANT_ROW_FNS(q6_k)
MINFER_QUANT_ROW_FNS(q8_k)
// iq4-dequant.cpp (dequantize_*), iq4-quantize.cpp (quantize_*)
MINFER_QUANT_ROW_FNS(iq4_nl)
MINFER_QUANT_ROW_FNS(iq4_xs)

#undef MINFER_QUANT_ROW_FNS

}  // namespace minfer::quant_detail
