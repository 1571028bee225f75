// Scalar tiled attention (kernels.h, AttnTileFn): the reference of attn-tile-avx2.cpp and
// attn-tile-avx512.cpp, which run the same per-row float steps with the rows in vector lanes.
#include <algorithm>
#include <cmath>

#include "backends/cpu/kernels-ref.h"
#include "core/fp16.h"

namespace minfer::cpu::ref {
namespace {

constexpr int64_t kL = kAttnTileMaxRows, kB = kAttnTileKeys;

// e(x) of kernels.h: exp_poly of x clamped to [-87, 0].
inline float exp_clamped(float x) { return exp_poly(std::min(std::max(x, -87.0f), 0.0f)); }

}  // namespace

void attn_tile(const AttnTileArgs& a) {
  const int64_t R = a.T * a.G, hd = a.hd, hd_v = a.hd_v;
  const AttnTileScratch sc(a.scratch, hd, hd_v);
  float *qt = sc.qt, *ot = sc.ot, *kf = sc.kf, *vf = sc.vf, *pt = sc.pt, *m = sc.m, *l = sc.l, *c = sc.c;
  int64_t n_kv[kAttnTileMaxRows];  // [R] keys each row sees
  int64_t n_max = 0;
  for (int64_t r = 0; r < R; ++r) {
    const int64_t t = r / a.G, g = r % a.G;
    const float* q = a.q + t * a.q_tok + g * hd;
    for (int64_t i = 0; i < hd; ++i) qt[i * kL + r] = q[i];
    for (int64_t d = 0; d < hd_v; ++d) ot[d * kL + r] = 0.0f;
    n_kv[r] = a.n_kv[t];
    n_max = std::max(n_max, n_kv[r]);
    m[r] = -INFINITY;
    l[r] = 0.0f;
  }
  auto widen = [&](const uint8_t* row, int64_t n, float* out) {
    if (a.to_f32) return a.to_f32(n, row, out);
    for (int64_t i = 0; i < n; ++i)
      out[i] = a.f16 ? f16_lookup(reinterpret_cast<const uint16_t*>(row)[i]) : reinterpret_cast<const float*>(row)[i];
  };
  for (int64_t j0 = 0; j0 < n_max; j0 += kB) {
    const int64_t nb = std::min(kB, n_max - j0);
    for (int64_t k = 0; k < nb; ++k) {
      widen(a.k + static_cast<size_t>(j0 + k) * a.k_row, hd, kf + k * hd);
      widen(a.v + static_cast<size_t>(j0 + k) * a.v_row, hd_v, vf + k * hd_v);
    }
    for (int64_t k = 0; k < nb; ++k)
      for (int64_t r = 0; r < R; ++r) {
        float s = 0.0f;
        for (int64_t i = 0; i < hd; ++i) s = std::fma(qt[i * kL + r], kf[k * hd + i], s);
        s *= a.scale;
        if (a.softcap > 0.0f) s = a.softcap * std::tanh(s);
        pt[k * kL + r] = s;
      }
    for (int64_t r = 0; r < R; ++r) {
      float bm = -INFINITY;
      for (int64_t k = 0; k < nb; ++k)
        if (j0 + k < n_kv[r]) bm = std::max(bm, pt[k * kL + r]);
      const float nm = std::max(m[r], bm);
      c[r] = exp_clamped(m[r] - nm);
      float sum = 0.0f;
      for (int64_t k = 0; k < nb; ++k) {
        const float p = j0 + k < n_kv[r] ? exp_clamped(pt[k * kL + r] - nm) : 0.0f;
        pt[k * kL + r] = p;
        sum += p;
      }
      l[r] = std::fma(l[r], c[r], sum);
      m[r] = nm;
    }
    for (int64_t d = 0; d < hd_v; ++d)
      for (int64_t r = 0; r < R; ++r) {
        float o = ot[d * kL + r] * c[r];
        for (int64_t k = 0; k < nb; ++k) o = std::fma(pt[k * kL + r], vf[k * hd_v + d], o);
        ot[d * kL + r] = o;
      }
  }
  for (int64_t r = 0; r < R; ++r) {
    const int64_t t = r / a.G, g = r % a.G;
    const float inv = 1.0f / l[r];
    float* y = a.y + t * a.y_tok + g * hd_v;
    for (int64_t d = 0; d < hd_v; ++d) y[d] = ot[d * kL + r] * inv;
  }
}

}  // namespace minfer::cpu::ref
