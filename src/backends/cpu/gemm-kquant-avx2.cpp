// AVX2 GEMMs over repacked K-quant weights (Q2_K ... Q6_K, repack.h), bit-identical to the scalar
// specs in gemm-ref.cpp: each 16-row group is computed as two 8-row halves (half h = bytes
// 32h..32h+31 of each 64-byte vector), one dword per row.
// vpmaddubsw multiplies 4 unsigned weight bytes by 4 broadcast activation bytes into two int16
// per row (no saturation: |2 * 31 * 128| = 7936); a few of them are added as int16, then
// vpmaddwd with (scale, scale) in each dword gives scale * (sub-block sum) exactly in int32:
//   Q3_K, Q2_K  4 chunks of a sub-block of 16: |lo|, |hi| <= 8 * 7 * 128 = 7168, plus Q3_K's
//               -4 * bsum (|.| <= 8192) in the low int16: <= 15360
//   Q5_K        4 chunks of a sub-block of 32 at a time: <= 8 * 31 * 128 = 31744
//   Q4_K        the 8 chunks of a sub-block of 32 in one sum: 16 * 15 * 128 = 30720
//   Q6_K        2 chunks of a sub-block of 16 per sum: 4 * 63 * 128 = 32256 (weights u - 32:
//               the -32 * sc_j * bsum_j terms summed apart, vpmaddwd of scale and bsum pairs)
// all below 32767. The int32 sums are in the ranges of gemm-kquant-avx512.cpp (no overflow);
// then the float expression of the row kernel per super-block. An AVX2 region (isa-begin.h).
#include <immintrin.h>

#include <cstring>

#include "backends/cpu/kernels.h"
#include "backends/cpu/repack.h"
#include "quant/blocks.h"

#define MINFER_ISA avx2
#include "backends/cpu/isa-begin.h"
#include "backends/cpu/avx2-common.h"
#include "backends/cpu/gemm-tiles.h"

namespace minfer::cpu::avx2 {
namespace {

inline __m256i bcast4(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

inline __m256i load32(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
inline __m256i load_u8_epi32(const uint8_t* p) { return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))); }
inline __m256i load_i8_epi32(const uint8_t* p) { return _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))); }
inline __m256 load_f16(const uint8_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
// (v, v) as two int16 in each dword, from int32 lanes with |v| < 2^15.
inline __m256i pair16(__m256i v) { return _mm256_or_si256(_mm256_and_si256(v, _mm256_set1_epi32(0xffff)), _mm256_slli_epi32(v, 16)); }

// Bit c of each byte of hm moved to bit `to` (the caller masks bit `to`).
inline __m256i bit_to(__m256i hm, int c, int to) { return c >= to ? _mm256_srli_epi16(hm, c - to) : _mm256_slli_epi16(hm, to - c); }

// Chunk v (elements 4v..4v+3 of a sub-block of 16) of the 2-bit array q2, rows 8h..8h+7.
inline void unpack_low2(const uint8_t* q, int h, __m256i u[4]) {
  const __m256i m3 = _mm256_set1_epi8(0x03);
  const __m256i v = load32(q + 32 * h);
  u[0] = _mm256_and_si256(v, m3);
  u[1] = _mm256_and_si256(_mm256_srli_epi16(v, 2), m3);
  u[2] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m3);
  u[3] = _mm256_and_si256(_mm256_srli_epi16(v, 6), m3);
}

// The int16 pair sums of N chunks w[0..N) against activation bytes xq[0..4N), added to p.
template <int N>
inline __m256i dot(__m256i p, const __m256i* w, const int8_t* xq) {
  for (int v = 0; v < N; ++v) p = _mm256_add_epi16(p, _mm256_maddubs_epi16(w[v], bcast4(xq + 4 * v)));
  return p;
}

