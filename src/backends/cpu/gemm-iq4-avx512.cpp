// AVX-512 (F/BW/DQ/VL + VNNI) GEMM kernels of the IQ4 types over repacked weights (repack.h;
// the scalar specs are gemm_iq4_nl / gemm_iq4_xs in gemm-ref.cpp). One zmm holds the same 4
// bytes of 16 rows; a nibble becomes its table value + 128 (kIq4nlValues -127..113 -> 1..241,
// an unsigned byte) by one vpshufb with the 16-entry table in every 128-bit lane, so vpdpbusd
// multiplies it by 4 broadcast activation bytes (signed) and adds the products to the row's
// exact integer sum, which starts at -128 * (sum of those activation bytes). An AVX-512
// region (isa-begin.h); called only after cpuid says so (kernels-avx512.cpp).
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

// 4 activation bytes broadcast to the 16 dwords.
inline __m512i bcast_x4(const int8_t* q) {
  int32_t v;
  std::memcpy(&v, q, 4);
  return _mm512_set1_epi32(v);
}

// kIq4nlValues + 128 as unsigned bytes, in each 128-bit lane.
struct Iq4TableU8 {
  alignas(64) uint8_t v[64] = {};
  constexpr Iq4TableU8() {
    for (int i = 0; i < 64; ++i) v[i] = static_cast<uint8_t>(kIq4nlValues[i % 16] + 128);
  }
};
constexpr Iq4TableU8 kIq4TableU8;
inline __m512i iq4_table_u8() { return _mm512_load_si512(kIq4TableU8.v); }

// 64 bytes of nibbles (16 rows x 4 bytes) -> the unsigned weights of the low nibbles (lo) and
// of the high nibbles (hi).
inline void unpack_iq4(const uint8_t* q, __m512i table, __m512i& lo, __m512i& hi) {
  const __m512i m4 = _mm512_set1_epi8(0x0f);
  const __m512i v = _mm512_loadu_si512(q);
  lo = _mm512_shuffle_epi8(table, _mm512_and_si512(v, m4));
  hi = _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16(v, 4), m4));
}

// IQ4_NL x Q8_0 (Seq order): per block and row s = fma(d_w * d_x, float(isum), s). The 8
// weight vectors of a block are shared by the T tokens of the tile.
template <int T>
void tile_iq4_nl(const GemmArgs& a, int64_t g, int64_t t0) {
  constexpr size_t kBytes = repack_block_bytes(DType::IQ4_NL);  // a.block_bytes
  __m512 acc[T];
  #pragma GCC unroll 8
  for (int i = 0; i < T; ++i) acc[i] = _mm512_setzero_ps();
  const uint8_t* wg = a.w + static_cast<size_t>(g * a.n_blocks) * kBytes;
  const BlockQ8_0* xr[T];
  #pragma GCC unroll 8
  for (int i = 0; i < T; ++i) xr[i] = reinterpret_cast<const BlockQ8_0*>(a.x + static_cast<size_t>(t0 + i) * a.x_row);
  const __m512i table = iq4_table_u8();
  for (int64_t b = 0; b < a.n_blocks; ++b) {
    const uint8_t* blk = wg + static_cast<size_t>(b) * kBytes;
    prefetch_ahead<T>(blk, kBytes);
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk)));
    __m512i w[8];  // w[k]: elements 4k..4k+3, w[4 + k]: 16+4k..16+4k+3 (k = 0..3)
    #pragma GCC unroll 8
    for (int k = 0; k < 4; ++k) unpack_iq4(blk + 32 + 64 * k, table, w[k], w[4 + k]);
    #pragma GCC unroll 8
    for (int i = 0; i < T; ++i) {
      const BlockQ8_0& xb = xr[i][b];
      // Two independent chains of 4 (the dpbusd latency), added exactly at the end.
      __m512i s0 = _mm512_set1_epi32(-128 * a.xsum[(t0 + i) * a.n_blocks + b]);
      __m512i s1 = _mm512_setzero_si512();
      #pragma GCC unroll 8
      for (int k = 0; k < 4; ++k) {
        s0 = _mm512_dpbusd_epi32(s0, w[k], bcast_x4(xb.qs + 4 * k));
        s1 = _mm512_dpbusd_epi32(s1, w[4 + k], bcast_x4(xb.qs + 16 + 4 * k));
      }
      const __m512 dd = _mm512_mul_ps(dw, _mm512_set1_ps(_cvtsh_ss(xb.d)));
      acc[i] = _mm512_fmadd_ps(dd, _mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1)), acc[i]);
    }
  }
  #pragma GCC unroll 8
  for (int i = 0; i < T; ++i) _mm512_storeu_ps(a.y + (t0 + i) * a.y_stride + g * kRepackRows, acc[i]);
}

