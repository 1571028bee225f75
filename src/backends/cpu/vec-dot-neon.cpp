// ARMv8.0 Advanced SIMD activation quantizers, byte-identical to the references
// (vec-dot-ref.cpp). A NEON region (isa-begin.h); kernels-neon.cpp hands the table out.
#include <cmath>
#include <cstdint>

#include "backends/cpu/kernels-neon.h"
#include "backends/cpu/kernels-ref.h"
#include "core/fp16.h"
#include "quant/blocks.h"

#define MINFER_ISA neon
#include "backends/cpu/isa-begin.h"

namespace minfer::cpu::neon {

// Q8_0 activations exactly as the reference: amax by max (exact in any order once no lane is
// NaN), d = amax / 127, q = round-half-even(x * (127 / amax)) by FCVTNS (to nearest, ties to
// even: nearbyint's default mode), narrowed with saturation (|q| <= 127 here, so the low byte
// the reference keeps). A block with a NaN or an infinity, or whose 127 / amax is not finite
// (a subnormal largest value), takes the reference's scalar rules (FCVTNS saturates where the
// reference writes INT_MIN's low byte).
void quantize_q8_0(const float* x, void* y, int64_t n) {
  auto* b = static_cast<BlockQ8_0*>(y);
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
      ref::quantize_q8_0(x, &b[ib], kQK);
      continue;
    }
    const float32x4_t mul = vdupq_n_f32(id);
    for (int j = 0; j < 8; j += 4) {
      const int16x8_t lo = vcombine_s16(vqmovn_s32(vcvtnq_s32_f32(vmulq_f32(v[j], mul))),
                                        vqmovn_s32(vcvtnq_s32_f32(vmulq_f32(v[j + 1], mul))));
      const int16x8_t hi = vcombine_s16(vqmovn_s32(vcvtnq_s32_f32(vmulq_f32(v[j + 2], mul))),
                                        vqmovn_s32(vcvtnq_s32_f32(vmulq_f32(v[j + 3], mul))));
      vst1q_s8(b[ib].qs + 4 * j, vcombine_s8(vqmovn_s16(lo), vqmovn_s16(hi)));
    }
    b[ib].d = fp32_to_fp16(d);
  }
}

}  // namespace minfer::cpu::neon
#include "backends/cpu/isa-end.h"
