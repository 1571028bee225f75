// AVX-512 tiled attention (kernels.h, AttnTileFn): up to 64 query rows in 4 vectors of 16
// lanes. A block's scores are 4 keys x 4 row vectors of fused multiply-adds per dimension (one
// broadcast of a key value feeds 4 vectors of rows); the V sums are 4 dimensions x 4 row
// vectors per key. Per lane the float steps are attn-tile-ref.cpp's, so the result is the
// reference's bit for bit. Compiled alone with the AVX-512 flags.
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "backends/cpu/kernels-ref.h"

namespace minfer::cpu::avx512 {
namespace {

constexpr int64_t kL = kAttnTileMaxRows, kB = kAttnTileKeys;

// exp_poly (kernels.h) on 16 lanes of x in [-87, 0] (its 2^n is then a normal number).
inline __m512 exp16(__m512 x) {
  const __m512 shift = _mm512_set1_ps(0x1.8p23f);
  const __m512 z = _mm512_fmadd_ps(x, _mm512_set1_ps(0x1.715476p+0f), shift);
  const __m512 n = _mm512_sub_ps(z, shift);
  const __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.7f7d1cp-20f), _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.62e4p-1f), x));
  const __m512 u = _mm512_mul_ps(r, r);
  const __m512 p = _mm512_fmadd_ps(
      _mm512_fmadd_ps(_mm512_fmadd_ps(_mm512_set1_ps(0x1.0e4020p-7f), r, _mm512_set1_ps(0x1.573e2ep-5f)), u,
                      _mm512_fmadd_ps(_mm512_set1_ps(0x1.555e66p-3f), r, _mm512_set1_ps(0x1.fffdb6p-2f))),
      u, _mm512_fmadd_ps(_mm512_set1_ps(0x1.ffffecp-1f), r, _mm512_set1_ps(1.0f)));
  const __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
  return _mm512_mul_ps(p, _mm512_castsi512_ps(e));
}

inline __m512 exp_clamped(__m512 x) {
  return exp16(_mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.0f)), _mm512_setzero_ps()));
}

inline void widen(const uint8_t* row, int64_t n, bool f16, float* out) {
  if (f16) {
    for (int64_t i = 0; i < n; i += 16)
      _mm512_storeu_ps(out + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * i))));
  } else {
    for (int64_t i = 0; i < n; i += 16) _mm512_storeu_ps(out + i, _mm512_loadu_ps(reinterpret_cast<const float*>(row) + i));
  }
}

// Scores of keys k0 .. k0 + 3 for the NV row vectors: pt[k][rows] = (q . k) * scale.
template <int NV>
inline void scores4(const float* qt, const float* kf, int64_t hd, int64_t k0, __m512 scale, float* pt) {
  __m512 acc[4][NV];
  for (int kk = 0; kk < 4; ++kk)
    for (int v = 0; v < NV; ++v) acc[kk][v] = _mm512_setzero_ps();
  const float* k = kf + k0 * hd;
  for (int64_t i = 0; i < hd; ++i) {
    __m512 q[NV];
    for (int v = 0; v < NV; ++v) q[v] = _mm512_load_ps(qt + i * kL + 16 * v);
    for (int kk = 0; kk < 4; ++kk) {
      const __m512 b = _mm512_set1_ps(k[kk * hd + i]);
      for (int v = 0; v < NV; ++v) acc[kk][v] = _mm512_fmadd_ps(q[v], b, acc[kk][v]);
    }
  }
  for (int kk = 0; kk < 4; ++kk)
    for (int v = 0; v < NV; ++v) _mm512_store_ps(pt + (k0 + kk) * kL + 16 * v, _mm512_mul_ps(acc[kk][v], scale));
}

