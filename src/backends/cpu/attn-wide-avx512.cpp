// AVX-512 wide-batch attention (kernels.h, AttnWideFn) for head dims that are multiples of 16
// up to 256: two query rows of the GQA group at a time share every K and V vector load; per
// block of 8 keys the 16 dot products are 16-lane fused multiply-add chains reduced by a
// transposing horizontal add, the softmax terms come from exp_poly8, and the V sums of the two
// rows are fused multiply-adds over 16-lane chunks. Other shapes go to the AVX2 kernel.
// An AVX-512 region (isa-begin.h).
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "backends/cpu/kernels-avx2.h"

#define MINFER_ISA avx512
#include "backends/cpu/isa-begin.h"
#include "backends/cpu/avx2-common.h"
#include "backends/cpu/avx512-common.h"

namespace minfer::cpu::avx512 {
namespace {

constexpr int kMaxChunks = 16;  // hd <= 256

// 16-lane vector -> 8-lane partial (lanes 0-7 + lanes 8-15).
inline __m256 fold(__m512 v) {
  return _mm256_add_ps(_mm512_castps512_ps256(v), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
}



struct RowState {
  float m = -INFINITY, l = 0.0f;
};

// The softmax update of one row for a block: returns the 8 weights and the rescale factor.
inline __m256 block_weights(__m256 s, RowState& st, float* corr) {
  const float nm = std::max(st.m, hmax8(s));
  *corr = exp_poly(st.m - nm);
  const __m256 p = exp_poly8(_mm256_sub_ps(s, _mm256_set1_ps(nm)));
  st.l = st.l * *corr + hsum_f32(p);
  st.m = nm;
  return p;
}

}  // namespace

void attn_wide(const AttnWideArgs& a) {
  if (a.hd % 16 != 0 || a.hd_v % 16 != 0 || a.hd > 256 || a.hd_v > 256) return avx2::attn_wide(a);
  const int64_t G = a.G, nc = a.hd / 16, ncv = a.hd_v / 16;
  float* acc = a.scratch;              // [G][hd_v]
  float* kf = a.scratch + G * a.hd_v;  // [8][hd]
  float* vf = kf + 8 * a.hd;           // [8][hd_v]
  std::fill(acc, acc + G * a.hd_v, 0.0f);
  RowState st[64];
  const __m256 scale = _mm256_set1_ps(a.scale);
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  for (int64_t j0 = 0; j0 < a.n_kv; j0 += 8) {
    const int nb = static_cast<int>(std::min<int64_t>(8, a.n_kv - j0));
    for (int k = 0; k < 8; ++k) {
      if (k < nb) {
        widen_row16(a.k_at(j0 + k), a.hd, a.f16, kf + k * a.hd);
        widen_row16(a.v_at(j0 + k), a.hd_v, a.f16, vf + k * a.hd_v);
      } else {
        std::fill(kf + k * a.hd, kf + (k + 1) * a.hd, 0.0f);
        std::fill(vf + k * a.hd_v, vf + (k + 1) * a.hd_v, 0.0f);
      }
    }
    const __m256 valid = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(nb), lane));
    for (int64_t r = 0; r < G; r += 2) {
      const bool two = r + 1 < G;
      const float* qa = a.q + r * a.q_stride;
      const float* qb = two ? qa + a.q_stride : qa;
      __m512 da[8], db[8];
      for (int k = 0; k < 8; ++k) da[k] = db[k] = _mm512_setzero_ps();
      for (int64_t c = 0; c < nc; ++c) {
        const __m512 xa = _mm512_loadu_ps(qa + 16 * c), xb = _mm512_loadu_ps(qb + 16 * c);
        for (int k = 0; k < 8; ++k) {
          const __m512 kv = _mm512_loadu_ps(kf + k * a.hd + 16 * c);
          da[k] = _mm512_fmadd_ps(xa, kv, da[k]);
          db[k] = _mm512_fmadd_ps(xb, kv, db[k]);
        }
      }
      __m256 fa[8], fbv[8];
      for (int k = 0; k < 8; ++k) {
        fa[k] = fold(da[k]);
        fbv[k] = fold(db[k]);
      }
      const __m256 ninf = _mm256_set1_ps(-INFINITY);
      float ca, cb;
      auto scores = [&](__m256* f) {
        __m256 s = _mm256_mul_ps(hsum8x8(f), scale);
        if (a.softcap > 0.0f) s = softcap8(s, a.softcap);
        return _mm256_blendv_ps(ninf, s, valid);
      };
      const __m256 pa = block_weights(scores(fa), st[r], &ca);
      alignas(32) float pka[8], pkb[8];
      _mm256_store_ps(pka, pa);
      if (two) {
        const __m256 pb = block_weights(scores(fbv), st[r + 1], &cb);
        _mm256_store_ps(pkb, pb);
      } else {
        cb = 0.0f;
        std::fill(pkb, pkb + 8, 0.0f);
      }
      float* ara = acc + r * a.hd_v;
      float* arb = two ? ara + a.hd_v : nullptr;
      __m512 wa[8], wb[8];  // the weights, broadcast once per block
      for (int k = 0; k < 8; ++k) {
        wa[k] = _mm512_set1_ps(pka[k]);
        wb[k] = _mm512_set1_ps(pkb[k]);
      }
      for (int64_t c = 0; c < ncv; ++c) {
        __m512 va = _mm512_mul_ps(_mm512_loadu_ps(ara + 16 * c), _mm512_set1_ps(ca));
        __m512 vb = two ? _mm512_mul_ps(_mm512_loadu_ps(arb + 16 * c), _mm512_set1_ps(cb)) : _mm512_setzero_ps();
        for (int k = 0; k < nb; ++k) {
          const __m512 vv = _mm512_loadu_ps(vf + k * a.hd_v + 16 * c);
          va = _mm512_fmadd_ps(wa[k], vv, va);
          vb = _mm512_fmadd_ps(wb[k], vv, vb);
        }
        _mm512_storeu_ps(ara + 16 * c, va);
        if (two) _mm512_storeu_ps(arb + 16 * c, vb);
      }
    }
  }
  for (int64_t r = 0; r < G; ++r) {
    const __m512 inv = _mm512_set1_ps(1.0f / st[r].l);
    for (int64_t c = 0; c < ncv; ++c)
      _mm512_storeu_ps(a.y + r * a.y_stride + 16 * c, _mm512_mul_ps(_mm512_loadu_ps(acc + r * a.hd_v + 16 * c), inv));
  }
}

}  // namespace minfer::cpu::avx512

#include "backends/cpu/isa-end.h"
