// AVX2 GEMM kernels over repacked weights (repack.h): each 16-row group is computed as two
// 8-row halves, one ymm lane per row; the 4-byte integer dot products use maddubs + madd
// (Q4_0/Q5_0: unsigned weights <= 31, then -offset * sum(x); Q8_0: signed weights by the
// sign trick). Per block and row: s = fma(d_w * d_x, float(isum), s), the Seq order of
// vec-dot-ref.cpp, so the results equal the reference and AVX-512 kernels bit for bit.
// Q4_1 / Q5_1 (unsigned weights, Q8_1 activations): the float orders of gemm-ref.cpp below.
// An AVX2 region (isa-begin.h).
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

constexpr int kTile = 4;  // tokens per register tile

inline __m256i bcast_x4(const int8_t* q) {
  int32_t v;
  std::memcpy(&v, q, 4);
  return _mm256_set1_epi32(v);
}

inline __m256i bcast_x(const BlockQ8_0& xb, int byte) { return bcast_x4(xb.qs + byte); }

// w[c] (8 rows x 4 bytes of half h) pairs with activation bytes xoff(c)..xoff(c)+3.
struct Q4Block {
  static constexpr int kBias = 8;
  static void load(const uint8_t* blk, int h, __m256i w[8]) {
    const __m256i m = _mm256_set1_epi8(0x0f);
    for (int k = 0; k < 4; ++k) {
      const __m256i v = _mm256_load_si256(reinterpret_cast<const __m256i*>(blk + 32 + 64 * k + 32 * h));
      w[k] = _mm256_and_si256(v, m);
      w[4 + k] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m);
    }
  }
  static __m256i dot(__m256i w, __m256i x) { return dot_u8_i32(w, x); }
  static int xoff(int c) { return c < 4 ? 4 * c : 16 + 4 * (c - 4); }
};

struct Q5Block {
  static constexpr int kBias = 16;
  static void load(const uint8_t* blk, int h, __m256i w[8]) {
    const __m256i m = _mm256_set1_epi8(0x0f), b4 = _mm256_set1_epi8(0x10);
    const uint8_t* hm = blk + 32 + 256;  // [4][2] u64; half h = bytes 4h..4h+3 of each
    for (int k = 0; k < 4; ++k) {
      const __m256i v = _mm256_load_si256(reinterpret_cast<const __m256i*>(blk + 32 + 64 * k + 32 * h));
      w[k] = _mm256_or_si256(_mm256_and_si256(v, m), _mm256_and_si256(bytes_from_bits_32(hm + 16 * k + 4 * h), b4));
      w[4 + k] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), m),
                                 _mm256_and_si256(bytes_from_bits_32(hm + 16 * k + 8 + 4 * h), b4));
    }
  }
  static __m256i dot(__m256i w, __m256i x) { return dot_u8_i32(w, x); }
  static int xoff(int c) { return c < 4 ? 4 * c : 16 + 4 * (c - 4); }
};

struct Q8Block {
  static constexpr int kBias = 0;  // the bytes are turned back into signed weights
  static void load(const uint8_t* blk, int h, __m256i w[8]) {
    const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
    for (int k = 0; k < 8; ++k)
      w[k] = _mm256_xor_si256(_mm256_load_si256(reinterpret_cast<const __m256i*>(blk + 32 + 64 * k + 32 * h)), flip);
  }
  static __m256i dot(__m256i w, __m256i x) { return dot_i8_i32(w, x); }
  static int xoff(int c) { return 4 * c; }
};

