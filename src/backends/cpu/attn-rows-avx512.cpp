// AVX-512 forms of the narrow attention's kernels (kernels.h): the W64 score of one f16 cache
// row against several f32 query rows, the f16 V accumulator update, and the two fused over a
// whole KV head's keys (attn_rows_f16). The same products, sums and roundings as the AVX2
// forms (vec-dot-avx2.cpp), whose 16 lanes are two ymm halves here one zmm: lane l of
// accumulator g sums elements 64i + 16g + l, the groups add as (g0 + g2) + (g1 + g3), the lanes
// halve 16 -> 8 -> 4 -> 2 -> 1, the n % 64 tail in double.
// An AVX-512 region (isa-begin.h); called only after cpuid says so (kernels-avx512.cpp).
#include <immintrin.h>

#include <cmath>
#include <cstdint>

#include <algorithm>

#include "backends/cpu/attn-online.h"
#include "backends/cpu/kernels-avx2.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/prefetch.h"
#include "core/fp16.h"

#define MINFER_ISA avx512
#include "backends/cpu/isa-begin.h"

namespace minfer::cpu::avx512 {
namespace {

constexpr int64_t kMaxRowElems = 512;  // any head size; longer rows go to the AVX2 forms

inline __m512 load_f16x16(const uint16_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }

// The W64 sum of the four accumulators: (g0 + g2) + (g1 + g3), then lanes 16 -> 8 -> 4 -> 2 -> 1.
inline float w64_sum(const __m512 g[4]) {
  const __m512 t16 = _mm512_add_ps(_mm512_add_ps(g[0], g[2]), _mm512_add_ps(g[1], g[3]));
  const __m256 t8 = _mm256_add_ps(_mm512_castps512_ps256(t16), _mm512_extractf32x8_ps(t16, 1));
  const __m128 t4 = _mm_add_ps(_mm256_castps256_ps128(t8), _mm256_extractf128_ps(t8, 1));
  const __m128 t2 = _mm_add_ps(t4, _mm_movehl_ps(t4, t4));
  const __m128 t1 = _mm_add_ss(t2, _mm_movehdup_ps(t2));
  return _mm_cvtss_f32(t1);
}

// x rounded to f16 and back (the f16 accumulator's value, kept in f32).
inline __m512 round_f16(__m512 x) { return _mm512_cvtph_ps(_mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT)); }

}  // namespace

// s[r] = W64 dot of the cache row k (f16) and query row r (f32, already f16-rounded values).
void dot_w64_rows_f16(int64_t n, const uint16_t* k, const float* q, int64_t q_stride, int64_t n_rows, float* s) {
  if (n > kMaxRowElems) {
    avx2::dot_w64_rows_f16(n, k, q, q_stride, n_rows, s);
    return;
  }
  alignas(64) float kf[kMaxRowElems];  // [n] the cache row in f32
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_store_ps(kf + i, load_f16x16(k + i));
  for (; i < n; ++i) kf[i] = fp16_to_fp32(k[i]);
  const int64_t np = n / 64 * 64;
  for (int64_t r = 0; r < n_rows; ++r) {
    const float* qr = q + r * q_stride;
    double tail = 0.0;
    for (int64_t e = np; e < n; ++e) tail += static_cast<double>(kf[e] * qr[e]);
    __m512 g[4];
    for (auto& v : g) v = _mm512_setzero_ps();
    for (int64_t e = 0; e < np; e += 64)
      for (int j = 0; j < 4; ++j) g[j] = _mm512_fmadd_ps(_mm512_load_ps(kf + e + 16 * j), _mm512_loadu_ps(qr + e + 16 * j), g[j]);
    s[r] = static_cast<float>(static_cast<double>(w64_sum(g)) + tail);
  }
}

// acc row r [i] = f16(fma(v[i], p[r], acc row r [i])) for i < n.
void mad_rows_f16(int64_t n, uint16_t* acc, int64_t acc_stride, const uint16_t* v, const float* p, int64_t n_rows) {
  if (n > kMaxRowElems) {
    avx2::mad_rows_f16(n, acc, acc_stride, v, p, n_rows);
    return;
  }
  alignas(64) float vf[kMaxRowElems];  // [n] the cache row in f32
  const int64_t nv = n / 16 * 16;
  for (int64_t i = 0; i < nv; i += 16) _mm512_store_ps(vf + i, load_f16x16(v + i));
  for (int64_t r = 0; r < n_rows; ++r) {
    uint16_t* y = acc + r * acc_stride;
    const __m512 pv = _mm512_set1_ps(p[r]);
    for (int64_t i = 0; i < nv; i += 16) {
      const __m512 t = _mm512_fmadd_ps(_mm512_load_ps(vf + i), pv, load_f16x16(y + i));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i), _mm512_cvtps_ph(t, _MM_FROUND_TO_NEAREST_INT));
    }
    for (int64_t i = nv; i < n; ++i) y[i] = fp32_to_fp16(std::fma(fp16_to_fp32(v[i]), p[r], fp16_to_fp32(y[i])));
  }
}