template <int T>
void tile_q3_k(const GemmArgs& a, int64_t g, int h, int64_t t0) {
  constexpr size_t kBytes = repack_block_bytes(DType::Q3_K);  // a.block_bytes
  __m256 acc[T];
  for (int i = 0; i < T; ++i) acc[i] = _mm256_setzero_ps();
  const uint8_t* wg = a.w + static_cast<size_t>(g * a.n_blocks) * kBytes;
  const BlockQ8_K* xr[T];
  for (int i = 0; i < T; ++i) xr[i] = reinterpret_cast<const BlockQ8_K*>(a.x + static_cast<size_t>(t0 + i) * a.x_row);
  const __m256i four = _mm256_set1_epi8(4);
  for (int64_t b = 0; b < a.n_blocks; ++b) {
    const uint8_t* blk = wg + static_cast<size_t>(b) * kBytes;
    __m256i sum[T];
    for (int i = 0; i < T; ++i) sum[i] = _mm256_setzero_si256();
    for (int j = 0; j < 16; ++j) {
      if (h == 0) prefetch_part<T, kBytes, 16>(blk, j);
      __m256i u[4];
      unpack_low2(blk + q3_k_q2_offset(j), h, u);
      const __m256i hb = load32(blk + q3_k_hm_offset(j / 2) + 32 * h);
      for (int v = 0; v < 4; ++v) u[v] = _mm256_or_si256(u[v], _mm256_and_si256(bit_to(hb, 4 * (j % 2) + v, 2), four));
      const __m256i scp = pair16(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(blk + 32 + 16 * j + 8 * h))));
      for (int i = 0; i < T; ++i) {
        const BlockQ8_K& xb = xr[i][b];
        const __m256i p0 = _mm256_set1_epi32(static_cast<uint16_t>(-4 * xb.bsums[j]));  // -4 * bsum in the low int16
        sum[i] = _mm256_add_epi32(sum[i], _mm256_madd_epi16(dot<4>(p0, u, xb.qs + 16 * j), scp));
      }
    }
    const __m256 dw = load_f16(blk + 16 * h);
    for (int i = 0; i < T; ++i) {
      const __m256 dd = _mm256_mul_ps(_mm256_set1_ps(xr[i][b].d), dw);
      acc[i] = _mm256_add_ps(acc[i], _mm256_mul_ps(dd, _mm256_cvtepi32_ps(sum[i])));
    }
  }
  for (int i = 0; i < T; ++i) _mm256_storeu_ps(a.y + (t0 + i) * a.y_stride + g * kRepackRows + 8 * h, acc[i]);
}

template <int T>
void tile_q2_k(const GemmArgs& a, int64_t g, int h, int64_t t0) {
  constexpr size_t kBytes = repack_block_bytes(DType::Q2_K);  // a.block_bytes
  __m256 acc[T];
  for (int i = 0; i < T; ++i) acc[i] = _mm256_setzero_ps();
  const uint8_t* wg = a.w + static_cast<size_t>(g * a.n_blocks) * kBytes;
  const BlockQ8_K* xr[T];
  for (int i = 0; i < T; ++i) xr[i] = reinterpret_cast<const BlockQ8_K*>(a.x + static_cast<size_t>(t0 + i) * a.x_row);
  const __m256i m4 = _mm256_set1_epi32(0x0f), m4h = _mm256_set1_epi32(0xf0);
  for (int64_t b = 0; b < a.n_blocks; ++b) {
    const uint8_t* blk = wg + static_cast<size_t>(b) * kBytes;
    __m256i sum_q[T], sum_m[T];
    for (int i = 0; i < T; ++i) sum_q[i] = sum_m[i] = _mm256_setzero_si256();
    for (int j = 0; j < 16; ++j) {
      if (h == 0) prefetch_part<T, kBytes, 16>(blk, j);
      __m256i u[4];
      unpack_low2(blk + q2_k_q2_offset(j), h, u);
      const __m256i scp = pair16(_mm256_and_si256(load_u8_epi32(blk + 64 + 16 * j + 8 * h), m4));
      for (int i = 0; i < T; ++i)
        sum_q[i] = _mm256_add_epi32(sum_q[i], _mm256_madd_epi16(dot<4>(_mm256_setzero_si256(), u, xr[i][b].qs + 16 * j), scp));
    }
    for (int k = 0; k < 8; ++k) {  // dword r: (m_2k, m_2k+1) as int16, m = the high nibble
      const __m256i m0 = _mm256_srli_epi32(load_u8_epi32(blk + 64 + 16 * (2 * k) + 8 * h), 4);
      const __m256i m1 = _mm256_and_si256(load_u8_epi32(blk + 64 + 16 * (2 * k + 1) + 8 * h), m4h);
      const __m256i mp = _mm256_or_si256(m0, _mm256_slli_epi32(m1, 12));
      for (int i = 0; i < T; ++i) sum_m[i] = _mm256_add_epi32(sum_m[i], _mm256_madd_epi16(mp, bcast4(xr[i][b].bsums + 2 * k)));
    }
    const __m256 dw = load_f16(blk + 16 * h), dmin = load_f16(blk + 32 + 16 * h);
    for (int i = 0; i < T; ++i) {
      const __m256 f = _mm256_sub_ps(_mm256_mul_ps(dw, _mm256_cvtepi32_ps(sum_q[i])), _mm256_mul_ps(dmin, _mm256_cvtepi32_ps(sum_m[i])));
      acc[i] = _mm256_add_ps(acc[i], _mm256_mul_ps(_mm256_set1_ps(xr[i][b].d), f));
    }
  }
  for (int i = 0; i < T; ++i) _mm256_storeu_ps(a.y + (t0 + i) * a.y_stride + g * kRepackRows + 8 * h, acc[i]);
}

