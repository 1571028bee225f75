// ARMv8.0 Advanced SIMD tiled attention (kernels.h, AttnTileFn; the algorithm: attn-tile-impl.h):
// up to 32 query rows in 8 vectors of 4 lanes. The register blocking follows the rows: with
// NV row vectors, K keys x NV vectors of scores (and K dimensions x NV vectors of V sums) plus
// the NV q vectors fit the 32 registers with K = 8 for up to 2 row vectors, 4 for up to 4 and
// 2 for up to 8, so even a decode's few rows keep 8 fma chains going; 1 or 2 rows take the keys
// in lanes instead (attn_keys). The table takes tiles of kAttnTileMaxRows rows, as the
// reference's: one of 33 to 64 rows goes in parts of up to 32 (whole tokens, or a token's heads
// in two), each lane's float steps unchanged. A NEON region (isa-begin.h); kernels-neon.cpp
// hands the table out.
#include <arm_neon.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "backends/cpu/kernels-neon.h"
#include "backends/cpu/kernels-ref.h"

#define MINFER_ISA neon
#include "backends/cpu/isa-begin.h"
#include "backends/cpu/attn-tile-impl.h"
#include "backends/cpu/neon-float.h"

namespace minfer::cpu::neon {
namespace {

template <int K>
struct Vec4 {
  using F = float32x4_t;
  using I = int32x4_t;
  static constexpr int kLanes = 4, kKeys = K, kDims = K;
  static F load(const float* p) { return vld1q_f32(p); }
  static I load_i(const int32_t* p) { return vld1q_s32(p); }
  static void store(float* p, F v) { vst1q_f32(p, v); }
  static F zero() { return vdupq_n_f32(0.0f); }
  static F set1(float x) { return vdupq_n_f32(x); }
  static F fmadd(F a, F b, F c) { return vfmaq_f32(c, a, b); }  // fma(a, b, c)
  static F mul(F a, F b) { return vmulq_f32(a, b); }
  static F add(F a, F b) { return vaddq_f32(a, b); }
  static F sub(F a, F b) { return vsubq_f32(a, b); }
  static F max(F a, F b) { return vmaxq_f32(a, b); }
  // Lanes whose row sees key j (j < n_kv), as an all-ones mask.
  static uint32x4_t visible(I n_kv, int32_t j) { return vcgtq_s32(n_kv, vdupq_n_s32(j)); }
  static F keep_max(uint32x4_t vis, F m, F x) { return vbslq_f32(vis, vmaxq_f32(m, x), m); }
  static F keep(uint32x4_t vis, F x) { return vreinterpretq_f32_u32(vandq_u32(vis, vreinterpretq_u32_f32(x))); }
  static F exp_clamped(F x) { return exp_poly4_nonpositive(vminq_f32(vmaxq_f32(x, vdupq_n_f32(-87.0f)), vdupq_n_f32(0.0f))); }
  static void widen(const uint8_t* row, int64_t n, bool f16, float* out) { widen_row4(row, n, f16, out); }
};

// R <= 32 rows, hd and hd_v multiples of 4.
void tile32(const AttnTileArgs& a) {
  const int64_t nv = (a.T * a.G + 3) / 4;
  const bool dims8 = a.hd_v % 8 == 0;
  switch (nv) {
    case 1: return dims8 ? tile::lanes<Vec4<8>, 1>(a) : tile::lanes<Vec4<4>, 1>(a);
    case 2: return dims8 ? tile::lanes<Vec4<8>, 2>(a) : tile::lanes<Vec4<4>, 2>(a);
    case 3: return tile::lanes<Vec4<4>, 3>(a);
    case 4: return tile::lanes<Vec4<4>, 4>(a);
    case 5: return tile::lanes<Vec4<2>, 5>(a);
    case 6: return tile::lanes<Vec4<2>, 6>(a);
    case 7: return tile::lanes<Vec4<2>, 7>(a);
    default: return tile::lanes<Vec4<2>, 8>(a);
  }
}

// Keys in lanes, for a tile of kKeyLaneRows rows or fewer (a decode with 1 or 2 query heads per
// KV head), whose rows would fill only part of a vector: per block of 32 keys the K rows are
// widened and transposed once (kt[i][key]), then each row's 32 scores take 8 fmas per dimension
// (the rows of a pair sharing the loads), in the order of attn-tile-ref.cpp's chain; the block's
// maximum and the sum of its weights go key by key in order, the V sums keep the dimensions in
// lanes. Per (row, key) and per (row, dimension) these are the reference's float steps, so the
// result is its bits; the fma and sum counts are R / 4 of the row tiles' (which compute all 4
// lanes of a row vector, padding included).
constexpr int64_t kKeyLaneRows = 2;
constexpr int64_t kB = kAttnTileKeys;

// kt[i][k] = kf[k][i] for the block's kB keys.
inline void transpose_keys(const float* kf, int64_t hd, float* kt) {
  for (int64_t k0 = 0; k0 < kB; k0 += 4)
    for (int64_t i = 0; i < hd; i += 4) {
      float32x4_t r[4];
      for (int c = 0; c < 4; ++c) r[c] = vld1q_f32(kf + (k0 + c) * hd + i);
      const float64x2_t t0 = vreinterpretq_f64_f32(vtrn1q_f32(r[0], r[1])), t1 = vreinterpretq_f64_f32(vtrn2q_f32(r[0], r[1]));
      const float64x2_t t2 = vreinterpretq_f64_f32(vtrn1q_f32(r[2], r[3])), t3 = vreinterpretq_f64_f32(vtrn2q_f32(r[2], r[3]));
      vst1q_f32(kt + (i + 0) * kB + k0, vreinterpretq_f32_f64(vtrn1q_f64(t0, t2)));
      vst1q_f32(kt + (i + 1) * kB + k0, vreinterpretq_f32_f64(vtrn1q_f64(t1, t3)));
      vst1q_f32(kt + (i + 2) * kB + k0, vreinterpretq_f32_f64(vtrn2q_f64(t0, t2)));
      vst1q_f32(kt + (i + 3) * kB + k0, vreinterpretq_f32_f64(vtrn2q_f64(t1, t3)));
    }
}

// p[r][k] = (q_r . key k) * scale for the kB keys of kt and NR rows: s = fma(q[i], k[i], s) in
// dimension order, the keys in the lanes of 8 vectors.
template <int NR>
inline void key_scores(const float* const* q, const float* kt, int64_t hd, float scale, float* p) {
  float32x4_t acc[NR][8];
  for (int r = 0; r < NR; ++r)
    for (int g = 0; g < 8; ++g) acc[r][g] = vdupq_n_f32(0.0f);
  for (int64_t i = 0; i < hd; ++i) {
    float32x4_t qi[NR];
    for (int r = 0; r < NR; ++r) qi[r] = vdupq_n_f32(q[r][i]);
    for (int g = 0; g < 8; ++g) {
      const float32x4_t k = vld1q_f32(kt + i * kB + 4 * g);
      for (int r = 0; r < NR; ++r) acc[r][g] = vfmaq_f32(acc[r][g], qi[r], k);
    }
  }
  const float32x4_t sv = vdupq_n_f32(scale);
  for (int r = 0; r < NR; ++r)
    for (int g = 0; g < 8; ++g) vst1q_f32(p + r * kB + 4 * g, vmulq_f32(acc[r][g], sv));
}

// o[d] = o[d] * c, then fma(p_k, v_k[d], o[d]) over the block's nb keys in order, U vectors of
// dimensions from d.
template <int U>
inline void key_vsums(float* o, const float* p, const float* vf, int64_t hd_v, int64_t d, int64_t nb, float c) {
  float32x4_t acc[U];
  for (int u = 0; u < U; ++u) acc[u] = vmulq_n_f32(vld1q_f32(o + d + 4 * u), c);
  for (int64_t k = 0; k < nb; ++k) {
    const float32x4_t pk = vdupq_n_f32(p[k]);
    for (int u = 0; u < U; ++u) acc[u] = vfmaq_f32(acc[u], pk, vld1q_f32(vf + k * hd_v + d + 4 * u));
  }
  for (int u = 0; u < U; ++u) vst1q_f32(o + d + 4 * u, acc[u]);
}

void attn_keys(const AttnTileArgs& a) {
  const int64_t R = a.T * a.G, hd = a.hd, hd_v = a.hd_v;
  const AttnTileScratch sc(a.scratch, hd, hd_v);
  float* kt = sc.qt;  // [hd][kB] the block's K, transposed (qt holds hd x kL floats)
  float* o = sc.ot;   // [R][hd_v] the V sums
  float *kf = sc.kf, *vf = sc.vf, *pt = sc.pt;  // pt: [R][kB] scores, then weights
  float *m = sc.m, *l = sc.l;
  const float* q[kKeyLaneRows];
  int64_t n_max = 0;
  for (int64_t r = 0; r < R; ++r) {
    q[r] = a.q + r / a.G * a.q_tok + r % a.G * hd;
    n_max = std::max<int64_t>(n_max, a.n_kv[r / a.G]);
    std::fill(o + r * hd_v, o + (r + 1) * hd_v, 0.0f);
    m[r] = -INFINITY;
    l[r] = 0.0f;
  }
  const int32x4_t lane = {0, 1, 2, 3};
  for (int64_t j0 = 0; j0 < n_max; j0 += kB) {
    const int64_t nb = std::min(kB, n_max - j0);
    tile::widen_block<Vec4<4>>(a, j0, nb, kB, std::min(kB, n_max - j0 - kB), kf, vf);
    transpose_keys(kf, hd, kt);
    if (R == 2) key_scores<2>(q, kt, hd, a.scale, pt);
    else key_scores<1>(q, kt, hd, a.scale, pt);
    for (int64_t r = 0; r < R; ++r) {
      float* p = pt + r * kB;
      const int64_t n_kv = a.n_kv[r / a.G];
      if (a.softcap > 0.0f)
        for (int64_t k = 0; k < nb; ++k) p[k] = a.softcap * std::tanh(p[k]);
      float bm = -INFINITY;
      for (int64_t k = 0; k < nb; ++k)
        if (j0 + k < n_kv) bm = std::max(bm, p[k]);
      const float nm = std::max(m[r], bm);
      const float c = exp_poly(std::min(std::max(m[r] - nm, -87.0f), 0.0f));
      // Key j0 + k is visible while k < vis; the others weigh 0.
      const int32x4_t vis = vdupq_n_s32(static_cast<int32_t>(std::clamp<int64_t>(n_kv - j0, 0, nb)));
      const float32x4_t nmv = vdupq_n_f32(nm);
      for (int g = 0; g < 8; ++g) {
        const float32x4_t e = Vec4<4>::exp_clamped(vsubq_f32(vld1q_f32(p + 4 * g), nmv));
        vst1q_f32(p + 4 * g, Vec4<4>::keep(vcltq_s32(vaddq_s32(lane, vdupq_n_s32(4 * g)), vis), e));
      }
      float sum = 0.0f;
      for (int64_t k = 0; k < nb; ++k) sum += p[k];
      l[r] = std::fma(l[r], c, sum);
      m[r] = nm;
      float* orow = o + r * hd_v;
      int64_t d = 0;
      for (; d + 32 <= hd_v; d += 32) key_vsums<8>(orow, p, vf, hd_v, d, nb, c);
      for (; d < hd_v; d += 4) key_vsums<1>(orow, p, vf, hd_v, d, nb, c);
    }
  }
  for (int64_t r = 0; r < R; ++r) {
    const float32x4_t inv = vdupq_n_f32(1.0f / l[r]);
    float* y = a.y + r / a.G * a.y_tok + r % a.G * hd_v;
    for (int64_t d = 0; d < hd_v; d += 4) vst1q_f32(y + d, vmulq_f32(vld1q_f32(o + r * hd_v + d), inv));
  }
}

}  // namespace

void attn_tile(const AttnTileArgs& a) {
  const int64_t R = a.T * a.G;
  if (a.hd % 4 != 0 || a.hd_v % 4 != 0 || R < 1 || R > kAttnTileMaxRows) return ref::attn_tile(a);
  if (R <= kKeyLaneRows) return attn_keys(a);
  if (R <= 32) return tile32(a);
  AttnTileArgs h = a;
  if (a.G <= 32) {  // whole tokens: 32 / G of them per part
    const int64_t per = 32 / a.G;
    for (int64_t t0 = 0; t0 < a.T; t0 += per) {
      h.T = std::min(per, a.T - t0);
      h.q = a.q + t0 * a.q_tok;
      h.n_kv = a.n_kv + t0;
      h.y = a.y + t0 * a.y_tok;
      tile32(h);
    }
  } else {  // one token (R <= 64), its heads in two parts
    const int64_t g1 = a.G / 2;
    h.G = g1;
    tile32(h);
    h.G = a.G - g1;
    h.q = a.q + g1 * a.hd;
    h.y = a.y + g1 * a.hd_v;
    tile32(h);
  }
}

}  // namespace minfer::cpu::neon

#include "backends/cpu/isa-end.h"