// IQ4_XS x Q8_K (the order of vec_dot_iq4_xs): per sub-block s of 32 the exact sum starts at
// -128 * (bsums[2s] + bsums[2s+1]) and takes 8 vpdpbusd; times ls_s (exact), summed over the
// super-block; then s += (d_x * d_w) * float(sum). The tile's tokens share each sub-block's
// unpacked weights.
template <int T>
void tile_iq4_xs(const GemmArgs& a, int64_t g, int64_t t0) {
  constexpr size_t kBytes = repack_block_bytes(DType::IQ4_XS);  // a.block_bytes
  __m512 acc[T];
  #pragma GCC unroll 8
  for (int i = 0; i < T; ++i) acc[i] = _mm512_setzero_ps();
  const uint8_t* wg = a.w + static_cast<size_t>(g * a.n_blocks) * kBytes;
  const BlockQ8_K* xr[T];
  #pragma GCC unroll 8
  for (int i = 0; i < T; ++i) xr[i] = reinterpret_cast<const BlockQ8_K*>(a.x + static_cast<size_t>(t0 + i) * a.x_row);
  const __m512i table = iq4_table_u8();
  for (int64_t b = 0; b < a.n_blocks; ++b) {
    const uint8_t* blk = wg + static_cast<size_t>(b) * kBytes;
    __m512i sum[T];
    #pragma GCC unroll 8
    for (int i = 0; i < T; ++i) sum[i] = _mm512_setzero_si512();
    for (int s = 0; s < 8; ++s) {
      prefetch_part<T, kBytes, 8>(blk, s);
      __m512i w[8];  // w[k]: elements 32s+4k.., w[4 + k]: 32s+16+4k.. (k = 0..3)
      #pragma GCC unroll 8
      for (int k = 0; k < 4; ++k) unpack_iq4(blk + kIQ4XSRepackedQuants + 64 * (4 * s + k), table, w[k], w[4 + k]);
      const __m512i ls = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 32 + 16 * s)));
      #pragma GCC unroll 8
      for (int i = 0; i < T; ++i) {
        const BlockQ8_K& xb = xr[i][b];
        const int8_t* x = xb.qs + 32 * s;
        __m512i s0 = _mm512_set1_epi32(-128 * (xb.bsums[2 * s] + xb.bsums[2 * s + 1]));
        __m512i s1 = _mm512_setzero_si512();
        #pragma GCC unroll 8
        for (int k = 0; k < 4; ++k) {
          s0 = _mm512_dpbusd_epi32(s0, w[k], bcast_x4(x + 4 * k));
          s1 = _mm512_dpbusd_epi32(s1, w[4 + k], bcast_x4(x + 16 + 4 * k));
        }
        sum[i] = _mm512_add_epi32(sum[i], _mm512_mullo_epi32(_mm512_add_epi32(s0, s1), ls));
      }
    }
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk)));
    #pragma GCC unroll 8
    for (int i = 0; i < T; ++i) {
      const __m512 dd = _mm512_mul_ps(_mm512_set1_ps(xr[i][b].d), dw);
      acc[i] = _mm512_add_ps(acc[i], _mm512_mul_ps(dd, _mm512_cvtepi32_ps(sum[i])));
    }
  }
  #pragma GCC unroll 8
  for (int i = 0; i < T; ++i) _mm512_storeu_ps(a.y + (t0 + i) * a.y_stride + g * kRepackRows, acc[i]);
}

}  // namespace

void gemm_iq4_nl(const GemmArgs& a) {
  gemm_tiles<8, 4, 1>(a, [&]<int T>(int64_t g, int64_t t0) { tile_iq4_nl<T>(a, g, t0); });
}

void gemm_iq4_xs(const GemmArgs& a) {
  gemm_tiles<8, 4, 1>(a, [&]<int T>(int64_t g, int64_t t0) { tile_iq4_xs<T>(a, g, t0); });
}

}  // namespace minfer::cpu::avx512

#include "backends/cpu/isa-end.h"