// Q5_K: one sub-block j of 32 at a time (8 weight vectors: nibble j % 2 of qs[j / 2][c] OR bit c
// of hm[j] moved to bit 4), in two int16 sums of 4 chunks each.
template <int T>
void tile_q5_k(const GemmArgs& a, int64_t g, int h, int64_t t0) {
  constexpr size_t kBytes = repack_block_bytes(DType::Q5_K);  // a.block_bytes
  __m256 acc[T];
  for (int i = 0; i < T; ++i) acc[i] = _mm256_setzero_ps();
  const uint8_t* wg = a.w + static_cast<size_t>(g * a.n_blocks) * kBytes;
  const BlockQ8_K* xr[T];
  for (int i = 0; i < T; ++i) xr[i] = reinterpret_cast<const BlockQ8_K*>(a.x + static_cast<size_t>(t0 + i) * a.x_row);
  const __m256i m4 = _mm256_set1_epi8(0x0f), b4 = _mm256_set1_epi8(0x10);
  for (int64_t b = 0; b < a.n_blocks; ++b) {
    const uint8_t* blk = wg + static_cast<size_t>(b) * kBytes;
    __m256i sum_q[T], sum_m[T];
    for (int i = 0; i < T; ++i) sum_q[i] = sum_m[i] = _mm256_setzero_si256();
    for (int j = 0; j < 8; ++j) {
      if (h == 0) prefetch_part<T, kBytes, 8>(blk, j);
      __m256i w[8];
      const __m256i hb = load32(blk + q5_k_hm_offset(j) + 32 * h);
      for (int c = 0; c < 8; ++c) {
        const __m256i v = _mm256_srli_epi16(load32(blk + q5_k_qs_offset(j / 2) + 64 * c + 32 * h), 4 * (j % 2));
        w[c] = _mm256_or_si256(_mm256_and_si256(v, m4), _mm256_and_si256(bit_to(hb, c, 4), b4));
      }
      const __m256i scp = pair16(load_u8_epi32(blk + 64 + 16 * j + 8 * h));
      const __m256i mp = pair16(load_u8_epi32(blk + 192 + 16 * j + 8 * h));
      for (int i = 0; i < T; ++i) {
        const int8_t* xq = xr[i][b].qs + 32 * j;
        const __m256i p0 = dot<4>(_mm256_setzero_si256(), w, xq), p1 = dot<4>(_mm256_setzero_si256(), w + 4, xq + 16);
        sum_q[i] = _mm256_add_epi32(sum_q[i], _mm256_add_epi32(_mm256_madd_epi16(p0, scp), _mm256_madd_epi16(p1, scp)));
        sum_m[i] = _mm256_add_epi32(sum_m[i], _mm256_madd_epi16(mp, bcast4(xr[i][b].bsums + 2 * j)));
      }
    }
    const __m256 dw = load_f16(blk + 16 * h), dmin = load_f16(blk + 32 + 16 * h);
    for (int i = 0; i < T; ++i) {
      const __m256 f = _mm256_sub_ps(_mm256_mul_ps(dw, _mm256_cvtepi32_ps(sum_q[i])), _mm256_mul_ps(dmin, _mm256_cvtepi32_ps(sum_m[i])));
      acc[i] = _mm256_add_ps(acc[i], _mm256_mul_ps(_mm256_set1_ps(xr[i][b].d), f));
    }
  }
  for (int i = 0; i < T; ++i) _mm256_storeu_ps(a.y + (t0 + i) * a.y_stride + g * kRepackRows + 8 * h, acc[i]);
}

