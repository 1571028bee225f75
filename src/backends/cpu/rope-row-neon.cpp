// ARMv8.0 Advanced SIMD form of kernels.h's RopeRowFn, 4 pairs per step with rope-row.cpp's
// roundings: y0 = fma(a, c, -(b s)) (the product b s rounded, negated exactly, then one fused
// step: not FMLS, whose a c - b s would give -0 where a c == b s), y1 = fma(a, s, b c). NEOX
// pairs are two contiguous runs; NORM pairs sit side by side, and LD2 / ST2 split them into the
// a and b runs and back. A NEON region (isa-begin.h); kernels-neon.cpp hands the table out.
#include <cmath>
#include <cstdint>

#include "backends/cpu/kernels-neon.h"

#define MINFER_ISA neon
#include "backends/cpu/isa-begin.h"

namespace minfer::cpu::neon {
namespace {

inline void rotate(float32x4_t a, float32x4_t b, float32x4_t c, float32x4_t s, float32x4_t& y0, float32x4_t& y1) {
  y0 = vfmaq_f32(vnegq_f32(vmulq_f32(b, s)), a, c);
  y1 = vfmaq_f32(vmulq_f32(b, c), a, s);
}

}  // namespace

void rope_row(int64_t half, bool neox, const float* cos, const float* sin, const float* x, float* y) {
  int64_t i = 0;
  if (neox) {
    for (; i + 4 <= half; i += 4) {
      float32x4_t y0, y1;
      rotate(vld1q_f32(x + i), vld1q_f32(x + half + i), vld1q_f32(cos + i), vld1q_f32(sin + i), y0, y1);
      vst1q_f32(y + i, y0);
      vst1q_f32(y + half + i, y1);
    }
  } else {
    for (; i + 4 <= half; i += 4) {
      const float32x4x2_t ab = vld2q_f32(x + 2 * i);  // a0 a1 a2 a3, b0 b1 b2 b3
      float32x4x2_t out;
      rotate(ab.val[0], ab.val[1], vld1q_f32(cos + i), vld1q_f32(sin + i), out.val[0], out.val[1]);
      vst2q_f32(y + 2 * i, out);
    }
  }
  for (; i < half; ++i) {
    const int64_t i0 = neox ? i : 2 * i, i1 = neox ? i + half : 2 * i + 1;
    const float a = x[i0], b = x[i1];
    y[i0] = std::fma(a, cos[i], -(b * sin[i]));
    y[i1] = std::fma(a, sin[i], b * cos[i]);
  }
}

}  // namespace minfer::cpu::neon

#include "backends/cpu/isa-end.h"
