// ARMv8.0 Advanced SIMD form of kernels.h's SiluRowFn with the reference's steps (vec-dot-ref.cpp):
// e = exp_poly(0 - x) on 4 lanes, then x / (1 + e) (FDIV, correctly rounded); the row's last
// n % 16 values by libm's expf. Every value is the reference's bits. A NEON region
// (isa-begin.h); kernels-neon.cpp hands the table out.
#include <cmath>
#include <cstdint>

#include "backends/cpu/kernels-neon.h"
#include "backends/cpu/kernels.h"

#define MINFER_ISA neon
#include "backends/cpu/isa-begin.h"
#include "backends/cpu/neon-float.h"

namespace minfer::cpu::neon {

void silu_row(int64_t n, float* y, const float* x) {
  const int64_t nv = n / 16 * 16;
  const float32x4_t one = vdupq_n_f32(1.0f), zero = vdupq_n_f32(0.0f);
  for (int64_t i = 0; i < nv; i += 16)
    for (int j = 0; j < 16; j += 4) {
      const float32x4_t v = vld1q_f32(x + i + j);
      const float32x4_t e = exp_poly4(vsubq_f32(zero, v));
      vst1q_f32(y + i + j, vdivq_f32(v, vaddq_f32(one, e)));
    }
  for (int64_t i = nv; i < n; ++i) y[i] = x[i] / (1.0f + std::exp(-x[i]));
}

}  // namespace minfer::cpu::neon

#include "backends/cpu/isa-end.h"