// Keys go in blocks of kBlock: the block's scores (independent dot products) with their online
// softmax steps (scalar, as the composed loop's), then its V rows summed into the accumulators,
// which hold the f16 values as f32 in L1 (round_f16 after every step, as the f16 store did).
// The next block's K and V rows are asked for into L2 while this one is computed.
void attn_rows_f16(const AttnWideArgs& a) {
  constexpr int64_t kBlock = 8;
  constexpr int64_t kMaxVec = kAttnRowsMaxDim / 16;
  const int64_t R = a.G, nk = a.hd / 16, nv = a.hd_v / 16;
  const size_t k_bytes = static_cast<size_t>(a.hd) * 2, v_bytes = static_cast<size_t>(a.hd_v) * 2;
  alignas(64) float acc[kAttnRowsMax][kAttnRowsMaxDim];  // [R][hd_v] the f16 V sums, as f32
  float m[kAttnRowsMax], l[kAttnRowsMax];                 // [R] running max and sum
  for (int64_t r = 0; r < R; ++r) {
    for (int64_t i = 0; i < nv; ++i) _mm512_store_ps(acc[r] + 16 * i, _mm512_setzero_ps());
    m[r] = -INFINITY;
    l[r] = 0.0f;
  }
  for (int64_t j = 0; j < std::min(a.n_kv, kBlock); ++j) {
    prefetch_lines_l2(a.k_at(j), k_bytes);
    prefetch_lines_l2(a.v_at(j), v_bytes);
  }
  for (int64_t j0 = 0; j0 < a.n_kv; j0 += kBlock) {
    const int64_t nb = std::min(kBlock, a.n_kv - j0);
    for (int64_t j = j0 + kBlock; j < std::min(a.n_kv, j0 + 2 * kBlock); ++j) {
      prefetch_lines_l2(a.k_at(j), k_bytes);
      prefetch_lines_l2(a.v_at(j), v_bytes);
    }
    float p[kBlock][kAttnRowsMax], ms[kBlock][kAttnRowsMax];  // [nb][R] weights, rescale factors
    for (int64_t b = 0; b < nb; ++b) {
      const auto* kr = reinterpret_cast<const uint16_t*>(a.k_at(j0 + b));
      __m512 kf[kMaxVec];  // [hd] the K row in f32
      for (int64_t i = 0; i < nk; ++i) kf[i] = load_f16x16(kr + 16 * i);
      for (int64_t r = 0; r < R; ++r) {
        const float* qr = a.q + r * a.q_stride;
        __m512 g[4];
        for (auto& v : g) v = _mm512_setzero_ps();
        for (int64_t e = 0; e < nk; e += 4)
          for (int j = 0; j < 4; ++j) g[j] = _mm512_fmadd_ps(kf[e + j], _mm512_loadu_ps(qr + 16 * (e + j)), g[j]);
        // + 0.0 in double: the composed loop's (empty) tail, -0 becoming +0 as there
        const float s = static_cast<float>(static_cast<double>(w64_sum(g)) + 0.0);
        const OnlineStep st = online_step(narrow_score(s, a.scale, a.softcap), m[r], l[r]);
        p[b][r] = st.p;
        ms[b][r] = st.ms;
      }
    }
    for (int64_t b = 0; b < nb; ++b) {
      const auto* vr = reinterpret_cast<const uint16_t*>(a.v_at(j0 + b));
      __m512 vf[kMaxVec];  // [hd_v] the V row in f32
      for (int64_t i = 0; i < nv; ++i) vf[i] = load_f16x16(vr + 16 * i);
      for (int64_t r = 0; r < R; ++r) {
        float* y = acc[r];
        if (ms[b][r] != 1.0f) {  // a new maximum (acc * 1 would change nothing)
          const __m512 c = _mm512_set1_ps(ms[b][r]);
          for (int64_t i = 0; i < nv; ++i) _mm512_store_ps(y + 16 * i, round_f16(_mm512_mul_ps(_mm512_load_ps(y + 16 * i), c)));
        }
        const __m512 pv = _mm512_set1_ps(p[b][r]);
        for (int64_t i = 0; i < nv; ++i)
          _mm512_store_ps(y + 16 * i, round_f16(_mm512_fmadd_ps(vf[i], pv, _mm512_load_ps(y + 16 * i))));
      }
    }
  }
  for (int64_t r = 0; r < R; ++r) {
    const __m512 inv = _mm512_set1_ps(l[r] == 0.0f ? 0.0f : 1.0f / l[r]);
    float* yr = a.y + r * a.y_stride;
    for (int64_t i = 0; i < nv; ++i) _mm512_storeu_ps(yr + 16 * i, _mm512_mul_ps(_mm512_load_ps(acc[r] + 16 * i), inv));
  }
}

}  // namespace minfer::cpu::avx512

#include "backends/cpu/isa-end.h"
