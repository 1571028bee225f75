// AVX2 tiled attention (kernels.h, AttnTileFn): up to 32 query rows in 4 vectors of 8 lanes
// (16 registers: 2 keys x 4 row vectors of scores, 2 dimensions x 4 row vectors of V sums).
// Per lane the float steps are attn-tile-ref.cpp's, so the result is the reference's bit for
// bit. Compiled alone with -mavx2 -mfma -mf16c.
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "backends/cpu/avx2-common.h"
#include "backends/cpu/kernels-avx2.h"
#include "backends/cpu/kernels-ref.h"

namespace minfer::cpu::avx2 {
namespace {

constexpr int64_t kL = kAttnTileMaxRows, kB = kAttnTileKeys;

inline __m256 exp_clamped(__m256 x) {
  return exp_poly8(_mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.0f)), _mm256_setzero_ps()));
}

inline void widen(const uint8_t* row, int64_t n, bool f16, float* out) {
  if (f16) {
    for (int64_t i = 0; i < n; i += 8)
      _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * i))));
  } else {
    for (int64_t i = 0; i < n; i += 8) _mm256_storeu_ps(out + i, _mm256_loadu_ps(reinterpret_cast<const float*>(row) + i));
  }
}

// Scores of keys k0, k0 + 1 for the NV row vectors: pt[k][rows] = (q . k) * scale.
template <int NV>
inline void scores2(const float* qt, const float* kf, int64_t hd, int64_t k0, __m256 scale, float* pt) {
  __m256 acc[2][NV];
  for (int kk = 0; kk < 2; ++kk)
    for (int v = 0; v < NV; ++v) acc[kk][v] = _mm256_setzero_ps();
  const float* k = kf + k0 * hd;
  for (int64_t i = 0; i < hd; ++i) {
    __m256 q[NV];
    for (int v = 0; v < NV; ++v) q[v] = _mm256_load_ps(qt + i * kL + 8 * v);
    for (int kk = 0; kk < 2; ++kk) {
      const __m256 b = _mm256_set1_ps(k[kk * hd + i]);
      for (int v = 0; v < NV; ++v) acc[kk][v] = _mm256_fmadd_ps(q[v], b, acc[kk][v]);
    }
  }
  for (int kk = 0; kk < 2; ++kk)
    for (int v = 0; v < NV; ++v) _mm256_store_ps(pt + (k0 + kk) * kL + 8 * v, _mm256_mul_ps(acc[kk][v], scale));
}

// o[d, d + 1][rows] = o * c, then fma(p_k, v_k[d], o) for the block's keys in order.
template <int NV>
inline void vsum2(float* ot, const float* pt, const float* vf, int64_t hd_v, int64_t d, int64_t nb, const float* c) {
  __m256 acc[2][NV];
  for (int dd = 0; dd < 2; ++dd)
    for (int v = 0; v < NV; ++v)
      acc[dd][v] = _mm256_mul_ps(_mm256_load_ps(ot + (d + dd) * kL + 8 * v), _mm256_load_ps(c + 8 * v));
  for (int64_t k = 0; k < nb; ++k) {
    __m256 p[NV];
    for (int v = 0; v < NV; ++v) p[v] = _mm256_load_ps(pt + k * kL + 8 * v);
    for (int dd = 0; dd < 2; ++dd) {
      const __m256 b = _mm256_set1_ps(vf[k * hd_v + d + dd]);
      for (int v = 0; v < NV; ++v) acc[dd][v] = _mm256_fmadd_ps(p[v], b, acc[dd][v]);
    }
  }
  for (int dd = 0; dd < 2; ++dd)
    for (int v = 0; v < NV; ++v) _mm256_store_ps(ot + (d + dd) * kL + 8 * v, acc[dd][v]);
}

