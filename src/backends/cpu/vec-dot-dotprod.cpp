// Dot products of the 32-element block types with SDOT (ARMv8.2 FEAT_DotProd), bit-identical
// to the references (vec-dot-ref.cpp): the integer block sums are exact (SDOT adds four
// products into each int32 lane), and the float steps are the reference's Seq chain (one fma
// per block in block order) or Lanes8 (Q4_1: SDOT's lanes are Lanes8's groups of four
// elements). The K-quants are in vec-dot-kquant-dotprod.cpp. A dotprod region (isa-begin.h);
// kernels-neon.cpp hands the table out.
#include <cmath>
#include <cstdint>

#include "backends/cpu/kernels-neon.h"
#include "quant/blocks.h"

#define MINFER_ISA dotprod
#include "backends/cpu/isa-begin.h"
#include "backends/cpu/neon-common.h"

namespace minfer::cpu::dotprod {
namespace {

// A block's 32 products summed into 4 int32 lanes: lane l = elements 4l..4l+3 of w0 * x0 plus
// those of w1 * x1.
inline int32x4_t dot32(int8x16_t w0, int8x16_t w1, int8x16_t x0, int8x16_t x1) {
  return vdotq_s32(vdotq_s32(vdupq_n_s32(0), w0, x0), w1, x1);
}

inline int8x16_t s8(uint8x16_t v) { return vreinterpretq_s8_u8(v); }

}  // namespace

float vec_dot_q4_0(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const BlockQ4_0*>(w);
  const auto* b = static_cast<const BlockQ8_0*>(x);
  return seq_blocks<false>(a, b, n / kQK, [&](int64_t k) {
    const Nibbles q = nibbles(a[k].qs);
    return dot32(vsubq_s8(s8(q.lo), vdupq_n_s8(8)), vsubq_s8(s8(q.hi), vdupq_n_s8(8)), x_lo(b[k]), x_hi(b[k]));
  });
}

// Lanes8 (vec-dot-ref.cpp): SDOT's lanes are the 8 group sums (lanes 0-3 of the low nibbles,
// 4-7 of the high ones), one fma per lane and block; the mins' products summed in block
// order, added last.
float vec_dot_q4_1(int64_t n, const void* w, const void* x) {
  return q4_1_lanes8(n, static_cast<const BlockQ4_1*>(w), static_cast<const BlockQ8_1*>(x),
                     [](int8x16_t wq, int8x16_t xq) { return vdotq_s32(vdupq_n_s32(0), wq, xq); });
}

float vec_dot_q5_0(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const BlockQ5_0*>(w);
  const auto* b = static_cast<const BlockQ8_0*>(x);
  return seq_blocks<false>(a, b, n / kQK, [&](int64_t k) {
    const Nibbles q = nibbles(a[k].qs), h = bits_to_bytes(a[k].qh);
    return dot32(q5_0_signed(q.lo, h.lo), q5_0_signed(q.hi, h.hi), x_lo(b[k]), x_hi(b[k]));
  });
}

float vec_dot_q5_1(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const BlockQ5_1*>(w);
  const auto* b = static_cast<const BlockQ8_1*>(x);
  return seq_blocks<true>(a, b, n / kQK, [&](int64_t k) {
    const Nibbles q = nibbles(a[k].qs), h = bits_to_bytes(a[k].qh);
    return dot32(q5_1_unsigned(q.lo, h.lo), q5_1_unsigned(q.hi, h.hi), x_lo(b[k]), x_hi(b[k]));
  });
}

// s = fma(d_w * d_x, sum_i w_i x_i, s) per block in order (ref's Seq): four blocks' integer
// sums and scale products at once, then their four fmas one after another.
float vec_dot_q8_0(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const BlockQ8_0*>(w);
  const auto* b = static_cast<const BlockQ8_0*>(x);
  return seq_blocks<false>(a, b, n / kQK, [&](int64_t k) { return dot32(x_lo(a[k]), x_hi(a[k]), x_lo(b[k]), x_hi(b[k])); });
}

float vec_dot_iq4_nl(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const BlockIQ4_NL*>(w);
  const auto* b = static_cast<const BlockQ8_0*>(x);
  const int8x16_t table = iq4nl_table();
  return seq_blocks<false>(a, b, n / kQK, [&](int64_t k) {
    const Nibbles q = nibbles(a[k].qs);
    return dot32(vqtbl1q_s8(table, q.lo), vqtbl1q_s8(table, q.hi), x_lo(b[k]), x_hi(b[k]));
  });
}

}  // namespace minfer::cpu::dotprod
#include "backends/cpu/isa-end.h"
