// Dispatch of the row conversions over DType: one table row per supported type.
#include "quant/quant.h"

#include "core/status.h"
#include "quant/internal.h"

namespace minfer {
namespace {

using DequantizeFn = void (*)(const void*, float*, int64_t);
using QuantizeFn = void (*)(const float*, void*, int64_t);

struct RowFns {
  DType type;
  DequantizeFn dequantize;
  QuantizeFn quantize;
};

#define MINFER_ROW(T, fn) {DType::T, quant_detail::dequantize_##fn, quant_detail::quantize_##fn}
constexpr RowFns kRowFns[] = {
    MINFER_ROW(F32, f32),       MINFER_ROW(F16, f16),     MINFER_ROW(BF16, bf16),
    MINFER_ROW(Q4_0, q4_0),     MINFER_ROW(Q4_1, q4_1),   MINFER_ROW(Q5_0, q5_0),
    MINFER_ROW(Q5_1, q5_1),     MINFER_ROW(Q8_0, q8_0),   MINFER_ROW(Q2_K, q2_k),
    MINFER_ROW(Q3_K, q3_k),     MINFER_ROW(Q4_K, q4_k),   MINFER_ROW(Q5_K, q5_k),
    MINFER_ROW(Q6_K, q6_k),     MINFER_ROW(Q8_K, q8_k),   MINFER_ROW(IQ4_NL, iq4_nl),
    MINFER_ROW(IQ4_XS, iq4_xs),
};
#undef MINFER_ROW

const RowFns* find(DType t) {
  for (const RowFns& r : kRowFns)
    if (r.type == t) return &r;
  return nullptr;
}

}  // namespace

bool can_dequantize(DType t) { return find(t) != nullptr; }
bool can_quantize(DType t) { return find(t) != nullptr; }

void dequantize_row(DType t, const void* src, float* dst, int64_t n) {
  const RowFns* r = find(t);
  MINFER_ASSERT(r != nullptr && "dequantize_row: unsupported type");
  MINFER_ASSERT(n >= 0 && n % dtype_info(t).block_elems == 0);
  r->dequantize(src, dst, n);
}

void quantize_row(DType t, const float* src, void* dst, int64_t n) {
  const RowFns* r = find(t);
  MINFER_ASSERT(r != nullptr && "quantize_row: unsupported type");
  MINFER_ASSERT(n >= 0 && n % dtype_info(t).block_elems == 0);
  r->quantize(src, dst, n);
}

}  // namespace minfer
