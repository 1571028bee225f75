// Helpers shared by the AVX-512 and AMX kernel files: an ISA header, its functions compiled
// into the including region's namespace (isa-begin.h). Internal.
#pragma once
#ifndef MINFER_ISA_REGION
#error "avx512-common.h: include it inside an ISA region (isa-begin.h), after every other header"
#endif

#include <immintrin.h>

#include <cstdint>

#include "backends/cpu/kernels.h"

namespace minfer::cpu::MINFER_ISA {

// A cache row of n values (n % 16 == 0), f16 or f32, widened to f32.
inline void widen_row16(const uint8_t* row, int64_t n, bool f16, float* out) {
  if (f16) {
    for (int64_t i = 0; i < n; i += 16)
      _mm512_storeu_ps(out + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * i))));
  } else {
    for (int64_t i = 0; i < n; i += 16) _mm512_storeu_ps(out + i, _mm512_loadu_ps(reinterpret_cast<const float*>(row) + i));
  }
}

// exp_poly (kernels.h)'s n = round(x / ln 2) on 16 lanes, and its result from x and that n
// where |n| <= 126 (its 2^n then a normal number: the scalar form's other cases are not needed).
inline __m512 exp_poly16_n(__m512 x) {
  const __m512 shift = _mm512_set1_ps(0x1.8p23f);
  return _mm512_sub_ps(_mm512_fmadd_ps(x, _mm512_set1_ps(0x1.715476p+0f), shift), shift);
}
inline __m512 exp_poly16_normal(__m512 x, __m512 n) {
  const __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.7f7d1cp-20f), _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.62e4p-1f), x));
  const __m512 u = _mm512_mul_ps(r, r);
  const __m512 p = _mm512_fmadd_ps(
      _mm512_fmadd_ps(_mm512_fmadd_ps(_mm512_set1_ps(0x1.0e4020p-7f), r, _mm512_set1_ps(0x1.573e2ep-5f)), u,
                      _mm512_fmadd_ps(_mm512_set1_ps(0x1.555e66p-3f), r, _mm512_set1_ps(0x1.fffdb6p-2f))),
      u, _mm512_fmadd_ps(_mm512_set1_ps(0x1.ffffecp-1f), r, _mm512_set1_ps(1.0f)));
  const __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
  return _mm512_mul_ps(p, _mm512_castsi512_ps(e));  // p * 2^n, exact scaling
}

// exp_poly on 16 lanes of x in [-87, 0].
inline __m512 exp_poly16_nonpositive(__m512 x) { return exp_poly16_normal(x, exp_poly16_n(x)); }

// exp_poly (kernels.h) on 16 lanes; a vector with some |n| > 126 (|x| > ~87) goes lane by lane
// through the scalar form, whose 2^n may leave the normal range (exp_poly8's rule).
inline __m512 exp_poly16(__m512 x) {
  const __m512 n = exp_poly16_n(x);
  if (_mm512_cmp_ps_mask(_mm512_abs_ps(n), _mm512_set1_ps(126.0f), _CMP_NLE_UQ)) {
    alignas(64) float v[16];
    _mm512_store_ps(v, x);
    for (float& e : v) e = exp_poly(e);
    return _mm512_load_ps(v);
  }
  return exp_poly16_normal(x, n);
}

// The four chunks (4 consecutive elements x 16 rows) of unsigned 6-bit Q6_K weights of one
// sub-block, from its 3 vectors q (repack.h): chunks 0-2 are bits 5..0 of q[0..2] (one AND each);
// chunk 3 gathers the bits 7..6 of q[0], q[1], q[2] into bits 1..0, 3..2, 5..4 (3 shifts, 2
// selects, 1 AND; the 16-bit shifts bring bits of the next byte only above the field). 9 ops.
inline void unpack_q6_k(const uint8_t* q, __m512i u[4]) {
  constexpr int kSelect = 0xca;  // ternarylogic(a, b, c): a ? b : c, bit by bit
  const __m512i m6 = _mm512_set1_epi8(0x3f), m2 = _mm512_set1_epi8(0x03), m4 = _mm512_set1_epi8(0x0f);
  const __m512i v0 = _mm512_loadu_si512(q), v1 = _mm512_loadu_si512(q + 64), v2 = _mm512_loadu_si512(q + 128);
  u[0] = _mm512_and_si512(v0, m6);
  u[1] = _mm512_and_si512(v1, m6);
  u[2] = _mm512_and_si512(v2, m6);
  const __m512i lo = _mm512_ternarylogic_epi32(m2, _mm512_srli_epi16(v0, 6), _mm512_srli_epi16(v1, 4), kSelect);
  u[3] = _mm512_and_si512(_mm512_ternarylogic_epi32(m4, lo, _mm512_srli_epi16(v2, 2), kSelect), m6);
}

}  // namespace minfer::cpu::MINFER_ISA