// Q4_K: sub-block j of 32 = nibble j % 2 of qs[j / 2][c] (c = 0..7, at 320 + 64 (8p + c)).
template <int T>
void tile_q4_k(const GemmArgs& a, int64_t g, int h, int64_t t0) {
  constexpr size_t kBytes = repack_block_bytes(DType::Q4_K);  // a.block_bytes
  __m256 acc[T];
  for (int i = 0; i < T; ++i) acc[i] = _mm256_setzero_ps();
  const uint8_t* wg = a.w + static_cast<size_t>(g * a.n_blocks) * kBytes;
  const BlockQ8_K* xr[T];
  for (int i = 0; i < T; ++i) xr[i] = reinterpret_cast<const BlockQ8_K*>(a.x + static_cast<size_t>(t0 + i) * a.x_row);
  const __m256i m4 = _mm256_set1_epi8(0x0f);
  for (int64_t b = 0; b < a.n_blocks; ++b) {
    const uint8_t* blk = wg + static_cast<size_t>(b) * kBytes;
    __m256i sum_q[T], sum_m[T];
    for (int i = 0; i < T; ++i) sum_q[i] = sum_m[i] = _mm256_setzero_si256();
    for (int j = 0; j < 8; ++j) {
      if (h == 0) prefetch_part<T, kBytes, 8>(blk, j);
      __m256i w[8];
      for (int c = 0; c < 8; ++c)
        w[c] = _mm256_and_si256(_mm256_srli_epi16(load32(blk + 320 + 64 * (8 * (j / 2) + c) + 32 * h), 4 * (j % 2)), m4);
      const __m256i scp = pair16(load_u8_epi32(blk + 64 + 16 * j + 8 * h));
      for (int i = 0; i < T; ++i)
        sum_q[i] = _mm256_add_epi32(sum_q[i], _mm256_madd_epi16(dot<8>(_mm256_setzero_si256(), w, xr[i][b].qs + 32 * j), scp));
    }
    for (int j = 0; j < 8; ++j) {  // dword r: (m_j, m_j) . (bsum_2j, bsum_2j+1)
      const __m256i mp = pair16(load_u8_epi32(blk + 192 + 16 * j + 8 * h));
      for (int i = 0; i < T; ++i) sum_m[i] = _mm256_add_epi32(sum_m[i], _mm256_madd_epi16(mp, bcast4(xr[i][b].bsums + 2 * j)));
    }
    const __m256 dw = load_f16(blk + 16 * h), dmin = load_f16(blk + 32 + 16 * h);
    for (int i = 0; i < T; ++i) {
      const __m256 f = _mm256_sub_ps(_mm256_mul_ps(dw, _mm256_cvtepi32_ps(sum_q[i])), _mm256_mul_ps(dmin, _mm256_cvtepi32_ps(sum_m[i])));
      acc[i] = _mm256_add_ps(acc[i], _mm256_mul_ps(_mm256_set1_ps(xr[i][b].d), f));
    }
  }
  for (int i = 0; i < T; ++i) _mm256_storeu_ps(a.y + (t0 + i) * a.y_stride + g * kRepackRows + 8 * h, acc[i]);
}

// The 4 chunks of unsigned 6-bit Q6_K weights of one sub-block of 16, rows 8h..8h+7, from its
// 3 vectors q (repack.h, q6_k_repacked_u): chunks 0-2 = bits 5..0 of q[0..2]; chunk 3 = the
// bits 7..6 of q[0], q[1], q[2] moved to 1..0, 3..2, 5..4 (the 16-bit shifts bring bits of the
// next byte only above the masked field).
inline void unpack_q6_k(const uint8_t* q, int h, __m256i u[4]) {
  const __m256i m6 = _mm256_set1_epi8(0x3f);
  const __m256i v0 = load32(q + 32 * h), v1 = load32(q + 64 + 32 * h), v2 = load32(q + 128 + 32 * h);
  u[0] = _mm256_and_si256(v0, m6);
  u[1] = _mm256_and_si256(v1, m6);
  u[2] = _mm256_and_si256(v2, m6);
  u[3] = _mm256_or_si256(_mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v0, 6), _mm256_set1_epi8(0x03)),
                                         _mm256_and_si256(_mm256_srli_epi16(v1, 4), _mm256_set1_epi8(0x0c))),
                         _mm256_and_si256(_mm256_srli_epi16(v2, 2), _mm256_set1_epi8(0x30)));
}