// o[d .. d + 3][rows] = o * c, then fma(p_k, v_k[d], o) for the block's keys in order.
template <int NV>
inline void vsum4(float* ot, const float* pt, const float* vf, int64_t hd_v, int64_t d, int64_t nb, const float* c) {
  __m512 acc[4][NV];
  for (int dd = 0; dd < 4; ++dd)
    for (int v = 0; v < NV; ++v)
      acc[dd][v] = _mm512_mul_ps(_mm512_load_ps(ot + (d + dd) * kL + 16 * v), _mm512_load_ps(c + 16 * v));
  for (int64_t k = 0; k < nb; ++k) {
    __m512 p[NV];
    for (int v = 0; v < NV; ++v) p[v] = _mm512_load_ps(pt + k * kL + 16 * v);
    for (int dd = 0; dd < 4; ++dd) {
      const __m512 b = _mm512_set1_ps(vf[k * hd_v + d + dd]);
      for (int v = 0; v < NV; ++v) acc[dd][v] = _mm512_fmadd_ps(p[v], b, acc[dd][v]);
    }
  }
  for (int dd = 0; dd < 4; ++dd)
    for (int v = 0; v < NV; ++v) _mm512_store_ps(ot + (d + dd) * kL + 16 * v, acc[dd][v]);
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
  alignas(64) int32_t n_kv[kL];  // [kL] keys each lane sees (padding lanes: 1)
  int64_t n_max = 0;
  for (int64_t r = 0; r < 16 * NV; ++r) {
    const bool real = r < R;
    const int64_t t = r / a.G, g = r % a.G;
    const float* q = a.q + t * a.q_tok + g * hd;
    for (int64_t i = 0; i < hd; ++i) qt[i * kL + r] = real ? q[i] : 0.0f;
    n_kv[r] = real ? a.n_kv[t] : 1;
    n_max = std::max<int64_t>(n_max, n_kv[r]);
  }
  for (int64_t d = 0; d < hd_v; ++d)
    for (int v = 0; v < NV; ++v) _mm512_store_ps(ot + d * kL + 16 * v, _mm512_setzero_ps());
  for (int v = 0; v < NV; ++v) {
    _mm512_store_ps(m + 16 * v, _mm512_set1_ps(-INFINITY));
    _mm512_store_ps(l + 16 * v, _mm512_setzero_ps());
  }
  const __m512 scale = _mm512_set1_ps(a.scale);
  for (int64_t j0 = 0; j0 < n_max; j0 += kB) {
    const int64_t nb = std::min(kB, n_max - j0), nb4 = (nb + 3) / 4 * 4;
    for (int64_t k = 0; k < nb4; ++k) {
      if (k < nb) {
        widen(a.k + static_cast<size_t>(j0 + k) * a.k_row, hd, a.f16, kf + k * hd);
        widen(a.v + static_cast<size_t>(j0 + k) * a.v_row, hd_v, a.f16, vf + k * hd_v);
      } else {
        std::fill(kf + k * hd, kf + (k + 1) * hd, 0.0f);
      }
    }
    for (int64_t k0 = 0; k0 < nb4; k0 += 4) scores4<NV>(qt, kf, hd, k0, scale, pt);
    if (a.softcap > 0.0f)
      for (int64_t k = 0; k < nb; ++k)
        for (int64_t r = 0; r < 16 * NV; ++r) pt[k * kL + r] = a.softcap * std::tanh(pt[k * kL + r]);
    for (int v = 0; v < NV; ++v) {
      const __m512i nkv = _mm512_load_si512(n_kv + 16 * v);
      __m512 bm = _mm512_set1_ps(-INFINITY);
      for (int64_t k = 0; k < nb; ++k) {
        const __mmask16 vis = _mm512_cmpgt_epi32_mask(nkv, _mm512_set1_epi32(static_cast<int32_t>(j0 + k)));
        bm = _mm512_mask_max_ps(bm, vis, bm, _mm512_load_ps(pt + k * kL + 16 * v));
      }
      const __m512 mo = _mm512_load_ps(m + 16 * v), nm = _mm512_max_ps(mo, bm);
      const __m512 cv = exp_clamped(_mm512_sub_ps(mo, nm));
      __m512 sum = _mm512_setzero_ps();
      for (int64_t k = 0; k < nb; ++k) {
        const __mmask16 vis = _mm512_cmpgt_epi32_mask(nkv, _mm512_set1_epi32(static_cast<int32_t>(j0 + k)));
        const __m512 p = _mm512_maskz_mov_ps(vis, exp_clamped(_mm512_sub_ps(_mm512_load_ps(pt + k * kL + 16 * v), nm)));
        _mm512_store_ps(pt + k * kL + 16 * v, p);
        sum = _mm512_add_ps(sum, p);
      }
      _mm512_store_ps(l + 16 * v, _mm512_fmadd_ps(_mm512_load_ps(l + 16 * v), cv, sum));
      _mm512_store_ps(m + 16 * v, nm);
      _mm512_store_ps(c + 16 * v, cv);
    }
    for (int64_t d = 0; d < hd_v; d += 4) vsum4<NV>(ot, pt, vf, hd_v, d, nb, c);
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
  if (a.hd % 16 != 0 || a.hd_v % 16 != 0 || R > kL || R < 1) return ref::attn_tile(a);
  switch ((R + 15) / 16) {
    case 1: return tile<1>(a);
    case 2: return tile<2>(a);
    case 3: return tile<3>(a);
    default: return tile<4>(a);
  }
}

}  // namespace minfer::cpu::avx512
