// ARMv8.0 Advanced SIMD wide-batch attention (kernels.h, AttnWideFn), attn-wide-ref.cpp's float
// steps exactly: per block of 8 keys, the K rows are widened and transposed once (keys in the
// lanes of two vectors), so each (query row, key) score is the reference's single fma chain over
// the dimensions in order, 4 query rows at a time (8 chains); the block's softmax as the
// reference's scalar steps (exp_poly, the weights summed in key order) with the weights by
// exp_poly on 4 lanes; the V sum keeps the dimensions in lanes, fma over the keys in order.
// With a NaN in both q and k at one dimension the NaN kept may differ (FMLA by element takes q
// as the multiplier). A NEON region (isa-begin.h); kernels-neon.cpp hands the table out.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "backends/cpu/kernels-neon.h"
#include "backends/cpu/kernels-ref.h"

#define MINFER_ISA neon
#include "backends/cpu/isa-begin.h"
#include "backends/cpu/neon-float.h"

namespace minfer::cpu::neon {
namespace {

constexpr int kRowBlock = 4;  // query rows scored together

inline float32x4_t load4(const uint8_t* row, int64_t i, bool f16) {
  return f16 ? load_f16x4(reinterpret_cast<const uint16_t*>(row) + i) : vld1q_f32(reinterpret_cast<const float*>(row) + i);
}

// Keys j .. j + 3 (those from j + cnt on as zeros) widened to f32 and transposed:
// out[i * 8 + c] = element i of key j + c.
void transpose_keys(const AttnWideArgs& a, int64_t j, int64_t cnt, float* out) {
  const uint8_t* rows[4];
  for (int c = 0; c < 4; ++c) rows[c] = c < cnt ? a.k_at(j + c) : nullptr;
  const float32x4_t z = vdupq_n_f32(0.0f);
  for (int64_t i = 0; i < a.hd; i += 4) {
    float32x4_t r[4];
    for (int c = 0; c < 4; ++c) r[c] = rows[c] ? load4(rows[c], i, a.f16) : z;
    const float64x2_t t0 = vreinterpretq_f64_f32(vtrn1q_f32(r[0], r[1])), t1 = vreinterpretq_f64_f32(vtrn2q_f32(r[0], r[1]));
    const float64x2_t t2 = vreinterpretq_f64_f32(vtrn1q_f32(r[2], r[3])), t3 = vreinterpretq_f64_f32(vtrn2q_f32(r[2], r[3]));
    vst1q_f32(out + (i + 0) * 8, vreinterpretq_f32_f64(vtrn1q_f64(t0, t2)));
    vst1q_f32(out + (i + 1) * 8, vreinterpretq_f32_f64(vtrn1q_f64(t1, t3)));
    vst1q_f32(out + (i + 2) * 8, vreinterpretq_f32_f64(vtrn2q_f64(t0, t2)));
    vst1q_f32(out + (i + 3) * 8, vreinterpretq_f32_f64(vtrn2q_f64(t1, t3)));
  }
}

// Dimension i + J of RB rows: acc[r][h] = fma(q_r[i + J], kt[i + J][4 h .. 4 h + 3], acc[r][h]).
template <int J, int RB>
inline void score_step(const float* kt, const float32x4_t (&qv)[RB], float32x4_t (&acc)[RB][2]) {
  const float32x4_t k0 = vld1q_f32(kt + J * 8), k1 = vld1q_f32(kt + J * 8 + 4);
  for (int r = 0; r < RB; ++r) {
    acc[r][0] = vfmaq_laneq_f32(acc[r][0], k0, qv[r], J);
    acc[r][1] = vfmaq_laneq_f32(acc[r][1], k1, qv[r], J);
  }
}

// s[r][k] = (q_r . key k) * scale for the 8 keys of kt ([hd][8]) and RB query rows.
template <int RB>
void scores(const float* q, int64_t q_stride, const float* kt, int64_t hd, float scale, float (*s)[8]) {
  float32x4_t acc[RB][2];
  for (int r = 0; r < RB; ++r) acc[r][0] = acc[r][1] = vdupq_n_f32(0.0f);
  for (int64_t i = 0; i < hd; i += 4) {
    float32x4_t qv[RB];
    for (int r = 0; r < RB; ++r) qv[r] = vld1q_f32(q + r * q_stride + i);
    const float* k = kt + i * 8;
    score_step<0>(k, qv, acc);
    score_step<1>(k, qv, acc);
    score_step<2>(k, qv, acc);
    score_step<3>(k, qv, acc);
  }
  const float32x4_t sv = vdupq_n_f32(scale);
  for (int r = 0; r < RB; ++r) {
    vst1q_f32(s[r], vmulq_f32(acc[r][0], sv));
    vst1q_f32(s[r] + 4, vmulq_f32(acc[r][1], sv));
  }
}

// acc[i] = acc[i] * corr, then fma(p_k, v_k[i], acc[i]) over the block's nb keys in order, U
// vectors of dimensions at a time.
template <int U>
inline void vsum(float* acc, const float* vf, int64_t hd_v, int64_t i, int nb, float32x4_t corr, const float32x4_t* pv) {
  float32x4_t o[U];
  for (int u = 0; u < U; ++u) o[u] = vmulq_f32(vld1q_f32(acc + i + 4 * u), corr);
  for (int k = 0; k < nb; ++k)
    for (int u = 0; u < U; ++u) o[u] = vfmaq_f32(o[u], pv[k], vld1q_f32(vf + k * hd_v + i + 4 * u));
  for (int u = 0; u < U; ++u) vst1q_f32(acc + i + 4 * u, o[u]);
}

}  // namespace

void attn_wide(const AttnWideArgs& a) {
  if (a.hd % 4 != 0 || a.hd_v % 4 != 0 || a.G > 64) return ref::attn_wide(a);
  const int64_t G = a.G, hd = a.hd, hd_v = a.hd_v;
  float* acc = a.scratch;        // [G][hd_v]
  float* kt = acc + G * hd_v;    // [hd][8] the block's K rows, transposed (the reference's kf)
  float* vf = kt + 8 * hd;       // [8][hd_v]
  for (int64_t i = 0; i < G * hd_v; i += 4) vst1q_f32(acc + i, vdupq_n_f32(0.0f));
  float m[64], l[64];
  for (int64_t r = 0; r < G; ++r) {
    m[r] = -INFINITY;
    l[r] = 0.0f;
  }
  for (int64_t j0 = 0; j0 < a.n_kv; j0 += 8) {
    const int nb = static_cast<int>(std::min<int64_t>(8, a.n_kv - j0));
    transpose_keys(a, j0, nb, kt);
    transpose_keys(a, j0 + 4, nb - 4, kt + 4);
    for (int k = 0; k < nb; ++k) widen_row4(a.v_at(j0 + k), hd_v, a.f16, vf + k * hd_v);
    for (int64_t r0 = 0; r0 < G; r0 += kRowBlock) {
      const int rb = static_cast<int>(std::min<int64_t>(kRowBlock, G - r0));
      float s[kRowBlock][8];  // [rb][8] scores, then weights
      const float* q = a.q + r0 * a.q_stride;
      switch (rb) {
        case 1: scores<1>(q, a.q_stride, kt, hd, a.scale, s); break;
        case 2: scores<2>(q, a.q_stride, kt, hd, a.scale, s); break;
        case 3: scores<3>(q, a.q_stride, kt, hd, a.scale, s); break;
        default: scores<4>(q, a.q_stride, kt, hd, a.scale, s); break;
      }
      for (int rr = 0; rr < rb; ++rr) {
        const int64_t r = r0 + rr;
        float* sr = s[rr];
        if (a.softcap > 0.0f)
          for (int k = 0; k < nb; ++k) sr[k] = a.softcap * std::tanh(sr[k]);
        float bm = -INFINITY;
        for (int k = 0; k < nb; ++k) bm = std::max(bm, sr[k]);
        const float nm = std::max(m[r], bm);
        const float corr = exp_poly(m[r] - nm);
        const float32x4_t nmv = vdupq_n_f32(nm);
        vst1q_f32(sr, exp_poly4(vsubq_f32(vld1q_f32(sr), nmv)));
        if (nb > 4) vst1q_f32(sr + 4, exp_poly4(vsubq_f32(vld1q_f32(sr + 4), nmv)));
        float psum = 0.0f;
        for (int k = 0; k < nb; ++k) psum += sr[k];
        l[r] = l[r] * corr + psum;
        m[r] = nm;
        float32x4_t pv[8];
        for (int k = 0; k < nb; ++k) pv[k] = vdupq_n_f32(sr[k]);
        const float32x4_t cv = vdupq_n_f32(corr);
        float* ar = acc + r * hd_v;
        int64_t i = 0;
        for (; i + 32 <= hd_v; i += 32) vsum<8>(ar, vf, hd_v, i, nb, cv, pv);
        for (; i < hd_v; i += 4) vsum<1>(ar, vf, hd_v, i, nb, cv, pv);
      }
    }
  }
  for (int64_t r = 0; r < G; ++r) {
    const float32x4_t inv = vdupq_n_f32(1.0f / l[r]);
    for (int64_t i = 0; i < hd_v; i += 4) vst1q_f32(a.y + r * a.y_stride + i, vmulq_f32(vld1q_f32(acc + r * hd_v + i), inv));
  }
}

}  // namespace minfer::cpu::neon

#include "backends/cpu/isa-end.h"
