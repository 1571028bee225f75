// Dot products of the 32-element block types with SDOT (ARMv8.2 FEAT_DotProd), bit-identical
// to the references (vec-dot-ref.cpp): the integer block sums are exact, and the float steps
// are the reference's, one fma per block in block order. A dotprod region (isa-begin.h);
// kernels-neon.cpp hands the table out.
#include <cmath>
#include <cstdint>

#include "backends/cpu/kernels-neon.h"
#include "quant/blocks.h"

#define MINFER_ISA dotprod
#include "backends/cpu/isa-begin.h"

namespace minfer::cpu::dotprod {
namespace {

// The exact integer sums of 4 blocks of products: [sum_0, sum_1, sum_2, sum_3] of blocks p..p+3.
inline int32x4_t block_sums4(const BlockQ8_0* a, const BlockQ8_0* b) {
  int32x4_t s[4];
  for (int k = 0; k < 4; ++k) {
    s[k] = vdotq_s32(vdupq_n_s32(0), vld1q_s8(a[k].qs), vld1q_s8(b[k].qs));
    s[k] = vdotq_s32(s[k], vld1q_s8(a[k].qs + 16), vld1q_s8(b[k].qs + 16));
  }
  return vpaddq_s32(vpaddq_s32(s[0], s[1]), vpaddq_s32(s[2], s[3]));
}

// The blocks' f16 scales widened (exactly) to f32, four at a time.
inline float32x4_t scales4(const BlockQ8_0* p) {
  const uint16_t h[4] = {p[0].d, p[1].d, p[2].d, p[3].d};
  return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(h)));
}

}  // namespace

// s = fma(d_w * d_x, sum_i w_i x_i, s) per block in order (ref's Seq): four blocks' integer
// sums and scale products at once, then their four fmas one after another.
float vec_dot_q8_0(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const BlockQ8_0*>(w);
  const auto* b = static_cast<const BlockQ8_0*>(x);
  const int64_t nb = n / kQK;
  float s = 0.0f;
  int64_t ib = 0;
  for (; ib + 4 <= nb; ib += 4) {
    const float32x4_t f = vcvtq_f32_s32(block_sums4(a + ib, b + ib));  // |sum| <= 2^19: exact
    const float32x4_t d = vmulq_f32(scales4(a + ib), scales4(b + ib));
    s = std::fma(vgetq_lane_f32(d, 0), vgetq_lane_f32(f, 0), s);
    s = std::fma(vgetq_lane_f32(d, 1), vgetq_lane_f32(f, 1), s);
    s = std::fma(vgetq_lane_f32(d, 2), vgetq_lane_f32(f, 2), s);
    s = std::fma(vgetq_lane_f32(d, 3), vgetq_lane_f32(f, 3), s);
  }
  for (; ib < nb; ++ib) {
    int32x4_t acc = vdotq_s32(vdupq_n_s32(0), vld1q_s8(a[ib].qs), vld1q_s8(b[ib].qs));
    acc = vdotq_s32(acc, vld1q_s8(a[ib].qs + 16), vld1q_s8(b[ib].qs + 16));
    const float dw = vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(a[ib].d))), 0);
    const float dx = vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(b[ib].d))), 0);
    s = std::fma(dw * dx, static_cast<float>(vaddvq_s32(acc)), s);
  }
  return s;
}

}  // namespace minfer::cpu::dotprod
#include "backends/cpu/isa-end.h"
