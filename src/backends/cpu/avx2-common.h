// 256-bit helpers shared by the AVX2 kernel files (and the AVX-512 ones, which use a few):
// an ISA header, its functions compiled into the including region's namespace (isa-begin.h).
// Internal.
#pragma once
#ifndef MINFER_ISA_REGION
#error "avx2-common.h: include it inside an ISA region (isa-begin.h), after every other header"
#endif

#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "backends/cpu/kernels.h"

namespace minfer::cpu::MINFER_ISA {

inline float hsum_f32(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// [s0 .. s7] = the horizontal sums of a[0] .. a[7].
inline __m256 hsum8x8(const __m256 a[8]) {
  const __m256 t0 = _mm256_hadd_ps(a[0], a[1]), t1 = _mm256_hadd_ps(a[2], a[3]);
  const __m256 t2 = _mm256_hadd_ps(a[4], a[5]), t3 = _mm256_hadd_ps(a[6], a[7]);
  const __m256 u0 = _mm256_hadd_ps(t0, t1), u1 = _mm256_hadd_ps(t2, t3);
  return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}

// The largest of 8 lanes.
// Logit soft-capping of 8 scores already scaled by 1 / c: c * tanh(s), lane by lane with the
// scalar tanh (the scalar reference's arithmetic exactly; only Gemma 2 takes this path).
inline __m256 softcap8(__m256 s, float c) {
  alignas(32) float v[8];
  _mm256_store_ps(v, s);
  for (float& x : v) x = c * std::tanh(x);
  return _mm256_load_ps(v);
}

inline float hmax8(__m256 v) {
  __m128 h = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  h = _mm_max_ps(h, _mm_movehl_ps(h, h));
  h = _mm_max_ss(h, _mm_movehdup_ps(h));
  return _mm_cvtss_f32(h);
}

inline int hsum_i32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(s);
}

// 16 bytes of packed nibbles -> 32 bytes: elements 0..15 = low nibbles, 16..31 = high nibbles
// (the order of Q4_0, Q4_1, Q5_*, IQ4_NL blocks).
inline __m256i nibbles_32(const uint8_t* qs) {
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m256i v = _mm256_set_m128i(_mm_srli_epi16(b, 4), b);
  return _mm256_and_si256(v, _mm256_set1_epi8(0x0f));
}

// 32 bits -> 32 bytes, byte i = 0xff when bit i is set.
inline __m256i bytes_from_bits_32(const uint8_t* p) {
  uint32_t x;
  std::memcpy(&x, p, 4);
  const __m256i shuf = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,  //
                                        2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
  const __m256i bits = _mm256_set1_epi64x(0x8040201008040201LL);
  const __m256i v = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(x)), shuf), bits);
  return _mm256_cmpeq_epi8(v, bits);
}

// Pairwise products of unsigned u (0..127) and signed s bytes summed to 16 int16 values; the
// inputs here never saturate (|u| <= 63 or |s| <= 127 with |u| <= 128 via sign tricks).
inline __m256i madd_us8(__m256i u, __m256i s) { return _mm256_maddubs_epi16(u, s); }

// Signed x signed bytes -> 8 int32 sums (4 products each).
inline __m256i dot_i8_i32(__m256i x, __m256i y) {
  const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
  return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

// Unsigned x signed bytes -> 8 int32 sums.
inline __m256i dot_u8_i32(__m256i u, __m256i s) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

// A cache row of n values (n % 8 == 0), f16 or f32, widened to f32.
inline void widen_row8(const uint8_t* row, int64_t n, bool f16, float* out) {
  if (f16) {
    for (int64_t i = 0; i < n; i += 8)
      _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * i))));
  } else {
    for (int64_t i = 0; i < n; i += 8) _mm256_storeu_ps(out + i, _mm256_loadu_ps(reinterpret_cast<const float*>(row) + i));
  }
}

// exp_poly (kernels.h) on 8 lanes; a vector with some |n| > 126 (|x| > ~87) goes lane by lane
// through the scalar form, whose 2^n may leave the normal range.
inline __m256 exp_poly8(__m256 x) {
  const __m256 shift = _mm256_set1_ps(0x1.8p23f);
  const __m256 z = _mm256_fmadd_ps(x, _mm256_set1_ps(0x1.715476p+0f), shift);
  const __m256 n = _mm256_sub_ps(z, shift);
  const __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.7f7d1cp-20f), _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.62e4p-1f), x));
  const __m256 big = _mm256_cmp_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.0f), n), _mm256_set1_ps(126.0f), _CMP_NLE_UQ);
  if (_mm256_movemask_ps(big)) {
    alignas(32) float v[8];
    _mm256_store_ps(v, x);
    for (float& e : v) e = exp_poly(e);
    return _mm256_load_ps(v);
  }
  const __m256 u = _mm256_mul_ps(r, r);
  const __m256 p = _mm256_fmadd_ps(
      _mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_set1_ps(0x1.0e4020p-7f), r, _mm256_set1_ps(0x1.573e2ep-5f)), u,
                      _mm256_fmadd_ps(_mm256_set1_ps(0x1.555e66p-3f), r, _mm256_set1_ps(0x1.fffdb6p-2f))),
      u, _mm256_fmadd_ps(_mm256_set1_ps(0x1.ffffecp-1f), r, _mm256_set1_ps(1.0f)));
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(e));  // p * 2^n, exact scaling
}

}  // namespace minfer::cpu::MINFER_ISA
