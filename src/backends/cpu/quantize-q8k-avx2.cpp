// AVX2 Q8_K activation quantizer (the activations of the K-quant and IQ4_XS matmuls), byte for
// byte the reference (quant/k-dequant.cpp quantize_q8_k, ggml's): per super-block of 256, the
// element of largest magnitude (the first one on ties) is `max`, iscale = -127 / max,
// q = min(127, round-half-even(iscale * x)), bsums = the sums of each 16 q, d = 1 / iscale.
// Vectorized: amax by max over |x| (exact in any order), the first element reaching it by a
// compare mask, the products and cvtps (MXCSR's default rounding = round-half-even, as
// nearbyint). A block holding NaN or infinity, or whose scale overflows (a subnormal max),
// goes to the reference (its rules for non-finite values are scalar), as does an all-zero block.
#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "backends/cpu/kernels-avx2.h"
#include "backends/cpu/kernels-ref.h"
#include "quant/blocks.h"

#define MINFER_ISA avx2
#include "backends/cpu/isa-begin.h"

namespace minfer::cpu::avx2 {
namespace {

// 8 vectors of 8 int32 -> their 8 horizontal sums, in order.
inline __m256i hsum8x8(const __m256i a[8]) {
  const __m256i h01 = _mm256_hadd_epi32(a[0], a[1]), h23 = _mm256_hadd_epi32(a[2], a[3]);
  const __m256i h45 = _mm256_hadd_epi32(a[4], a[5]), h67 = _mm256_hadd_epi32(a[6], a[7]);
  const __m256i lo = _mm256_hadd_epi32(h01, h23), hi = _mm256_hadd_epi32(h45, h67);
  return _mm256_add_epi32(_mm256_permute2x128_si256(lo, hi, 0x20), _mm256_permute2x128_si256(lo, hi, 0x31));
}

}  // namespace

void quantize_q8_k(const float* x, void* y, int64_t n) {
  auto* b = static_cast<BlockQ8_K*>(y);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256 inf = _mm256_set1_ps(INFINITY);
  for (int64_t ib = 0; ib < n / kQKK; ++ib, x += kQKK) {
    __m256 amax8 = _mm256_setzero_ps();
    __m256 bad = _mm256_setzero_ps();  // lanes with NaN or +-inf
    for (int i = 0; i < kQKK; i += 8) {
      const __m256 a = _mm256_andnot_ps(sign, _mm256_loadu_ps(x + i));
      bad = _mm256_or_ps(bad, _mm256_cmp_ps(a, inf, _CMP_NLT_UQ));  // a >= inf or unordered
      amax8 = _mm256_max_ps(amax8, a);
    }
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(amax8), _mm256_extractf128_ps(amax8, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    const float amax = _mm_cvtss_f32(h);
    if (_mm256_movemask_ps(bad) != 0 || amax == 0.0f) {
      ref::quantize_q8_k(x, b + ib, kQKK);
      continue;
    }
    // The first element whose magnitude is amax.
    const __m256 am = _mm256_set1_ps(amax);
    int first = 0;
    for (int i = 0; i < kQKK; i += 8) {
      const int m = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + i)), am, _CMP_EQ_OQ));
      if (m) {
        first = i + __builtin_ctz(static_cast<unsigned>(m));
        break;
      }
    }
    const float iscale = -127.0f / x[first];
    if (!std::isfinite(iscale)) {  // a subnormal max: the reference's non-finite products
      ref::quantize_q8_k(x, b + ib, kQKK);
      continue;
    }
    BlockQ8_K& o = b[ib];
    const __m256 mul = _mm256_set1_ps(iscale);
    const __m256i top = _mm256_set1_epi32(127);
    __m256i pair[16];  // pair[j]: the 8 lane sums of elements 16j .. 16j + 15
    for (int i = 0; i < kQKK; i += 32) {
      __m256i q[4];
      for (int k = 0; k < 4; ++k)
        q[k] = _mm256_min_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + i + 8 * k), mul)), top);
      const __m256i p16a = _mm256_packs_epi32(q[0], q[1]), p16b = _mm256_packs_epi32(q[2], q[3]);
      const __m256i p8 = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(p16a, p16b), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(o.qs + i), p8);
      pair[i / 16] = _mm256_add_epi32(q[0], q[1]);
      pair[i / 16 + 1] = _mm256_add_epi32(q[2], q[3]);
    }
    alignas(32) int32_t sums[16];  // |sum| <= 16 * 127
    _mm256_store_si256(reinterpret_cast<__m256i*>(sums), hsum8x8(pair));
    _mm256_store_si256(reinterpret_cast<__m256i*>(sums + 8), hsum8x8(pair + 8));
    for (int j = 0; j < 16; ++j) o.bsums[j] = static_cast<int16_t>(sums[j]);
    o.d = 1.0f / iscale;
  }
}

}  // namespace minfer::cpu::avx2

#include "backends/cpu/isa-end.h"
