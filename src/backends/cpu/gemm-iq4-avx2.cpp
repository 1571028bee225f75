// AVX2 GEMM kernels of the IQ4 types over repacked weights (repack.h; the scalar specs are
// gemm_iq4_nl / gemm_iq4_xs in gemm-ref.cpp). Each 16-row group is computed as two 8-row
// halves, one ymm lane per row. A nibble becomes its signed table value (kIq4nlValues) by one
// vpshufb; the 4-byte dot products use the sign trick, maddubs(|w|, sign(x, w)): the table
// + 128 of the AVX-512 kernels would saturate maddubs (2 * 241 * 127 > 32767), while here
// every pair is <= 2 * 127 * 127 (both activation types quantize to -127..127). Then madd
// with 1 (IQ4_NL) or with the row's sub-block scale in both 16-bit halves (IQ4_XS), so the
// integer sums are exact and the float steps those of the reference: bit-identical results.
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

inline __m256i bcast_x4(const int8_t* q) {
  int32_t v;
  std::memcpy(&v, q, 4);
  return _mm256_set1_epi32(v);
}

inline __m256i iq4_table() {
  const __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues));
  return _mm256_set_m128i(t, t);
}

// One 4-byte chunk of 8 rows (32 bytes of nibbles) as signed weights: w[0] low nibbles, w[1]
// high nibbles, a[0..1] their absolute values (shared by the tokens of a tile).
struct Iq4Chunk {
  __m256i w[2], a[2];
  Iq4Chunk(const uint8_t* q, __m256i table) {
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q));
    w[0] = _mm256_shuffle_epi8(table, _mm256_and_si256(v, m4));
    w[1] = _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16(v, 4), m4));
    a[0] = _mm256_abs_epi8(w[0]);
    a[1] = _mm256_abs_epi8(w[1]);
  }
  // Per row: scale * (sum of 4 products of half n's weights with the 4 bytes at x), exact
  // (scale16: the scale in both 16-bit halves of each dword).
  __m256i dot(int n, const int8_t* x, __m256i scale16) const {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(a[n], _mm256_sign_epi8(bcast_x4(x), w[n])), scale16);
  }
};

// IQ4_NL x Q8_0 (Seq order): per block and row s = fma(d_w * d_x, float(isum), s).
template <int T>
void tile_iq4_nl(const GemmArgs& a, int64_t g, int h, int64_t t0) {
  __m256 acc[T];
  for (int i = 0; i < T; ++i) acc[i] = _mm256_setzero_ps();
  const uint8_t* wg = a.w + static_cast<size_t>(g * a.n_blocks) * a.block_bytes;
  const BlockQ8_0* xr[T];
  for (int i = 0; i < T; ++i) xr[i] = reinterpret_cast<const BlockQ8_0*>(a.x + static_cast<size_t>(t0 + i) * a.x_row);
  const __m256i table = iq4_table(), ones = _mm256_set1_epi16(1);
  for (int64_t b = 0; b < a.n_blocks; ++b) {
    const uint8_t* blk = wg + static_cast<size_t>(b) * a.block_bytes;
    if (h == 0) prefetch_ahead<T>(blk, a.block_bytes);
    __m256i isum[T];
    for (int i = 0; i < T; ++i) isum[i] = _mm256_setzero_si256();
    for (int k = 0; k < 4; ++k) {  // chunk k: elements 4k.. (low nibbles) and 16+4k.. (high)
      const Iq4Chunk c(blk + 32 + 64 * k + 32 * h, table);
      for (int i = 0; i < T; ++i) {
        const int8_t* x = xr[i][b].qs;
        isum[i] = _mm256_add_epi32(isum[i], _mm256_add_epi32(c.dot(0, x + 4 * k, ones), c.dot(1, x + 16 + 4 * k, ones)));
      }
    }
    const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 16 * h)));
    for (int i = 0; i < T; ++i) {
      const __m256 dd = _mm256_mul_ps(dw, _mm256_set1_ps(_cvtsh_ss(xr[i][b].d)));
      acc[i] = _mm256_fmadd_ps(dd, _mm256_cvtepi32_ps(isum[i]), acc[i]);
    }
  }
  for (int i = 0; i < T; ++i) _mm256_storeu_ps(a.y + (t0 + i) * a.y_stride + g * kRepackRows + 8 * h, acc[i]);
}

