// ARMv8.0 Advanced SIMD dot products of the float types and the 32-element block types, and
// the activation quantizers; the K-quants are in vec-dot-kquant-neon.cpp. Every one is
// bit-identical to its reference (vec-dot-ref.cpp): the float types follow dot_f32_order's 8
// partial sums (a product, then an add, per element), the block types' integer sums are exact
// (widening multiplies into int16 lanes, pairwise-added into int32 before they could
// overflow) and their float steps are the reference's Seq or Lanes8 chains; the quantizers write
// the reference's bytes. A NEON region (isa-begin.h); kernels-neon.cpp hands the table out.
//
// Integer bounds: the activation quants (Q8_0, Q8_1, Q8_K) lie in [-127, 127] (their
// quantizers never write -128), so a product is at most 128 * 127 = 16256 in magnitude and two
// of them fit an int16 lane for any weight byte; weights of at most 63 in magnitude (Q4_*, Q5_*)
// let four products share a lane (4 * 63 * 128 = 32256).
#include <cmath>
#include <cstdint>

#include "backends/cpu/kernels-neon.h"
#include "backends/cpu/kernels-ref.h"
#include "core/fp16.h"
#include "quant/blocks.h"

#define MINFER_ISA neon
#include "backends/cpu/isa-begin.h"
#include "backends/cpu/neon-common.h"

namespace minfer::cpu::neon {
namespace {

// ---- float types: dot_f32_order ------------------------------------------------------------

// The reference's 8 partial sums acc[i % 8] += a_i * b_i as two 4-lane registers (lanes 0-3,
// 4-7), the tail and the final ((a0 + a4) + (a1 + a5)) + ((a2 + a6) + (a3 + a7)) in scalar.
// load8(i) gives elements i .. i + 7 as two vectors; scalar(i) element i's product.
template <typename Load8, typename Scalar>
float dot_f32_order(int64_t n, Load8 load8, Scalar product) {
  float32x4_t lo = vdupq_n_f32(0.0f), hi = vdupq_n_f32(0.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    float32x4_t a0, a1, b0, b1;
    load8(i, a0, a1, b0, b1);
    lo = vaddq_f32(lo, vmulq_f32(a0, b0));
    hi = vaddq_f32(hi, vmulq_f32(a1, b1));
  }
  float acc[8];
  vst1q_f32(acc, lo);
  vst1q_f32(acc + 4, hi);
  for (; i < n; ++i) acc[i % 8] += product(i);
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

inline void load_f16x8(const uint16_t* p, float32x4_t& lo, float32x4_t& hi) {
  const float16x8_t h = vreinterpretq_f16_u16(vld1q_u16(p));
  lo = vcvt_f32_f16(vget_low_f16(h));
  hi = vcvt_high_f32_f16(h);
}

inline void load_bf16x8(const uint16_t* p, float32x4_t& lo, float32x4_t& hi) {
  const uint16x8_t h = vld1q_u16(p);
  lo = vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(h), 16));
  hi = vreinterpretq_f32_u32(vshll_high_n_u16(h, 16));
}

// ---- block types ---------------------------------------------------------------------------

// The 32 products of a block summed into 4 int32 lanes (any split): weights of at most 63 in
// magnitude, four products per int16 lane.
inline int32x4_t dot32_small(int8x16_t w0, int8x16_t w1, int8x16_t x0, int8x16_t x1) {
  int16x8_t p = vmull_s8(vget_low_s8(w0), vget_low_s8(x0));
  p = vmlal_high_s8(p, w0, x0);
  p = vmlal_s8(p, vget_low_s8(w1), vget_low_s8(x1));
  p = vmlal_high_s8(p, w1, x1);
  return vpaddlq_s16(p);
}

// The same for any weight bytes: two products per int16 lane.
inline int32x4_t dot32_i8(int8x16_t w0, int8x16_t w1, int8x16_t x0, int8x16_t x1) {
  const int16x8_t p0 = vmlal_high_s8(vmull_s8(vget_low_s8(w0), vget_low_s8(x0)), w0, x0);
  const int16x8_t p1 = vmlal_high_s8(vmull_s8(vget_low_s8(w1), vget_low_s8(x1)), w1, x1);
  return vpadalq_s16(vpaddlq_s16(p0), p1);
}

// Lanes8's lanes of 16 elements: [sum e0..3, e4..7, e8..11, e12..15] (weights <= 63).
inline int32x4_t lanes4(int8x16_t w, int8x16_t x) {
  const int16x8_t p0 = vmull_s8(vget_low_s8(w), vget_low_s8(x)), p1 = vmull_high_s8(w, x);
  return vpaddlq_s16(vpaddq_s16(p0, p1));
}

// Q8_0 / Q8_1 activations exactly as the reference: amax by max (exact in any order once no
// lane is NaN), d = amax / 127, q = round-half-even(x * (127 / amax)) by FCVTNS (to nearest,
// ties to even: nearbyint's default mode), narrowed with saturation (|q| <= 127 here, so the
// low byte the reference keeps), Q8_1's sum of the q as an integer. A block with a NaN or an
// infinity, or whose 127 / amax is not finite (a subnormal largest value), takes the
// reference's scalar rules (FCVTNS saturates where the reference writes INT_MIN's low byte).
template <bool kWithSum, typename Block>
void quantize_q8_blocks(const float* x, Block* b, int64_t n) {
  const float32x4_t inf = vdupq_n_f32(INFINITY);
  for (int64_t ib = 0; ib < n / kQK; ++ib, x += kQK) {
    float32x4_t v[8], m[8];
    uint32x4_t finite = vdupq_n_u32(~0u);
    for (int j = 0; j < 8; ++j) {
      v[j] = vld1q_f32(x + 4 * j);
      m[j] = vabsq_f32(v[j]);
      finite = vandq_u32(finite, vcltq_f32(m[j], inf));  // false for NaN and +-inf
    }
    for (int w = 4; w >= 1; w /= 2)
      for (int j = 0; j < w; ++j) m[j] = vmaxq_f32(m[j], m[j + w]);
    const float amax = vmaxvq_f32(m[0]);
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    if (vminvq_u32(finite) == 0 || !std::isfinite(id)) {
      if constexpr (kWithSum) ref::quantize_q8_1(x, &b[ib], kQK);
      else ref::quantize_q8_0(x, &b[ib], kQK);
      continue;
    }
    const float32x4_t mul = vdupq_n_f32(id);
    int32x4_t q[8];
    for (int j = 0; j < 8; ++j) q[j] = vcvtnq_s32_f32(vmulq_f32(v[j], mul));
    for (int j = 0; j < 8; j += 4) {
      const int16x8_t lo = vcombine_s16(vqmovn_s32(q[j]), vqmovn_s32(q[j + 1]));
      const int16x8_t hi = vcombine_s16(vqmovn_s32(q[j + 2]), vqmovn_s32(q[j + 3]));
      vst1q_s8(b[ib].qs + 4 * j, vcombine_s8(vqmovn_s16(lo), vqmovn_s16(hi)));
    }
    b[ib].d = fp32_to_fp16(d);
    if constexpr (kWithSum) {
      int32x4_t t = vaddq_s32(vaddq_s32(q[0], q[1]), vaddq_s32(q[2], q[3]));
      t = vaddq_s32(t, vaddq_s32(vaddq_s32(q[4], q[5]), vaddq_s32(q[6], q[7])));
      b[ib].s = fp32_to_fp16(static_cast<float>(vaddvq_s32(t)) * d);
    }
  }
}

}  // namespace

