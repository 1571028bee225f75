// AVX-512 (F/BW/DQ/VL + VNNI) GEMMs over repacked Q5_K, Q3_K and Q2_K weights (repack.h),
// bit-identical to the scalar specs in gemm-ref.cpp (and so to vec_dot_q5_k / q3_k / q2_k):
// one zmm holds 16 rows; vpdpbusd adds 4 unsigned weight bytes x 4 broadcast activation bytes
// per row to the row's exact integer sub-block sum; tiles of several tokens share each unpacked
// weight vector. Per super-block the integer sums are exact, then the float expression of the
// row kernel, sequential over super-blocks.
//
// No int32 overflow (|x| <= 128 for the Q8_K activations):
//   Q5_K  |q . x| <= 31 * 128 * 32 = 126976 per sub-block of 32, * scale <= 63, * 8 sub-blocks
//         < 6.4e7; sum_m <= 63 * 4096 * 8 < 2.1e6
//   Q3_K  |(u - 4) . x| <= 4 * 128 * 16 = 8192 per sub-block of 16 (fits int16), * |scale| <= 32,
//         * 16 < 4.2e6
//   Q2_K  |q . x| <= 3 * 128 * 16 = 6144 (fits int16), * 15 * 16 < 1.5e6; sum_m <= 15 * 2048 * 16
// vpdpbusd / vpdpwssd wrap (no saturation), so a partial sum that starts at -4 * bsum is exact
// modulo 2^32 and the final one is in range, hence exact. The sub-block sums of Q3_K and Q2_K
// fit in int16, so vpdpwssd with the scale in the low half of a dword (high half 0) adds
// scale * sum exactly (one uop instead of vpmulld + vpaddd).
// An AVX-512 region (isa-begin.h); called only after cpuid says so (kernels-avx512.cpp).
#include <immintrin.h>

#include <cstring>

#include "backends/cpu/kernels.h"
#include "backends/cpu/repack.h"
#include "quant/blocks.h"

#define MINFER_ISA avx512
#include "backends/cpu/isa-begin.h"
#include "backends/cpu/gemm-tiles.h"

