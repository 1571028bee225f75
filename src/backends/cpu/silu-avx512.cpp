// AVX-512 form of kernels.h's SiluRowFn: 16 lanes per step with the AVX2 form's steps
// (vec-dot-avx2.cpp): exp_poly16 of -x, then x / (1 + e); the row's last n % 16 values by libm's
// expf. Every value is the reference's bits. An AVX-512 region (isa-begin.h); called
// only after cpuid says so (kernels-avx512.cpp).
#include <immintrin.h>

#include <cmath>
#include <cstdint>

#include "backends/cpu/kernels.h"

#define MINFER_ISA avx512
#include "backends/cpu/isa-begin.h"
#include "backends/cpu/avx512-common.h"

namespace minfer::cpu::avx512 {

void silu_row(int64_t n, float* y, const float* x) {
  const int64_t nv = n / 16 * 16;
  const __m512 one = _mm512_set1_ps(1.0f);
  for (int64_t i = 0; i < nv; i += 16) {
    const __m512 v = _mm512_loadu_ps(x + i);
    const __m512 e = exp_poly16(_mm512_sub_ps(_mm512_setzero_ps(), v));
    _mm512_storeu_ps(y + i, _mm512_div_ps(v, _mm512_add_ps(one, e)));
  }
  for (int64_t i = nv; i < n; ++i) y[i] = x[i] / (1.0f + std::exp(-x[i]));
}

}  // namespace minfer::cpu::avx512

#include "backends/cpu/isa-end.h"
