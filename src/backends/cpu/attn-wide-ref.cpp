// Scalar wide-batch attention (kernels.h, AttnWideFn): the reference of attn-wide-avx2.cpp.
#include <algorithm>
#include <cmath>

#include "backends/cpu/kernels-ref.h"
#include "core/fp16.h"

namespace minfer::cpu::ref {

void attn_wide(const AttnWideArgs& a) {
  float* acc = a.scratch;                      // [G][hd_v]
  float* kf = a.scratch + a.G * a.hd_v;        // [8][hd]
  float* vf = kf + 8 * a.hd;                   // [8][hd_v]
  std::fill(acc, acc + a.G * a.hd_v, 0.0f);
  float m[64], l[64];
  const int64_t G = a.G;
  for (int64_t r = 0; r < G; ++r) {
    m[r] = -INFINITY;
    l[r] = 0.0f;
  }
  auto load = [&](const uint8_t* row, int64_t n, float* out) {
    if (a.f16)
      for (int64_t i = 0; i < n; ++i) out[i] = f16_lookup(reinterpret_cast<const uint16_t*>(row)[i]);
    else
      for (int64_t i = 0; i < n; ++i) out[i] = reinterpret_cast<const float*>(row)[i];
  };
  for (int64_t j0 = 0; j0 < a.n_kv; j0 += 8) {
    const int nb = static_cast<int>(std::min<int64_t>(8, a.n_kv - j0));
    for (int k = 0; k < nb; ++k) {
      load(a.k_at(j0 + k), a.hd, kf + k * a.hd);
      load(a.v_at(j0 + k), a.hd_v, vf + k * a.hd_v);
    }
    for (int64_t r = 0; r < G; ++r) {
      const float* q = a.q + r * a.q_stride;
      float s[8], bm = -INFINITY;
      for (int k = 0; k < nb; ++k) {
        float d = 0.0f;
        for (int64_t i = 0; i < a.hd; ++i) d = std::fma(q[i], kf[k * a.hd + i], d);
        s[k] = d * a.scale;
        if (a.softcap > 0.0f) s[k] = a.softcap * std::tanh(s[k]);
        bm = std::max(bm, s[k]);
      }
      const float nm = std::max(m[r], bm);
      const float corr = exp_poly(m[r] - nm);
      float psum = 0.0f;
      for (int k = 0; k < nb; ++k) psum += (s[k] = exp_poly(s[k] - nm));
      l[r] = l[r] * corr + psum;
      m[r] = nm;
      float* ar = acc + r * a.hd_v;
      for (int64_t i = 0; i < a.hd_v; ++i) {
        float v = ar[i] * corr;
        for (int k = 0; k < nb; ++k) v = std::fma(s[k], vf[k * a.hd_v + i], v);
        ar[i] = v;
      }
    }
  }
  for (int64_t r = 0; r < G; ++r) {
    const float inv = 1.0f / l[r];
    for (int64_t i = 0; i < a.hd_v; ++i) a.y[r * a.y_stride + i] = acc[r * a.hd_v + i] * inv;
  }
}

}  // namespace minfer::cpu::ref