// Q6_K: per sub-block j of 16, sc_j * (u . x) from two int16 sums of 2 chunks; the offset term
// sum_j sc_j * bsum_j (times -32) from dwords (sc_2k, sc_2k+1) . (bsum_2k, bsum_2k+1).
template <int T>
void tile_q6_k(const GemmArgs& a, int64_t g, int h, int64_t t0) {
  constexpr size_t kBytes = repack_block_bytes(DType::Q6_K);  // a.block_bytes
  __m256 acc[T];
  for (int i = 0; i < T; ++i) acc[i] = _mm256_setzero_ps();
  const uint8_t* wg = a.w + static_cast<size_t>(g * a.n_blocks) * kBytes;
  const BlockQ8_K* xr[T];
  for (int i = 0; i < T; ++i) xr[i] = reinterpret_cast<const BlockQ8_K*>(a.x + static_cast<size_t>(t0 + i) * a.x_row);
  for (int64_t b = 0; b < a.n_blocks; ++b) {
    const uint8_t* blk = wg + static_cast<size_t>(b) * kBytes;
    __m256i sum_u[T], sum_b[T];
    for (int i = 0; i < T; ++i) sum_u[i] = sum_b[i] = _mm256_setzero_si256();
    for (int j = 0; j < 16; ++j) {
      if (h == 0) prefetch_part<T, kBytes, 16>(blk, j);
      __m256i u[4];
      unpack_q6_k(blk + kQ6KRepackedQuants + 192 * j, h, u);
      const __m256i scp = pair16(load_i8_epi32(blk + 32 + 16 * j + 8 * h));
      for (int i = 0; i < T; ++i) {
        const int8_t* xq = xr[i][b].qs + 16 * j;
        const __m256i p0 = dot<2>(_mm256_setzero_si256(), u, xq), p1 = dot<2>(_mm256_setzero_si256(), u + 2, xq + 8);
        sum_u[i] = _mm256_add_epi32(sum_u[i], _mm256_add_epi32(_mm256_madd_epi16(p0, scp), _mm256_madd_epi16(p1, scp)));
      }
    }
    for (int k = 0; k < 8; ++k) {  // dword r: (sc_2k, sc_2k+1) as int16
      const __m256i s0 = _mm256_and_si256(load_i8_epi32(blk + 32 + 16 * (2 * k) + 8 * h), _mm256_set1_epi32(0xffff));
      const __m256i sp = _mm256_or_si256(s0, _mm256_slli_epi32(load_i8_epi32(blk + 32 + 16 * (2 * k + 1) + 8 * h), 16));
      for (int i = 0; i < T; ++i) sum_b[i] = _mm256_add_epi32(sum_b[i], _mm256_madd_epi16(sp, bcast4(xr[i][b].bsums + 2 * k)));
    }
    const __m256 dw = load_f16(blk + 16 * h);
    for (int i = 0; i < T; ++i) {
      const __m256i s = _mm256_sub_epi32(sum_u[i], _mm256_slli_epi32(sum_b[i], 5));
      const __m256 dd = _mm256_mul_ps(_mm256_set1_ps(xr[i][b].d), dw);
      acc[i] = _mm256_add_ps(acc[i], _mm256_mul_ps(dd, _mm256_cvtepi32_ps(s)));
    }
  }
  for (int i = 0; i < T; ++i) _mm256_storeu_ps(a.y + (t0 + i) * a.y_stride + g * kRepackRows + 8 * h, acc[i]);
}

template <int T, void (*Tile)(const GemmArgs&, int64_t, int, int64_t), void (*Tile1)(const GemmArgs&, int64_t, int, int64_t)>
void gemm(const GemmArgs& a) {
  for (int64_t g = a.g0; g < a.g1; ++g)
    for (int h = 0; h < 2; ++h) {
      int64_t t = 0;
      for (; t + T <= a.n_tok; t += T) Tile(a, g, h, t);
      for (; t < a.n_tok; ++t) Tile1(a, g, h, t);
    }
}

}  // namespace

void gemm_q5_k(const GemmArgs& a) { gemm<2, tile_q5_k<2>, tile_q5_k<1>>(a); }
void gemm_q3_k(const GemmArgs& a) { gemm<4, tile_q3_k<4>, tile_q3_k<1>>(a); }
void gemm_q2_k(const GemmArgs& a) { gemm<4, tile_q2_k<4>, tile_q2_k<1>>(a); }
void gemm_q4_k(const GemmArgs& a) { gemm<4, tile_q4_k<4>, tile_q4_k<1>>(a); }
void gemm_q6_k(const GemmArgs& a) { gemm<4, tile_q6_k<4>, tile_q6_k<1>>(a); }

}  // namespace minfer::cpu::avx2

#include "backends/cpu/isa-end.h"