namespace minfer::cpu::avx512 {
namespace {

// 4 activation bytes (or 2 int16) broadcast to the 16 dwords.
inline __m512i bcast4(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

// Bit c of each byte of hm moved to bit `to` (the 16-bit shifts bring bits of the neighbour
// byte only into other bit positions); the caller masks bit `to`.
inline __m512i bit_to(__m512i hm, int c, int to) { return c >= to ? _mm512_srli_epi16(hm, c - to) : _mm512_slli_epi16(hm, to - c); }

constexpr int kOrAnd = 0xf8;  // ternarylogic(a, b, c) = a | (b & c)

inline __m512i load_u8_epi32(const uint8_t* p) { return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
inline __m512 load_f16(const uint8_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }

// The four chunks (elements 4v..4v+3 of a sub-block of 16, 16 rows) of the 2-bit array q2
// (repack.h): bits 2v+1..2v of each byte. The 16-bit shifts bring bits of the next byte only
// above the field.
inline void unpack_low2(const uint8_t* q, __m512i u[4]) {
  const __m512i m3 = _mm512_set1_epi8(0x03);
  const __m512i v = _mm512_loadu_si512(q);
  u[0] = _mm512_and_si512(v, m3);
  u[1] = _mm512_and_si512(_mm512_srli_epi16(v, 2), m3);
  u[2] = _mm512_and_si512(_mm512_srli_epi16(v, 4), m3);
  u[3] = _mm512_and_si512(_mm512_srli_epi16(v, 6), m3);
}

// Q5_K x Q8_K (gemm_q5_k in gemm-ref.cpp): the Q4_K nibbles of chunk c of sub-block pair p,
// OR bit c of hm[s] moved to bit 4 (s = 2p for the low nibbles, 2p + 1 for the high);
// per sub-block sum times its scale (vpmulld: the sums need 17 bits); the mins through
// vpdpwssd of (m_j, m_j) with (bsums[2j], bsums[2j+1]).
template <int T>
void tile_q5_k(const GemmArgs& a, int64_t g, int64_t t0) {
  constexpr size_t kBytes = repack_block_bytes(DType::Q5_K);  // a.block_bytes
  __m512 acc[T];
  for (int i = 0; i < T; ++i) acc[i] = _mm512_setzero_ps();
  const uint8_t* wg = a.w + static_cast<size_t>(g * a.n_blocks) * kBytes;
  const BlockQ8_K* xr[T];
  for (int i = 0; i < T; ++i) xr[i] = reinterpret_cast<const BlockQ8_K*>(a.x + static_cast<size_t>(t0 + i) * a.x_row);
  const __m512i m4 = _mm512_set1_epi8(0x0f), b4 = _mm512_set1_epi8(0x10);
  for (int64_t b = 0; b < a.n_blocks; ++b) {
    const uint8_t* blk = wg + static_cast<size_t>(b) * kBytes;
    __m512i sum_q[T];
    for (int i = 0; i < T; ++i) sum_q[i] = _mm512_setzero_si512();
    for (int p = 0; p < 4; ++p) {
      prefetch_part<T, kBytes, 4>(blk, p);
      __m512i lo[8], hi[8];
      const __m512i h_lo = _mm512_loadu_si512(blk + q5_k_hm_offset(2 * p)), h_hi = _mm512_loadu_si512(blk + q5_k_hm_offset(2 * p + 1));
      for (int c = 0; c < 8; ++c) {
        const __m512i v = _mm512_loadu_si512(blk + q5_k_qs_offset(p) + 64 * c);
        lo[c] = _mm512_ternarylogic_epi32(_mm512_and_si512(v, m4), bit_to(h_lo, c, 4), b4, kOrAnd);
        hi[c] = _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi16(v, 4), m4), bit_to(h_hi, c, 4), b4, kOrAnd);
      }
      const __m512i sc_lo = load_u8_epi32(blk + 64 + 16 * (2 * p));
      const __m512i sc_hi = load_u8_epi32(blk + 64 + 16 * (2 * p + 1));
      for (int i = 0; i < T; ++i) {
        const int8_t* xq = xr[i][b].qs;
        __m512i s_lo = _mm512_setzero_si512(), s_hi = _mm512_setzero_si512();
        for (int c = 0; c < 8; ++c) {
          s_lo = _mm512_dpbusd_epi32(s_lo, lo[c], bcast4(xq + 32 * (2 * p) + 4 * c));
          s_hi = _mm512_dpbusd_epi32(s_hi, hi[c], bcast4(xq + 32 * (2 * p + 1) + 4 * c));
        }
        sum_q[i] = _mm512_add_epi32(sum_q[i], _mm512_add_epi32(_mm512_mullo_epi32(s_lo, sc_lo), _mm512_mullo_epi32(s_hi, sc_hi)));
      }
    }
    __m512i mp[8];  // dword r: (m_j, m_j) as int16
    for (int j = 0; j < 8; ++j) {
      const __m512i m = load_u8_epi32(blk + 192 + 16 * j);
      mp[j] = _mm512_or_si512(m, _mm512_slli_epi32(m, 16));
    }
    const __m512 dw = load_f16(blk), dmin = load_f16(blk + 32);
    for (int i = 0; i < T; ++i) {
      const BlockQ8_K& xb = xr[i][b];
      __m512i sum_m = _mm512_setzero_si512();
      for (int j = 0; j < 8; ++j) sum_m = _mm512_dpwssd_epi32(sum_m, mp[j], bcast4(xb.bsums + 2 * j));
      const __m512 f = _mm512_sub_ps(_mm512_mul_ps(dw, _mm512_cvtepi32_ps(sum_q[i])), _mm512_mul_ps(dmin, _mm512_cvtepi32_ps(sum_m)));
      acc[i] = _mm512_add_ps(acc[i], _mm512_mul_ps(_mm512_set1_ps(xb.d), f));
    }
  }
  for (int i = 0; i < T; ++i) _mm512_storeu_ps(a.y + (t0 + i) * a.y_stride + g * kRepackRows, acc[i]);
}

// Q3_K x Q8_K (gemm_q3_k): per sub-block j of 16 the exact sum starts at -4 * bsum_j and takes
// 4 vpdpbusd of u = low 2 bits | bit 4(j%2) + v of hm[j/2] moved to bit 2; scale_j (int8, sign-extended to
// the low int16 of each dword, high int16 0) times the sum by vpdpwssd; s += (d_x * d) * sum.
template <int T>
void tile_q3_k(const GemmArgs& a, int64_t g, int64_t t0) {
  constexpr size_t kBytes = repack_block_bytes(DType::Q3_K);  // a.block_bytes
  __m512 acc[T];
  for (int i = 0; i < T; ++i) acc[i] = _mm512_setzero_ps();
  const uint8_t* wg = a.w + static_cast<size_t>(g * a.n_blocks) * kBytes;
  const BlockQ8_K* xr[T];
  for (int i = 0; i < T; ++i) xr[i] = reinterpret_cast<const BlockQ8_K*>(a.x + static_cast<size_t>(t0 + i) * a.x_row);
  const __m512i four = _mm512_set1_epi8(4), low16 = _mm512_set1_epi32(0xffff);
  for (int64_t b = 0; b < a.n_blocks; ++b) {
    const uint8_t* blk = wg + static_cast<size_t>(b) * kBytes;
    __m512i sum[T];
    for (int i = 0; i < T; ++i) sum[i] = _mm512_setzero_si512();
    for (int j = 0; j < 16; ++j) {
      prefetch_part<T, kBytes, 16>(blk, j);
      __m512i u[4];
      unpack_low2(blk + q3_k_q2_offset(j), u);
      const __m512i h = _mm512_loadu_si512(blk + q3_k_hm_offset(j / 2));
      for (int v = 0; v < 4; ++v) u[v] = _mm512_ternarylogic_epi32(u[v], bit_to(h, 4 * (j % 2) + v, 2), four, kOrAnd);
      const __m512i sc = _mm512_and_si512(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 32 + 16 * j))), low16);
      for (int i = 0; i < T; ++i) {
        const BlockQ8_K& xb = xr[i][b];
        __m512i s = _mm512_set1_epi32(-4 * xb.bsums[j]);
        for (int v = 0; v < 4; ++v) s = _mm512_dpbusd_epi32(s, u[v], bcast4(xb.qs + 16 * j + 4 * v));
        sum[i] = _mm512_dpwssd_epi32(sum[i], s, sc);
      }
    }
    const __m512 dw = load_f16(blk);
    for (int i = 0; i < T; ++i) {
      const __m512 dd = _mm512_mul_ps(_mm512_set1_ps(xr[i][b].d), dw);
      acc[i] = _mm512_add_ps(acc[i], _mm512_mul_ps(dd, _mm512_cvtepi32_ps(sum[i])));
    }
  }
  for (int i = 0; i < T; ++i) _mm512_storeu_ps(a.y + (t0 + i) * a.y_stride + g * kRepackRows, acc[i]);
}