// IQ4_XS x Q8_K (the order of vec_dot_iq4_xs): sum = sum_s ls_s * (T[q] . x over sub-block s),
// exact, then s += (d_x * d_w) * float(sum) per super-block.
template <int T>
void tile_iq4_xs(const GemmArgs& a, int64_t g, int h, int64_t t0) {
  constexpr size_t kBytes = repack_block_bytes(DType::IQ4_XS);  // a.block_bytes
  __m256 acc[T];
  for (int i = 0; i < T; ++i) acc[i] = _mm256_setzero_ps();
  const uint8_t* wg = a.w + static_cast<size_t>(g * a.n_blocks) * kBytes;
  const BlockQ8_K* xr[T];
  for (int i = 0; i < T; ++i) xr[i] = reinterpret_cast<const BlockQ8_K*>(a.x + static_cast<size_t>(t0 + i) * a.x_row);
  const __m256i table = iq4_table();
  for (int64_t b = 0; b < a.n_blocks; ++b) {
    const uint8_t* blk = wg + static_cast<size_t>(b) * kBytes;
    __m256i sum[T];
    for (int i = 0; i < T; ++i) sum[i] = _mm256_setzero_si256();
    for (int s = 0; s < 8; ++s) {
      if (h == 0) prefetch_part<T, kBytes, 8>(blk, s);
      // ls of the 8 rows, each in both 16-bit halves of its dword.
      const __m128i l = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(blk + 32 + 16 * s + 8 * h));
      const __m256i ls16 = _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(l, l));
      for (int k = 0; k < 4; ++k) {
        const Iq4Chunk c(blk + kIQ4XSRepackedQuants + 64 * (4 * s + k) + 32 * h, table);
        for (int i = 0; i < T; ++i) {
          const int8_t* x = xr[i][b].qs + 32 * s;
          sum[i] = _mm256_add_epi32(sum[i], _mm256_add_epi32(c.dot(0, x + 4 * k, ls16), c.dot(1, x + 16 + 4 * k, ls16)));
        }
      }
    }
    const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 16 * h)));
    for (int i = 0; i < T; ++i) {
      const __m256 dd = _mm256_mul_ps(_mm256_set1_ps(xr[i][b].d), dw);
      acc[i] = _mm256_add_ps(acc[i], _mm256_mul_ps(dd, _mm256_cvtepi32_ps(sum[i])));
    }
  }
  for (int i = 0; i < T; ++i) _mm256_storeu_ps(a.y + (t0 + i) * a.y_stride + g * kRepackRows + 8 * h, acc[i]);
}

template <void (*Tile4)(const GemmArgs&, int64_t, int, int64_t), void (*Tile1)(const GemmArgs&, int64_t, int, int64_t)>
void gemm(const GemmArgs& a) {
  for (int64_t g = a.g0; g < a.g1; ++g)
    for (int h = 0; h < 2; ++h) {
      int64_t t = 0;
      for (; t + 4 <= a.n_tok; t += 4) Tile4(a, g, h, t);
      for (; t < a.n_tok; ++t) Tile1(a, g, h, t);
    }
}

}  // namespace

void gemm_iq4_nl(const GemmArgs& a) { gemm<tile_iq4_nl<4>, tile_iq4_nl<1>>(a); }
void gemm_iq4_xs(const GemmArgs& a) { gemm<tile_iq4_xs<4>, tile_iq4_xs<1>>(a); }

}  // namespace minfer::cpu::avx2

#include "backends/cpu/isa-end.h"