template <class B, int T>
void tile(const GemmArgs& a, int64_t g, int h, int64_t t0) {
  __m256 acc[T];
  for (int i = 0; i < T; ++i) acc[i] = _mm256_setzero_ps();
  const uint8_t* wg = a.w + static_cast<size_t>(g * a.n_blocks) * a.block_bytes;
  const BlockQ8_0* xr[T];
  for (int i = 0; i < T; ++i) xr[i] = reinterpret_cast<const BlockQ8_0*>(a.x + static_cast<size_t>(t0 + i) * a.x_row);
  for (int64_t b = 0; b < a.n_blocks; ++b) {
    const uint8_t* blk = wg + static_cast<size_t>(b) * a.block_bytes;
    if (h == 0) prefetch_ahead<T>(blk, a.block_bytes);
    const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 16 * h)));
    __m256i w[8];
    B::load(blk, h, w);
    for (int i = 0; i < T; ++i) {
      const BlockQ8_0& xb = xr[i][b];
      __m256i s0 = _mm256_set1_epi32(-B::kBias * a.xsum[(t0 + i) * a.n_blocks + b]);
      __m256i s1 = _mm256_setzero_si256();
      for (int c = 0; c < 8; c += 2) {
        s0 = _mm256_add_epi32(s0, B::dot(w[c], bcast_x(xb, B::xoff(c))));
        s1 = _mm256_add_epi32(s1, B::dot(w[c + 1], bcast_x(xb, B::xoff(c + 1))));
      }
      const __m256i s = _mm256_add_epi32(s0, s1);
      const __m256 dd = _mm256_mul_ps(dw, _mm256_set1_ps(_cvtsh_ss(xb.d)));
      acc[i] = _mm256_fmadd_ps(dd, _mm256_cvtepi32_ps(s), acc[i]);
    }
  }
  for (int i = 0; i < T; ++i) _mm256_storeu_ps(a.y + (t0 + i) * a.y_stride + g * kRepackRows + 8 * h, acc[i]);
}

template <class B>
void gemm(const GemmArgs& a) {
  for (int64_t g = a.g0; g < a.g1; ++g)
    for (int h = 0; h < 2; ++h) {
      int64_t t = 0;
      for (; t + kTile <= a.n_tok; t += kTile) tile<B, kTile>(a, g, h, t);
      switch (a.n_tok - t) {
        case 3: tile<B, 3>(a, g, h, t); break;
        case 2: tile<B, 2>(a, g, h, t); break;
        case 1: tile<B, 1>(a, g, h, t); break;
        default: break;
      }
    }
}

// Q5_1 x Q8_1 (gemm-ref.cpp's order): the Q5_0 weights (unsigned, <= 31) without the offset, at
// 64 (after d[16] and m[16]); per block s = fma(d_w d_x, isum, s), then s = fma(m_w, s_x, s).
template <int T>
void tile_q5_1(const GemmArgs& a, int64_t g, int h, int64_t t0) {
  __m256 acc[T];
  for (int i = 0; i < T; ++i) acc[i] = _mm256_setzero_ps();
  const uint8_t* wg = a.w + static_cast<size_t>(g * a.n_blocks) * a.block_bytes;
  const BlockQ8_1* xr[T];
  for (int i = 0; i < T; ++i) xr[i] = reinterpret_cast<const BlockQ8_1*>(a.x + static_cast<size_t>(t0 + i) * a.x_row);
  const __m256i m = _mm256_set1_epi8(0x0f), b4 = _mm256_set1_epi8(0x10);
  for (int64_t b = 0; b < a.n_blocks; ++b) {
    const uint8_t* blk = wg + static_cast<size_t>(b) * a.block_bytes;
    if (h == 0) prefetch_ahead<T>(blk, a.block_bytes);
    const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 16 * h)));
    const __m256 mw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 32 + 16 * h)));
    const uint8_t* hm = blk + 64 + 256;  // [4][2] u64; half h = bytes 4h..4h+3 of each
    __m256i w[8];
    for (int k = 0; k < 4; ++k) {
      const __m256i v = _mm256_load_si256(reinterpret_cast<const __m256i*>(blk + 64 + 64 * k + 32 * h));
      w[k] = _mm256_or_si256(_mm256_and_si256(v, m), _mm256_and_si256(bytes_from_bits_32(hm + 16 * k + 4 * h), b4));
      w[4 + k] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), m),
                                 _mm256_and_si256(bytes_from_bits_32(hm + 16 * k + 8 + 4 * h), b4));
    }
    for (int i = 0; i < T; ++i) {
      const BlockQ8_1& xb = xr[i][b];
      __m256i s0 = _mm256_setzero_si256(), s1 = _mm256_setzero_si256();
      for (int c = 0; c < 8; c += 2) {
        s0 = _mm256_add_epi32(s0, dot_u8_i32(w[c], bcast_x4(xb.qs + Q4Block::xoff(c))));
        s1 = _mm256_add_epi32(s1, dot_u8_i32(w[c + 1], bcast_x4(xb.qs + Q4Block::xoff(c + 1))));
      }
      const __m256 dd = _mm256_mul_ps(dw, _mm256_set1_ps(_cvtsh_ss(xb.d)));
      acc[i] = _mm256_fmadd_ps(dd, _mm256_cvtepi32_ps(_mm256_add_epi32(s0, s1)), acc[i]);
      acc[i] = _mm256_fmadd_ps(mw, _mm256_set1_ps(_cvtsh_ss(xb.s)), acc[i]);
    }
  }
  for (int i = 0; i < T; ++i) _mm256_storeu_ps(a.y + (t0 + i) * a.y_stride + g * kRepackRows + 8 * h, acc[i]);
}