float vec_dot_f32(int64_t n, const void* w, const void* x) {
  const float* a = static_cast<const float*>(w);
  const float* b = static_cast<const float*>(x);
  return dot_f32_order(
      n,
      [&](int64_t i, float32x4_t& a0, float32x4_t& a1, float32x4_t& b0, float32x4_t& b1) {
        a0 = vld1q_f32(a + i), a1 = vld1q_f32(a + i + 4);
        b0 = vld1q_f32(b + i), b1 = vld1q_f32(b + i + 4);
      },
      [&](int64_t i) { return a[i] * b[i]; });
}

float vec_dot_f16(int64_t n, const void* w, const void* x) {
  const uint16_t* a = static_cast<const uint16_t*>(w);
  const uint16_t* b = static_cast<const uint16_t*>(x);
  return dot_f32_order(
      n,
      [&](int64_t i, float32x4_t& a0, float32x4_t& a1, float32x4_t& b0, float32x4_t& b1) {
        load_f16x8(a + i, a0, a1);
        load_f16x8(b + i, b0, b1);
      },
      [&](int64_t i) { return fp16(a[i]) * fp16(b[i]); });
}

float vec_dot_bf16(int64_t n, const void* w, const void* x) {
  const uint16_t* a = static_cast<const uint16_t*>(w);
  const uint16_t* b = static_cast<const uint16_t*>(x);
  return dot_f32_order(
      n,
      [&](int64_t i, float32x4_t& a0, float32x4_t& a1, float32x4_t& b0, float32x4_t& b1) {
        load_bf16x8(a + i, a0, a1);
        load_bf16x8(b + i, b0, b1);
      },
      [&](int64_t i) { return bf16_to_fp32(a[i]) * bf16_to_fp32(b[i]); });
}

float vec_dot_q4_0(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const BlockQ4_0*>(w);
  const auto* b = static_cast<const BlockQ8_0*>(x);
  return seq_blocks<false>(a, b, n / kQK, [&](int64_t k) {
    const Nibbles q = nibbles(a[k].qs);
    const int8x16_t w0 = vsubq_s8(vreinterpretq_s8_u8(q.lo), vdupq_n_s8(8));
    const int8x16_t w1 = vsubq_s8(vreinterpretq_s8_u8(q.hi), vdupq_n_s8(8));
    return dot32_small(w0, w1, x_lo(b[k]), x_hi(b[k]));
  });
}

