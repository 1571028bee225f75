// AVX2 + FMA form of kernels.h's RopeRowFn, 8 outputs per step with rope-row.cpp's roundings:
// fma(a, c, -(b s)) is fmsub(a, c, b s). NEOX pairs are two contiguous runs; NORM pairs sit
// side by side, so a step takes 4 pairs, their cos and sin duplicated into both lanes of a
// pair, and blends the even lanes' results (a's) with the odd lanes' (b's). An AVX2 region
// (isa-begin.h); called only after cpuid says so (kernels-avx2.cpp).
#include <immintrin.h>

#include <cmath>
#include <cstdint>

#include "backends/cpu/kernels-avx2.h"

#define MINFER_ISA avx2
#include "backends/cpu/isa-begin.h"

namespace minfer::cpu::avx2 {

void rope_row(int64_t half, bool neox, const float* cos, const float* sin, const float* x, float* y) {
  int64_t i = 0;
  if (neox) {
    for (; i + 8 <= half; i += 8) {
      const __m256 a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(x + half + i);
      const __m256 c = _mm256_loadu_ps(cos + i), s = _mm256_loadu_ps(sin + i);
      _mm256_storeu_ps(y + i, _mm256_fmsub_ps(a, c, _mm256_mul_ps(b, s)));
      _mm256_storeu_ps(y + half + i, _mm256_fmadd_ps(a, s, _mm256_mul_ps(b, c)));
    }
  } else {
    const __m256i dup = _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3);
    for (; i + 4 <= half; i += 4) {
      const __m256 v = _mm256_loadu_ps(x + 2 * i);           // a0 b0 a1 b1 ...
      const __m256 sw = _mm256_permute_ps(v, 0xB1);          // b0 a0 b1 a1 ...
      const __m256 c = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(_mm_loadu_ps(cos + i)), dup);
      const __m256 s = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(_mm_loadu_ps(sin + i)), dup);
      const __m256 even = _mm256_fmsub_ps(v, c, _mm256_mul_ps(sw, s));  // a c - b s
      const __m256 odd = _mm256_fmadd_ps(sw, s, _mm256_mul_ps(v, c));   // a s + b c
      _mm256_storeu_ps(y + 2 * i, _mm256_blend_ps(even, odd, 0xAA));
    }
  }
  for (; i < half; ++i) {
    const int64_t i0 = neox ? i : 2 * i, i1 = neox ? i + half : 2 * i + 1;
    const float a = x[i0], b = x[i1];
    y[i0] = std::fma(a, cos[i], -(b * sin[i]));
    y[i1] = std::fma(a, sin[i], b * cos[i]);
  }
}

}  // namespace minfer::cpu::avx2

#include "backends/cpu/isa-end.h"
