// AVX2 wide-batch attention (kernels.h, AttnWideFn): per block of 8 keys, the 8 scores of a
// query row in one vector (8 dot products, then a transposing horizontal add), the block's
// softmax terms by exp_poly8, and the V sum as 8 fused multiply-adds per 8 output values.
// An AVX2 region (isa-begin.h).
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "backends/cpu/kernels-avx2.h"
#include "backends/cpu/kernels-ref.h"

#define MINFER_ISA avx2
#include "backends/cpu/isa-begin.h"
#include "backends/cpu/avx2-common.h"

namespace minfer::cpu::avx2 {

void attn_wide(const AttnWideArgs& a) {
  if (a.hd % 8 != 0 || a.hd_v % 8 != 0 || a.hd > 256 || a.hd_v > 256) return ref::attn_wide(a);
  const int64_t G = a.G;
  float* acc = a.scratch;                // [G][hd_v]
  float* kf = a.scratch + G * a.hd_v;    // [8][hd]
  float* vf = kf + 8 * a.hd;             // [8][hd_v]
  std::fill(acc, acc + G * a.hd_v, 0.0f);
  float m[64], l[64];
  for (int64_t r = 0; r < G; ++r) {
    m[r] = -INFINITY;
    l[r] = 0.0f;
  }
  const __m256 scale = _mm256_set1_ps(a.scale);
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  for (int64_t j0 = 0; j0 < a.n_kv; j0 += 8) {
    const int nb = static_cast<int>(std::min<int64_t>(8, a.n_kv - j0));
    for (int k = 0; k < 8; ++k) {
      if (k < nb) {
        widen_row8(a.k_at(j0 + k), a.hd, a.f16, kf + k * a.hd);
        widen_row8(a.v_at(j0 + k), a.hd_v, a.f16, vf + k * a.hd_v);
      } else {
        std::fill(kf + k * a.hd, kf + (k + 1) * a.hd, 0.0f);
        std::fill(vf + k * a.hd_v, vf + (k + 1) * a.hd_v, 0.0f);
      }
    }
    const __m256 valid = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(nb), lane));
    for (int64_t r = 0; r < G; ++r) {
      const float* q = a.q + r * a.q_stride;
      __m256 d[8];
      for (int k = 0; k < 8; ++k) d[k] = _mm256_setzero_ps();
      for (int64_t i = 0; i < a.hd; i += 8) {
        const __m256 qv = _mm256_loadu_ps(q + i);
        for (int k = 0; k < 8; ++k) d[k] = _mm256_fmadd_ps(qv, _mm256_loadu_ps(kf + k * a.hd + i), d[k]);
      }
      __m256 s = _mm256_mul_ps(hsum8x8(d), scale);
      if (a.softcap > 0.0f) s = softcap8(s, a.softcap);
      s = _mm256_blendv_ps(_mm256_set1_ps(-INFINITY), s, valid);
      const float nm = std::max(m[r], hmax8(s));
      const float corr = exp_poly(m[r] - nm);
      const __m256 p = exp_poly8(_mm256_sub_ps(s, _mm256_set1_ps(nm)));
      alignas(32) float pk[8];
      _mm256_store_ps(pk, p);
      l[r] = l[r] * corr + hsum_f32(p);
      m[r] = nm;
      float* ar = acc + r * a.hd_v;
      const __m256 cv = _mm256_set1_ps(corr);
      for (int64_t i = 0; i < a.hd_v; i += 8) {
        __m256 v = _mm256_mul_ps(_mm256_loadu_ps(ar + i), cv);
        for (int k = 0; k < nb; ++k) v = _mm256_fmadd_ps(_mm256_set1_ps(pk[k]), _mm256_loadu_ps(vf + k * a.hd_v + i), v);
        _mm256_storeu_ps(ar + i, v);
      }
    }
  }
  for (int64_t r = 0; r < G; ++r) {
    const __m256 inv = _mm256_set1_ps(1.0f / l[r]);
    for (int64_t i = 0; i < a.hd_v; i += 8)
      _mm256_storeu_ps(a.y + r * a.y_stride + i, _mm256_mul_ps(_mm256_loadu_ps(acc + r * a.hd_v + i), inv));
  }
}

}  // namespace minfer::cpu::avx2

#include "backends/cpu/isa-end.h"