// Lanes8 (vec-dot-ref.cpp): lanes 0-3 and 4-7 of the 8 group sums in two registers, one fma
// per lane and block; the mins' products summed in block order, added last.
float vec_dot_q4_1(int64_t n, const void* w, const void* x) {
  return q4_1_lanes8(n, static_cast<const BlockQ4_1*>(w), static_cast<const BlockQ8_1*>(x),
                     [](int8x16_t wq, int8x16_t xq) { return lanes4(wq, xq); });
}

float vec_dot_q5_0(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const BlockQ5_0*>(w);
  const auto* b = static_cast<const BlockQ8_0*>(x);
  return seq_blocks<false>(a, b, n / kQK, [&](int64_t k) {
    const Nibbles q = nibbles(a[k].qs), h = bits_to_bytes(a[k].qh);
    return dot32_small(q5_0_signed(q.lo, h.lo), q5_0_signed(q.hi, h.hi), x_lo(b[k]), x_hi(b[k]));
  });
}

float vec_dot_q5_1(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const BlockQ5_1*>(w);
  const auto* b = static_cast<const BlockQ8_1*>(x);
  return seq_blocks<true>(a, b, n / kQK, [&](int64_t k) {
    const Nibbles q = nibbles(a[k].qs), h = bits_to_bytes(a[k].qh);
    return dot32_small(q5_1_unsigned(q.lo, h.lo), q5_1_unsigned(q.hi, h.hi), x_lo(b[k]), x_hi(b[k]));
  });
}

float vec_dot_q8_0(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const BlockQ8_0*>(w);
  const auto* b = static_cast<const BlockQ8_0*>(x);
  return seq_blocks<false>(a, b, n / kQK,
                           [&](int64_t k) { return dot32_i8(x_lo(a[k]), x_hi(a[k]), x_lo(b[k]), x_hi(b[k])); });
}

float vec_dot_iq4_nl(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const BlockIQ4_NL*>(w);
  const auto* b = static_cast<const BlockQ8_0*>(x);
  const int8x16_t table = iq4nl_table();
  return seq_blocks<false>(a, b, n / kQK, [&](int64_t k) {
    const Nibbles q = nibbles(a[k].qs);
    return dot32_i8(vqtbl1q_s8(table, q.lo), vqtbl1q_s8(table, q.hi), x_lo(b[k]), x_hi(b[k]));
  });
}

// ---- activation quantizers -------------------------------------------------------------------

void quantize_q8_0(const float* x, void* y, int64_t n) { quantize_q8_blocks<false>(x, static_cast<BlockQ8_0*>(y), n); }
void quantize_q8_1(const float* x, void* y, int64_t n) { quantize_q8_blocks<true>(x, static_cast<BlockQ8_1*>(y), n); }

// F16 activations: FCVTN rounds to nearest even, overflows to infinity, and turns a NaN into a
// quiet NaN with its top mantissa bits (FPCR.DN is clear on Linux and macOS): fp32_to_fp16's
// bits for every input.
void quantize_f16(const float* x, void* y, int64_t n) {
  auto* o = static_cast<uint16_t*>(y);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const float16x8_t h = vcvt_high_f16_f32(vcvt_f16_f32(vld1q_f32(x + i)), vld1q_f32(x + i + 4));
    vst1q_u16(o + i, vreinterpretq_u16_f16(h));
  }
  for (; i < n; ++i) o[i] = fp32_to_fp16(x[i]);
}

// BF16 activations, fp32_to_bf16's integer rounding on four lanes: bits + 0x7fff + (bit 16),
// the top half; a NaN keeps its top half with the quiet bit set.
void quantize_bf16(const float* x, void* y, int64_t n) {
  auto* o = static_cast<uint16_t*>(y);
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const float32x4_t v = vld1q_f32(x + i);
    const uint32x4_t u = vreinterpretq_u32_f32(v);
    const uint32x4_t r = vaddq_u32(u, vaddq_u32(vdupq_n_u32(0x7fff), vandq_u32(vshrq_n_u32(u, 16), vdupq_n_u32(1))));
    const uint16x4_t nan = vorr_u16(vshrn_n_u32(u, 16), vdup_n_u16(0x40));
    const uint16x4_t is_num = vmovn_u32(vceqq_f32(v, v));
    vst1_u16(o + i, vbsl_u16(is_num, vshrn_n_u32(r, 16), nan));
  }
  for (; i < n; ++i) o[i] = fp32_to_bf16(x[i]);
}

}  // namespace minfer::cpu::neon
#include "backends/cpu/isa-end.h"
