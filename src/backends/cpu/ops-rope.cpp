// Rotary position embedding. For pair i of a head (i < n_rot/2) at position p:
//   theta_i = freq_scale * p * base^(-2i/n_rot) / factor_i
//   (a, b) -> (a cos theta_i - b sin theta_i, a sin theta_i + b cos theta_i)
// NORM pairs elements (2i, 2i+1); NEOX pairs (i, i + n_rot/2). Elements past n_rot are kept.
// theta_i is built by repeated multiplication with base^(-2/n_rot), in f32, as llama.cpp does:
// the angles then agree to the last bit on the positions that matter for comparisons, and the
// rotation fuses the first product into the subtraction or addition (fma(a, cos, -(b sin)),
// k.rope_row), as llama.cpp's build does: the outputs agree to the bit
// (tests/oracle/llama/compare_dumps.py).
// The angles' cos and sin come from the backend's RopeAngles when an earlier rope of the same
// positions and parameters computed them (rope-angles.h).
#include <cmath>
#include <vector>

#include "backends/cpu/ops.h"
#include "backends/cpu/rope-angles.h"
#include "core/status.h"

namespace minfer::cpu {

void op_rope(const OpContext& c, const OpArgs& a) {
  const Node& n = *a.dst.node;
  const int64_t hd = n.ne[0], n_head = n.ne[1], n_tokens = n.ne[2];
  const int n_rot = n.params.n_rot;
  const int64_t half = n_rot / 2;
  const bool neox = n.params.rope_mode == RopeMode::kNeox;
  const float freq_scale = n.params.rope_freq_scale;
  const float theta_scale = std::pow(n.params.rope_freq_base, -2.0f / static_cast<float>(n_rot));
  const float* factors = a.src[2].node ? a.src[2].f32() : nullptr;  // [n_rot/2] or none
  const float* x = a.src[0].f32();
  const int32_t* pos = a.src[1].i32();
  float* y = a.dst.f32();
  MINFER_ASSERT(n_rot <= 2 * kMaxHeadDim);
  // [n_tokens][2][n_rot/2] cos, sin: from an earlier rope of these positions, or filled below.
  const RopeAngles::Key key{n_rot, n.params.rope_freq_base, freq_scale, factors};
  const float* cached = c.rope ? c.rope->find(key, pos, n_tokens) : nullptr;
  std::vector<float> local;
  float* fill = nullptr;
  if (!cached) {
    if (c.rope) {
      fill = c.rope->insert(key, pos, n_tokens);
    } else {
      local.resize(static_cast<size_t>(n_tokens * half * 2));
      fill = local.data();
    }
  }
  const float* cs = cached ? cached : fill;
  c.pool.parallel_for(n_tokens, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const float* cos_t = cs + t * half * 2;  // this token's [cos | sin]
      const float* sin_t = cos_t + half;
      if (fill) {
        float* f = fill + t * half * 2;
        float theta = static_cast<float>(pos[t]);
        for (int64_t i = 0; i < half; ++i) {
          const float th = freq_scale * (factors ? theta / factors[i] : theta);
          f[i] = std::cos(th);
          f[half + i] = std::sin(th);
          theta *= theta_scale;
        }
      }
      for (int64_t h = 0; h < n_head; ++h) {
        const float* xr = x + (t * n_head + h) * hd;
        float* yr = y + (t * n_head + h) * hd;
        c.k.rope_row(half, neox, cos_t, sin_t, xr, yr);
        if (yr != xr)
          for (int64_t i = n_rot; i < hd; ++i) yr[i] = xr[i];
      }
    }
  }, 1);
}

}  // namespace minfer::cpu
