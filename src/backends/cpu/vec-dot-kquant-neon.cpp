// ARMv8.0 Advanced SIMD dot products of the super-block types with Q8_K activations
// (vec-dot-kquant-arm.h over widening multiplies), and the Q8_K activation quantizer; each
// bit-identical to its reference (vec-dot-kquant-ref.cpp, quant/k-dequant.cpp). A NEON region
// (isa-begin.h); kernels-neon.cpp hands the table out.
#include <cmath>
#include <cstdint>

#include "backends/cpu/kernels-neon.h"
#include "backends/cpu/kernels-ref.h"
#include "quant/blocks.h"

#define MINFER_ISA neon
#include "backends/cpu/isa-begin.h"
#include "backends/cpu/neon-common.h"
#include "backends/cpu/vec-dot-kquant-arm.h"

namespace minfer::cpu::neon {
namespace {

// Products by SMULL/SMLAL into int16 lanes, widened (SADDLP) before they could overflow: with
// |x| <= 127, a lane holds 2 products of any weight byte (2 * 128 * 127 < 2^15), and sums of 8
// products of |q| <= 32 (8 * 32 * 127 = 32512).
struct Prod {
  using Sub16 = int16x8_t;  // lane = 2 products
  static int16x8_t dot16(int8x16_t q, int8x16_t x) { return vmlal_high_s8(vmull_s8(vget_low_s8(q), vget_low_s8(x)), q, x); }
  static int32x4_t sums4_16(int16x8_t p0, int16x8_t p1, int16x8_t p2, int16x8_t p3) {
    return vpaddlq_s16(vpaddq_s16(vpaddq_s16(p0, p1), vpaddq_s16(p2, p3)));  // 4, 8, then 16 products
  }
  using Sub32 = int16x8_t;  // lane = 4 products
  static int16x8_t dot32(int8x16_t q0, int8x16_t q1, int8x16_t x0, int8x16_t x1) {
    int16x8_t p = vmull_s8(vget_low_s8(q0), vget_low_s8(x0));
    p = vmlal_high_s8(p, q0, x0);
    p = vmlal_s8(p, vget_low_s8(q1), vget_low_s8(x1));
    return vmlal_high_s8(p, q1, x1);
  }
  static int32x4_t sums4_32(int16x8_t p0, int16x8_t p1, int16x8_t p2, int16x8_t p3) {
    return vpaddq_s32(vpaddlq_s16(vpaddq_s16(p0, p1)), vpaddlq_s16(vpaddq_s16(p2, p3)));  // 8 products, then int32
  }
  static int32x4_t dot32_wide(int8x16_t q0, int8x16_t q1, int8x16_t x0, int8x16_t x1) {
    return vpadalq_s16(vpaddlq_s16(dot16(q0, x0)), dot16(q1, x1));
  }
};

}  // namespace

float vec_dot_q2_k(int64_t n, const void* w, const void* x) { return vec_dot_q2_k_impl<Prod>(n, w, x); }
float vec_dot_q3_k(int64_t n, const void* w, const void* x) { return vec_dot_q3_k_impl<Prod>(n, w, x); }
float vec_dot_q4_k(int64_t n, const void* w, const void* x) { return vec_dot_q45_k_impl<Prod, BlockQ4_K, false>(n, w, x); }
float vec_dot_q5_k(int64_t n, const void* w, const void* x) { return vec_dot_q45_k_impl<Prod, BlockQ5_K, true>(n, w, x); }
float vec_dot_q6_k(int64_t n, const void* w, const void* x) { return vec_dot_q6_k_impl<Prod>(n, w, x); }
float vec_dot_iq4_xs(int64_t n, const void* w, const void* x) { return vec_dot_iq4_xs_impl<Prod>(n, w, x); }

// Q8_K activations byte for byte as the reference (quant/k-dequant.cpp quantize_q8_k, ggml's):
// per super-block of 256, the element of largest magnitude (the first one on ties) is `max`,
// iscale = -127 / max, q = min(127, round-half-even(iscale * x)), bsums = the sums of each 16 q,
// d = 1 / iscale. amax by max over |x| (exact in any order), the first element reaching it by
// a compare, the products rounded by FCVTNS (nearbyint's mode). A super-block holding NaN or
// infinity, an all-zero one, or one whose scale overflows (a subnormal max) goes to the
// reference (its scalar rules).
void quantize_q8_k(const float* x, void* y, int64_t n) {
  auto* b = static_cast<BlockQ8_K*>(y);
  const float32x4_t inf = vdupq_n_f32(INFINITY);
  for (int64_t ib = 0; ib < n / kQKK; ++ib, x += kQKK) {
    float32x4_t m[4] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
    uint32x4_t finite = vdupq_n_u32(~0u);
    for (int i = 0; i < kQKK; i += 16)
      for (int k = 0; k < 4; ++k) {
        const float32x4_t v = vabsq_f32(vld1q_f32(x + i + 4 * k));
        finite = vandq_u32(finite, vcltq_f32(v, inf));  // false for NaN and +-inf
        m[k] = vmaxq_f32(m[k], v);
      }
    const float amax = vmaxvq_f32(vmaxq_f32(vmaxq_f32(m[0], m[1]), vmaxq_f32(m[2], m[3])));
    if (vminvq_u32(finite) == 0 || amax == 0.0f) {
      ref::quantize_q8_k(x, b + ib, kQKK);
      continue;
    }
    int first = 0;  // the first element whose magnitude is amax
    const float32x4_t am = vdupq_n_f32(amax);
    for (int i = 0; i < kQKK; i += 4)
      if (vmaxvq_u32(vceqq_f32(vabsq_f32(vld1q_f32(x + i)), am)) != 0) {
        first = i;
        while (std::fabs(x[first]) != amax) ++first;
        break;
      }
    const float iscale = -127.0f / x[first];
    if (!std::isfinite(iscale)) {
      ref::quantize_q8_k(x, b + ib, kQKK);
      continue;
    }
    BlockQ8_K& o = b[ib];
    const float32x4_t mul = vdupq_n_f32(iscale);
    const int32x4_t top = vdupq_n_s32(127);
    for (int i = 0; i < kQKK; i += 16) {
      int32x4_t q[4];
      for (int k = 0; k < 4; ++k) q[k] = vminq_s32(vcvtnq_s32_f32(vmulq_f32(vld1q_f32(x + i + 4 * k), mul)), top);
      const int16x8_t lo = vcombine_s16(vqmovn_s32(q[0]), vqmovn_s32(q[1]));  // q >= -127: no saturation
      const int16x8_t hi = vcombine_s16(vqmovn_s32(q[2]), vqmovn_s32(q[3]));
      const int8x16_t q8 = vcombine_s8(vqmovn_s16(lo), vqmovn_s16(hi));
      vst1q_s8(o.qs + i, q8);
      o.bsums[i / 16] = vaddlvq_s8(q8);
    }
    o.d = 1.0f / iscale;
  }
}

}  // namespace minfer::cpu::neon
#include "backends/cpu/isa-end.h"