// Q2_K x Q8_K (gemm_q2_k): per sub-block j of 16, 4 vpdpbusd of the 2-bit weights, times the
// low nibble of scm by vpdpwssd; the mins through vpdpwssd of (m_2k, m_2k+1) with
// (bsums[2k], bsums[2k+1]); s += d_x * (d * sum_q - dmin * sum_m).
template <int T>
void tile_q2_k(const GemmArgs& a, int64_t g, int64_t t0) {
  constexpr size_t kBytes = repack_block_bytes(DType::Q2_K);  // a.block_bytes
  __m512 acc[T];
  for (int i = 0; i < T; ++i) acc[i] = _mm512_setzero_ps();
  const uint8_t* wg = a.w + static_cast<size_t>(g * a.n_blocks) * kBytes;
  const BlockQ8_K* xr[T];
  for (int i = 0; i < T; ++i) xr[i] = reinterpret_cast<const BlockQ8_K*>(a.x + static_cast<size_t>(t0 + i) * a.x_row);
  const __m512i m4 = _mm512_set1_epi32(0x0f), m4h = _mm512_set1_epi32(0xf0);
  for (int64_t b = 0; b < a.n_blocks; ++b) {
    const uint8_t* blk = wg + static_cast<size_t>(b) * kBytes;
    __m512i sum_q[T];
    for (int i = 0; i < T; ++i) sum_q[i] = _mm512_setzero_si512();
    for (int j = 0; j < 16; ++j) {
      prefetch_part<T, kBytes, 16>(blk, j);
      __m512i u[4];
      unpack_low2(blk + q2_k_q2_offset(j), u);
      const __m512i sc = _mm512_and_si512(load_u8_epi32(blk + 64 + 16 * j), m4);
      for (int i = 0; i < T; ++i) {
        const int8_t* xq = xr[i][b].qs + 16 * j;
        __m512i s = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u[0], bcast4(xq));
        for (int v = 1; v < 4; ++v) s = _mm512_dpbusd_epi32(s, u[v], bcast4(xq + 4 * v));
        sum_q[i] = _mm512_dpwssd_epi32(sum_q[i], s, sc);
      }
    }
    __m512i mp[8];  // dword r: (m_2k, m_2k+1) as int16, m = the high nibble of scm
    for (int k = 0; k < 8; ++k) {
      const __m512i m0 = _mm512_srli_epi32(load_u8_epi32(blk + 64 + 16 * (2 * k)), 4);
      const __m512i m1 = _mm512_and_si512(load_u8_epi32(blk + 64 + 16 * (2 * k + 1)), m4h);
      mp[k] = _mm512_or_si512(m0, _mm512_slli_epi32(m1, 12));
    }
    const __m512 dw = load_f16(blk), dmin = load_f16(blk + 32);
    for (int i = 0; i < T; ++i) {
      const BlockQ8_K& xb = xr[i][b];
      __m512i sum_m = _mm512_setzero_si512();
      for (int k = 0; k < 8; ++k) sum_m = _mm512_dpwssd_epi32(sum_m, mp[k], bcast4(xb.bsums + 2 * k));
      const __m512 f = _mm512_sub_ps(_mm512_mul_ps(dw, _mm512_cvtepi32_ps(sum_q[i])), _mm512_mul_ps(dmin, _mm512_cvtepi32_ps(sum_m)));
      acc[i] = _mm512_add_ps(acc[i], _mm512_mul_ps(_mm512_set1_ps(xb.d), f));
    }
  }
  for (int i = 0; i < T; ++i) _mm512_storeu_ps(a.y + (t0 + i) * a.y_stride + g * kRepackRows, acc[i]);
}

}  // namespace

// Q5_K: tiles of 4 tokens (16 weight vectors live per sub-block pair, as Q4_K).
void gemm_q5_k(const GemmArgs& a) {
  gemm_tiles<4, 1>(a, [&]<int T>(int64_t g, int64_t t0) { tile_q5_k<T>(a, g, t0); });
}

// Q3_K, Q2_K: tiles of 8 tokens share each sub-block's unpacking (4 weight vectors live).
void gemm_q3_k(const GemmArgs& a) {
  gemm_tiles<8, 4, 1>(a, [&]<int T>(int64_t g, int64_t t0) { tile_q3_k<T>(a, g, t0); });
}

void gemm_q2_k(const GemmArgs& a) {
  gemm_tiles<8, 4, 1>(a, [&]<int T>(int64_t g, int64_t t0) { tile_q2_k<T>(a, g, t0); });
}

}  // namespace minfer::cpu::avx512

#include "backends/cpu/isa-end.h"