template <int NV>
void tile(const AttnTileArgs& a) {
  const int64_t R = a.T * a.G, hd = a.hd, hd_v = a.hd_v;
  float* qt = a.scratch;       // [hd][kL] q transposed
  float* ot = qt + hd * kL;    // [hd_v][kL] V sums, transposed
  float* kf = ot + hd_v * kL;  // [kB][hd]
  float* vf = kf + kB * hd;    // [kB][hd_v]
  float* pt = vf + kB * hd_v;  // [kB][kL] scores, then weights
  float* m = pt + kB * kL;     // [kL]
  float* l = m + kL;           // [kL]
  float* c = l + kL;           // [kL]
  alignas(32) int32_t n_kv[kL];  // [kL] keys each lane sees (padding lanes: 1)
  int64_t n_max = 0;
  for (int64_t r = 0; r < 8 * NV; ++r) {
    const bool real = r < R;
    const int64_t t = r / a.G, g = r % a.G;
    const float* q = a.q + t * a.q_tok + g * hd;
    for (int64_t i = 0; i < hd; ++i) qt[i * kL + r] = real ? q[i] : 0.0f;
    n_kv[r] = real ? a.n_kv[t] : 1;
    n_max = std::max<int64_t>(n_max, n_kv[r]);
  }
  for (int64_t d = 0; d < hd_v; ++d)
    for (int v = 0; v < NV; ++v) _mm256_store_ps(ot + d * kL + 8 * v, _mm256_setzero_ps());
  for (int v = 0; v < NV; ++v) {
    _mm256_store_ps(m + 8 * v, _mm256_set1_ps(-INFINITY));
    _mm256_store_ps(l + 8 * v, _mm256_setzero_ps());
  }
  const __m256 scale = _mm256_set1_ps(a.scale);
  for (int64_t j0 = 0; j0 < n_max; j0 += kB) {
    const int64_t nb = std::min(kB, n_max - j0), nb4 = (nb + 1) / 2 * 2;
    for (int64_t k = 0; k < nb4; ++k) {
      if (k < nb) {
        widen(a.k + static_cast<size_t>(j0 + k) * a.k_row, hd, a.f16, kf + k * hd);
        widen(a.v + static_cast<size_t>(j0 + k) * a.v_row, hd_v, a.f16, vf + k * hd_v);
      } else {
        std::fill(kf + k * hd, kf + (k + 1) * hd, 0.0f);
      }
    }
    for (int64_t k0 = 0; k0 < nb4; k0 += 2) scores2<NV>(qt, kf, hd, k0, scale, pt);
    if (a.softcap > 0.0f)
      for (int64_t k = 0; k < nb; ++k)
        for (int64_t r = 0; r < 8 * NV; ++r) pt[k * kL + r] = a.softcap * std::tanh(pt[k * kL + r]);
    for (int v = 0; v < NV; ++v) {
      const __m256i nkv = _mm256_load_si256(reinterpret_cast<const __m256i*>(n_kv + 8 * v));
      __m256 bm = _mm256_set1_ps(-INFINITY);
      for (int64_t k = 0; k < nb; ++k) {
        const __m256 vis = _mm256_castsi256_ps(_mm256_cmpgt_epi32(nkv, _mm256_set1_epi32(static_cast<int32_t>(j0 + k))));
        bm = _mm256_blendv_ps(bm, _mm256_max_ps(bm, _mm256_load_ps(pt + k * kL + 8 * v)), vis);
      }
      const __m256 mo = _mm256_load_ps(m + 8 * v), nm = _mm256_max_ps(mo, bm);
      const __m256 cv = exp_clamped(_mm256_sub_ps(mo, nm));
      __m256 sum = _mm256_setzero_ps();
      for (int64_t k = 0; k < nb; ++k) {
        const __m256 vis = _mm256_castsi256_ps(_mm256_cmpgt_epi32(nkv, _mm256_set1_epi32(static_cast<int32_t>(j0 + k))));
        const __m256 p = _mm256_and_ps(vis, exp_clamped(_mm256_sub_ps(_mm256_load_ps(pt + k * kL + 8 * v), nm)));
        _mm256_store_ps(pt + k * kL + 8 * v, p);
        sum = _mm256_add_ps(sum, p);
      }
      _mm256_store_ps(l + 8 * v, _mm256_fmadd_ps(_mm256_load_ps(l + 8 * v), cv, sum));
      _mm256_store_ps(m + 8 * v, nm);
      _mm256_store_ps(c + 8 * v, cv);
    }
    for (int64_t d = 0; d < hd_v; d += 2) vsum2<NV>(ot, pt, vf, hd_v, d, nb, c);
  }
  for (int64_t r = 0; r < R; ++r) {
    const int64_t t = r / a.G, g = r % a.G;
    const float inv = 1.0f / l[r];
    float* y = a.y + t * a.y_tok + g * hd_v;
    for (int64_t d = 0; d < hd_v; ++d) y[d] = ot[d * kL + r] * inv;
  }
}

}  // namespace

void attn_tile(const AttnTileArgs& a) {
  const int64_t R = a.T * a.G;
  if (a.hd % 8 != 0 || a.hd_v % 8 != 0 || R > 32 || R < 1) return ref::attn_tile(a);
  switch ((R + 7) / 8) {
    case 1: return tile<1>(a);
    case 2: return tile<2>(a);
    case 3: return tile<3>(a);
    default: return tile<4>(a);
  }
}

}  // namespace minfer::cpu::avx2
