// AVX-512 forms of the narrow attention's per-key row kernels (kernels.h): the W64 score of one
// f16 cache row against several f32 query rows, and the f16 V accumulator update. The same
// products, sums and roundings as the AVX2 forms (vec-dot-avx2.cpp), whose 16 lanes are two ymm
// halves here one zmm: lane l of accumulator g sums elements 64i + 16g + l, the groups add as
// (g0 + g2) + (g1 + g3), the lanes halve 16 -> 8 -> 4 -> 2 -> 1, the n % 64 tail in double.
// Qwen3-0.6B decode (hd 128, 2 query heads per KV head) spent ~7% of its time in the AVX2 forms.
// Compiled alone with the AVX-512 flags; called only after cpuid says so (kernels-avx512.cpp).
#include <immintrin.h>

#include <cmath>
#include <cstdint>

#include "backends/cpu/kernels-avx2.h"
#include "backends/cpu/kernels.h"
#include "core/fp16.h"

namespace minfer::cpu::avx512 {
namespace {

constexpr int64_t kMaxRowElems = 512;  // any head size; longer rows go to the AVX2 forms

inline __m512 load_f16x16(const uint16_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }

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
    const __m512 t16 = _mm512_add_ps(_mm512_add_ps(g[0], g[2]), _mm512_add_ps(g[1], g[3]));
    const __m256 t8 = _mm256_add_ps(_mm512_castps512_ps256(t16), _mm512_extractf32x8_ps(t16, 1));
    const __m128 t4 = _mm_add_ps(_mm256_castps256_ps128(t8), _mm256_extractf128_ps(t8, 1));
    const __m128 t2 = _mm_add_ps(t4, _mm_movehl_ps(t4, t4));
    const __m128 t1 = _mm_add_ss(t2, _mm_movehdup_ps(t2));
    s[r] = static_cast<float>(static_cast<double>(_mm_cvtss_f32(t1)) + tail);
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

}  // namespace minfer::cpu::avx512
