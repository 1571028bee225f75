// AVX-512 tiled attention (kernels.h, AttnTileFn; the algorithm: attn-tile-impl.h): up to 64
// query rows in 4 vectors of 16 lanes, 4 keys x 4 row vectors of scores and 4 dimensions x 4
// row vectors of V sums in registers. A tile of few rows (decode: the G heads of one token)
// would leave most lanes empty, so up to kKeyLaneRows rows take the keys-in-lanes form below
// instead, with the same float steps per (row, key). An AVX-512 region (isa-begin.h).
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "backends/cpu/kernels-ref.h"

#define MINFER_ISA avx512
#include "backends/cpu/isa-begin.h"
#include "backends/cpu/attn-tile-impl.h"
#include "backends/cpu/avx512-common.h"

namespace minfer::cpu::avx512 {
namespace {

struct Vec16 {
  using F = __m512;
  using I = __m512i;
  static constexpr int kLanes = 16, kKeys = 4, kDims = 4;
  static F load(const float* p) { return _mm512_load_ps(p); }
  static I load_i(const int32_t* p) { return _mm512_load_si512(p); }
  static void store(float* p, F v) { _mm512_store_ps(p, v); }
  static F zero() { return _mm512_setzero_ps(); }
  static F set1(float x) { return _mm512_set1_ps(x); }
  static F fmadd(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F add(F a, F b) { return _mm512_add_ps(a, b); }
  static F sub(F a, F b) { return _mm512_sub_ps(a, b); }
  static F max(F a, F b) { return _mm512_max_ps(a, b); }
  // Lanes whose row sees key j (j < n_kv), as a mask register.
  static __mmask16 visible(I n_kv, int32_t j) { return _mm512_cmpgt_epi32_mask(n_kv, _mm512_set1_epi32(j)); }
  static F keep_max(__mmask16 vis, F m, F x) { return _mm512_mask_max_ps(m, vis, m, x); }
  static F keep(__mmask16 vis, F x) { return _mm512_maskz_mov_ps(vis, x); }
  static F exp_clamped(F x) {
    return exp_poly16_nonpositive(_mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.0f)), _mm512_setzero_ps()));
  }
  static void widen(const uint8_t* row, int64_t n, bool f16, float* out) { widen_row16(row, n, f16, out); }
};

constexpr int64_t kKeyLaneRows = 4;

// out[c][0..15] = in[0..15][c]: a 16 x 16 transpose of rows `in` (stride si floats) into rows
// `out` (stride so floats).
inline void transpose16(const float* in, int64_t si, float* out, int64_t so) {
  __m512 r[16], t[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(in + i * si);
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {  // r[4i + j], lane L: column 4L + j of rows 4i .. 4i + 3
    const __m512d a0 = _mm512_castps_pd(t[4 * i]), a1 = _mm512_castps_pd(t[4 * i + 1]);
    const __m512d a2 = _mm512_castps_pd(t[4 * i + 2]), a3 = _mm512_castps_pd(t[4 * i + 3]);
    r[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a0, a2));
    r[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a0, a2));
    r[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(a1, a3));
    r[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(a1, a3));
  }
  for (int j = 0; j < 4; ++j) {
    const __m512 x0 = _mm512_shuffle_f32x4(r[j], r[4 + j], 0x88), x1 = _mm512_shuffle_f32x4(r[j], r[4 + j], 0xdd);
    const __m512 x2 = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0x88), x3 = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0xdd);
    _mm512_storeu_ps(out + j * so, _mm512_shuffle_f32x4(x0, x2, 0x88));
    _mm512_storeu_ps(out + (8 + j) * so, _mm512_shuffle_f32x4(x0, x2, 0xdd));
    _mm512_storeu_ps(out + (4 + j) * so, _mm512_shuffle_f32x4(x1, x3, 0x88));
    _mm512_storeu_ps(out + (12 + j) * so, _mm512_shuffle_f32x4(x1, x3, 0xdd));
  }
}