// Q4_1 x Q8_1 in the Lanes8 order (gemm-ref.cpp): one float accumulator per lane l (chunk l:
// low nibbles of qs[l] for l < 4, high nibbles of qs[l - 4] after; activation bytes 4l..4l+3)
// and row; mins += m_w * s_x; at the end ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7)) +
// mins. One token per tile (9 accumulators).
void tile_q4_1(const GemmArgs& a, int64_t g, int h, int64_t t) {
  __m256 acc[8];
  for (int l = 0; l < 8; ++l) acc[l] = _mm256_setzero_ps();
  __m256 mins = _mm256_setzero_ps();
  const uint8_t* wg = a.w + static_cast<size_t>(g * a.n_blocks) * a.block_bytes;
  const auto* xr = reinterpret_cast<const BlockQ8_1*>(a.x + static_cast<size_t>(t) * a.x_row);
  const __m256i m = _mm256_set1_epi8(0x0f);
  for (int64_t b = 0; b < a.n_blocks; ++b) {
    const uint8_t* blk = wg + static_cast<size_t>(b) * a.block_bytes;
    if (h == 0) prefetch_ahead<1>(blk, a.block_bytes);
    const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 16 * h)));
    const __m256 mw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 32 + 16 * h)));
    const BlockQ8_1& xb = xr[b];
    const __m256 dd = _mm256_mul_ps(dw, _mm256_set1_ps(_cvtsh_ss(xb.d)));
    for (int k = 0; k < 4; ++k) {
      const __m256i v = _mm256_load_si256(reinterpret_cast<const __m256i*>(blk + 64 + 64 * k + 32 * h));
      const __m256i lo = dot_u8_i32(_mm256_and_si256(v, m), bcast_x4(xb.qs + 4 * k));
      const __m256i hi = dot_u8_i32(_mm256_and_si256(_mm256_srli_epi16(v, 4), m), bcast_x4(xb.qs + 16 + 4 * k));
      acc[k] = _mm256_fmadd_ps(dd, _mm256_cvtepi32_ps(lo), acc[k]);
      acc[4 + k] = _mm256_fmadd_ps(dd, _mm256_cvtepi32_ps(hi), acc[4 + k]);
    }
    mins = _mm256_add_ps(mins, _mm256_mul_ps(mw, _mm256_set1_ps(_cvtsh_ss(xb.s))));
  }
  const __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(acc[0], acc[4]), _mm256_add_ps(acc[2], acc[6])),
                                 _mm256_add_ps(_mm256_add_ps(acc[1], acc[5]), _mm256_add_ps(acc[3], acc[7])));
  _mm256_storeu_ps(a.y + t * a.y_stride + g * kRepackRows + 8 * h, _mm256_add_ps(s, mins));
}

}  // namespace

void gemm_q4_1(const GemmArgs& a) {
  for (int64_t g = a.g0; g < a.g1; ++g)
    for (int h = 0; h < 2; ++h)
      for (int64_t t = 0; t < a.n_tok; ++t) tile_q4_1(a, g, h, t);
}

void gemm_q5_1(const GemmArgs& a) {
  for (int64_t g = a.g0; g < a.g1; ++g)
    for (int h = 0; h < 2; ++h) {
      int64_t t = 0;
      for (; t + kTile <= a.n_tok; t += kTile) tile_q5_1<kTile>(a, g, h, t);
      for (; t < a.n_tok; ++t) tile_q5_1<1>(a, g, h, t);
    }
}

void gemm_q4_0(const GemmArgs& a) { gemm<Q4Block>(a); }
void gemm_q5_0(const GemmArgs& a) { gemm<Q5Block>(a); }
void gemm_q8_0(const GemmArgs& a) { gemm<Q8Block>(a); }

}  // namespace minfer::cpu::avx2

#include "backends/cpu/isa-end.h"