// Keys in lanes (R <= kKeyLaneRows rows; hd, hd_v multiples of 16; past 4 rows the row tiles
// were faster: Qwen2.5-0.5B's 7 heads per KV head, tg32 @ d4096 46-47 tok/s tiled vs 42-43;
// Qwen3-0.6B's 2: 13.0-13.2 in lanes vs 10.9): per block of 32 keys the K
// rows are widened and transposed once (kt[i][key]), then per row the scores of 16 keys take one
// fma per dimension, in the order of attn-tile-ref.cpp's chain; the block max and the sum of
// weights go key by key in order; the V sums keep the dimensions in lanes. Per (row, key) and
// per (row, dimension) these are the reference's float steps, so the result is its bits.
void attn_keys(const AttnTileArgs& a) {
  const int64_t R = a.T * a.G, hd = a.hd, hd_v = a.hd_v;
  const AttnTileScratch sc(a.scratch, hd, hd_v);
  float* kt = sc.qt;   // [hd][32] the block's K, transposed (qt holds hd x 64 floats)
  float* o = sc.ot;    // [R][hd_v] the V sums
  float *kf = sc.kf, *vf = sc.vf, *pt = sc.pt;  // pt: [R][32] scores, then weights
  float *m = sc.m, *l = sc.l;
  int64_t n_max = 0;
  for (int64_t t = 0; t < a.T; ++t) n_max = std::max<int64_t>(n_max, a.n_kv[t]);
  std::fill(o, o + R * hd_v, 0.0f);
  std::fill(m, m + R, -INFINITY);
  std::fill(l, l + R, 0.0f);
  const __m512 scale = _mm512_set1_ps(a.scale);
  for (int64_t j0 = 0; j0 < n_max; j0 += kAttnTileKeys) {
    const int64_t nb = std::min(kAttnTileKeys, n_max - j0);
    tile::widen_block<Vec16>(a, j0, nb, kAttnTileKeys, std::min(kAttnTileKeys, n_max - j0 - kAttnTileKeys), kf, vf);
    for (int64_t kg = 0; kg < 2; ++kg)
      for (int64_t dg = 0; dg < hd; dg += 16) transpose16(kf + 16 * kg * hd + dg, hd, kt + dg * 32 + 16 * kg, 32);
    for (int64_t r = 0; r < R; ++r) {
      const int64_t t = r / a.G, g = r % a.G;
      const float* q = a.q + t * a.q_tok + g * hd;
      const int32_t n_kv = a.n_kv[t];
      float* p = pt + r * kAttnTileKeys;
      __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
      for (int64_t i = 0; i < hd; ++i) {
        const __m512 qi = _mm512_set1_ps(q[i]);
        s0 = _mm512_fmadd_ps(qi, _mm512_load_ps(kt + i * 32), s0);
        s1 = _mm512_fmadd_ps(qi, _mm512_load_ps(kt + i * 32 + 16), s1);
      }
      _mm512_store_ps(p, _mm512_mul_ps(s0, scale));
      _mm512_store_ps(p + 16, _mm512_mul_ps(s1, scale));
      if (a.softcap > 0.0f)
        for (int64_t k = 0; k < nb; ++k) p[k] = a.softcap * std::tanh(p[k]);
      __m128 bm = _mm_set_ss(-INFINITY);
      for (int64_t k = 0; k < nb; ++k)
        if (j0 + k < n_kv) bm = _mm_max_ss(bm, _mm_set_ss(p[k]));
      const __m512 mo = _mm512_set1_ps(m[r]);
      const __m512 nm = _mm512_max_ps(mo, _mm512_broadcastss_ps(bm));
      const float cv = _mm512_cvtss_f32(Vec16::exp_clamped(_mm512_sub_ps(mo, nm)));
      // Key j0 + k is visible while j0 + k < n_kv.
      const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
      const __m512i lim = _mm512_set1_epi32(static_cast<int32_t>(std::min<int64_t>(n_kv - j0, nb)));
      const __mmask16 v0 = _mm512_cmplt_epi32_mask(lane, lim);
      const __mmask16 v1 = _mm512_cmplt_epi32_mask(_mm512_add_epi32(lane, _mm512_set1_epi32(16)), lim);
      _mm512_store_ps(p, _mm512_maskz_mov_ps(v0, Vec16::exp_clamped(_mm512_sub_ps(_mm512_load_ps(p), nm))));
      _mm512_store_ps(p + 16, _mm512_maskz_mov_ps(v1, Vec16::exp_clamped(_mm512_sub_ps(_mm512_load_ps(p + 16), nm))));
      float sum = 0.0f;
      for (int64_t k = 0; k < nb; ++k) sum += p[k];
      l[r] = std::fma(l[r], cv, sum);
      m[r] = _mm512_cvtss_f32(nm);
      float* orow = o + r * hd_v;
      const __m512 c = _mm512_set1_ps(cv);
      for (int64_t d = 0; d < hd_v; d += 64) {
        const int64_t nd = std::min<int64_t>(4, (hd_v - d) / 16);
        __m512 acc[4];
        for (int64_t e = 0; e < nd; ++e) acc[e] = _mm512_mul_ps(_mm512_loadu_ps(orow + d + 16 * e), c);
        for (int64_t k = 0; k < nb; ++k) {
          const __m512 pk = _mm512_set1_ps(p[k]);
          for (int64_t e = 0; e < nd; ++e) acc[e] = _mm512_fmadd_ps(pk, _mm512_loadu_ps(vf + k * hd_v + d + 16 * e), acc[e]);
        }
        for (int64_t e = 0; e < nd; ++e) _mm512_storeu_ps(orow + d + 16 * e, acc[e]);
      }
    }
  }
  for (int64_t r = 0; r < R; ++r) {
    const int64_t t = r / a.G, g = r % a.G;
    const float inv = 1.0f / l[r];
    float* y = a.y + t * a.y_tok + g * hd_v;
    for (int64_t d = 0; d < hd_v; ++d) y[d] = o[r * hd_v + d] * inv;
  }
}

}  // namespace

void attn_tile(const AttnTileArgs& a) {
  if (a.T * a.G <= kKeyLaneRows && a.hd % 16 == 0 && a.hd_v % 16 == 0)
    return attn_keys(a);
  tile::run<Vec16>(a, ref::attn_tile);
}

}  // namespace minfer::cpu::avx512

#include "backends/cpu/isa-end.h"
