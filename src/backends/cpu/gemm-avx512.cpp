// AVX-512 (F/BW/DQ/VL + VNNI) GEMM kernels over repacked weights (repack.h): one zmm holds 16
// rows; vpdpbusd multiplies 4 weight bytes (unsigned) by 4 broadcast activation bytes (signed)
// per row and adds them to the row's exact integer block sum; the sum starts at
// -offset * sum(x block) for the unsigned encodings (Q4_0: 8, Q5_0: 16, Q8_0: 128). Then per
// block and row: s = fma(d_w * d_x, float(isum), s), the Seq order of vec-dot-ref.cpp.
// An AVX-512 region (isa-begin.h); called only after cpuid says so (kernels-avx512.cpp).
#include <immintrin.h>

#include <cstring>

#include "backends/cpu/kernels.h"
#include "backends/cpu/repack.h"
#include "quant/blocks.h"

#define MINFER_ISA avx512
#include "backends/cpu/isa-begin.h"
#include "backends/cpu/avx512-common.h"
#include "backends/cpu/gemm-tiles.h"

namespace minfer::cpu::avx512 {
namespace {

constexpr int kTile = 8;  // tokens per register tile

// 4 activation bytes broadcast to the 16 dwords.
inline __m512i bcast_x4(const int8_t* q) {
  int32_t v;
  std::memcpy(&v, q, 4);
  return _mm512_set1_epi32(v);
}

inline __m512i bcast_x(const BlockQ8_0& xb, int byte) { return bcast_x4(xb.qs + byte); }

// acc + vpdpbusd(w, the 4 activation bytes at q broadcast), the broadcast embedded in the
// instruction's memory operand ({1to16}): one fused uop instead of a vpbroadcastd and the
// vpdpbusd (GCC does not fold the broadcast into vpdpbusd itself). A decode tile streams its
// weights faster the fewer uops it spends per byte: the Q4_0 tile's 8 per block are ~15%.
inline __m512i dpbusd_x4(__m512i acc, __m512i w, const int8_t* q) {
  using Word = int32_t __attribute__((may_alias, aligned(1)));
  asm("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*reinterpret_cast<const Word*>(q)));
  return acc;
}

// The 8 weight vectors of one block: w[c] pairs with activation dword xoff(c). kHigh16: w[4..7]
// hold the high nibbles in place, 16 times their value (one AND each, no shift), and the tile
// divides their exact integer sum by 16 (tile below).
struct Q4Block {
  static constexpr int kBias = 8;
  static constexpr size_t kBytes = repack_block_bytes(DType::Q4_0);
  static constexpr bool kHigh16 = true;
  static void load(const uint8_t* blk, __m512i w[8]) {
    const __m512i lo = _mm512_set1_epi8(0x0f), hi = _mm512_set1_epi8(static_cast<char>(0xf0));
    for (int k = 0; k < 4; ++k) {
      const __m512i v = _mm512_loadu_si512(blk + 32 + 64 * k);
      w[k] = _mm512_and_si512(v, lo);
      w[4 + k] = _mm512_and_si512(v, hi);
    }
  }
  static int xoff(int c) { return c < 4 ? 4 * c : 16 + 4 * (c - 4); }
};

struct Q5Block {
  static constexpr int kBias = 16;
  static constexpr size_t kBytes = repack_block_bytes(DType::Q5_0);
  static constexpr bool kHigh16 = false;
  static void load(const uint8_t* blk, __m512i w[8]) {
    const __m512i m = _mm512_set1_epi8(0x0f), b4 = _mm512_set1_epi8(0x10);
    uint64_t hm[8];
    std::memcpy(hm, blk + 32 + 256, sizeof hm);
    // The fifth bit by one masked add per vector (the mask loaded straight from the block):
    // decode of Qwen2.5-0.5B's Q5_0 FFN ran at 72% of the read bandwidth with movm + and + or.
    for (int k = 0; k < 4; ++k) {
      const __m512i v = _mm512_loadu_si512(blk + 32 + 64 * k);
      w[k] = _mm512_mask_add_epi8(_mm512_and_si512(v, m), hm[2 * k], _mm512_and_si512(v, m), b4);
      const __m512i h = _mm512_and_si512(_mm512_srli_epi16(v, 4), m);
      w[4 + k] = _mm512_mask_add_epi8(h, hm[2 * k + 1], h, b4);
    }
  }
  static int xoff(int c) { return c < 4 ? 4 * c : 16 + 4 * (c - 4); }
};

struct Q8Block {
  static constexpr int kBias = 128;
  static constexpr size_t kBytes = repack_block_bytes(DType::Q8_0);
  static constexpr bool kHigh16 = false;
  static void load(const uint8_t* blk, __m512i w[8]) {
    for (int k = 0; k < 8; ++k) w[k] = _mm512_loadu_si512(blk + 32 + 64 * k);
  }
  static int xoff(int c) { return 4 * c; }
};

template <class B, int T>
void tile(const GemmArgs& a, int64_t g, int64_t t0) {
  __m512 acc[T];
  for (int i = 0; i < T; ++i) acc[i] = _mm512_setzero_ps();
  const uint8_t* wg = a.w + static_cast<size_t>(g * a.n_blocks) * B::kBytes;
  const BlockQ8_0* xr[T];
  for (int i = 0; i < T; ++i) xr[i] = reinterpret_cast<const BlockQ8_0*>(a.x + static_cast<size_t>(t0 + i) * a.x_row);
  for (int64_t b = 0; b < a.n_blocks; ++b) {
    const uint8_t* blk = wg + static_cast<size_t>(b) * B::kBytes;
    prefetch_ahead<T>(blk, B::kBytes);
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk)));
    __m512i w[8];
    B::load(blk, w);
    for (int i = 0; i < T; ++i) {
      const BlockQ8_0& xb = xr[i][b];
      // Two independent chains of 4 (the dpbusd latency), added exactly at the end.
      __m512i s0 = _mm512_set1_epi32(-B::kBias * a.xsum[(t0 + i) * a.n_blocks + b]);
      __m512i s1 = _mm512_setzero_si512();
      __m512i s;
      if constexpr (B::kHigh16) {  // s1 = 16 x the high nibbles' sum, exactly
        for (int c = 0; c < 4; ++c) {
          s0 = dpbusd_x4(s0, w[c], xb.qs + B::xoff(c));
          s1 = dpbusd_x4(s1, w[c + 4], xb.qs + B::xoff(c + 4));
        }
        s = _mm512_add_epi32(s0, _mm512_srai_epi32(s1, 4));
      } else {
        for (int c = 0; c < 8; c += 2) {
          s0 = _mm512_dpbusd_epi32(s0, w[c], bcast_x(xb, B::xoff(c)));
          s1 = _mm512_dpbusd_epi32(s1, w[c + 1], bcast_x(xb, B::xoff(c + 1)));
        }
        s = _mm512_add_epi32(s0, s1);
      }
      const __m512 dd = _mm512_mul_ps(dw, _mm512_set1_ps(_cvtsh_ss(xb.d)));
      acc[i] = _mm512_fmadd_ps(dd, _mm512_cvtepi32_ps(s), acc[i]);
    }
  }
  for (int i = 0; i < T; ++i) _mm512_storeu_ps(a.y + (t0 + i) * a.y_stride + g * kRepackRows, acc[i]);
}

template <class B>
void gemm(const GemmArgs& a) {
  for (int64_t g = a.g0; g < a.g1; ++g) {
    int64_t t = 0;
    for (; t + kTile <= a.n_tok; t += kTile) tile<B, kTile>(a, g, t);
    switch (a.n_tok - t) {
      case 7: tile<B, 7>(a, g, t); break;
      case 6: tile<B, 6>(a, g, t); break;
      case 5: tile<B, 5>(a, g, t); break;
      case 4: tile<B, 4>(a, g, t); break;
      case 3: tile<B, 3>(a, g, t); break;
      case 2: tile<B, 2>(a, g, t); break;
      case 1: tile<B, 1>(a, g, t); break;
      default: break;
    }
  }
}

// Q4_K x Q8_K (gemm-ref.cpp's order): per 4-byte chunk c of sub-block pair p, the low nibbles
// go with sub-block 2p, the high with 2p + 1.
template <int T>
void tile_q4_k(const GemmArgs& a, int64_t g, int64_t t0) {
  constexpr size_t kBytes = repack_block_bytes(DType::Q4_K);  // a.block_bytes
  __m512 acc[T];
  for (int i = 0; i < T; ++i) acc[i] = _mm512_setzero_ps();
  const uint8_t* wg = a.w + static_cast<size_t>(g * a.n_blocks) * kBytes;
  const BlockQ8_K* xr[T];
  for (int i = 0; i < T; ++i) xr[i] = reinterpret_cast<const BlockQ8_K*>(a.x + static_cast<size_t>(t0 + i) * a.x_row);
  const __m512i m4 = _mm512_set1_epi8(0x0f), m4h = _mm512_set1_epi8(static_cast<char>(0xf0));
  for (int64_t b = 0; b < a.n_blocks; ++b) {
    const uint8_t* blk = wg + static_cast<size_t>(b) * kBytes;
    __m512i sum_q[T];
    for (int i = 0; i < T; ++i) sum_q[i] = _mm512_setzero_si512();
    for (int p = 0; p < 4; ++p) {
      prefetch_part<T, kBytes, 4>(blk, p);
      // hi: the high nibbles in place, 16 times their value (one AND, no shift); their exact
      // sum is divided by 16 before the scale.
      __m512i lo[8], hi[8];
      for (int c = 0; c < 8; ++c) {
        const __m512i v = _mm512_loadu_si512(blk + 320 + 64 * (8 * p + c));
        lo[c] = _mm512_and_si512(v, m4);
        hi[c] = _mm512_and_si512(v, m4h);
      }
      const __m512i sc_lo = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 64 + 16 * (2 * p))));
      const __m512i sc_hi = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 64 + 16 * (2 * p + 1))));
      for (int i = 0; i < T; ++i) {
        const int8_t* xq = xr[i][b].qs;
        __m512i s_lo = _mm512_setzero_si512(), s_hi = _mm512_setzero_si512();
        for (int c = 0; c < 8; ++c) {
          s_lo = dpbusd_x4(s_lo, lo[c], xq + 32 * (2 * p) + 4 * c);
          s_hi = dpbusd_x4(s_hi, hi[c], xq + 32 * (2 * p + 1) + 4 * c);
        }
        sum_q[i] = _mm512_add_epi32(sum_q[i], _mm512_add_epi32(_mm512_mullo_epi32(s_lo, sc_lo),
                                                               _mm512_mullo_epi32(_mm512_srai_epi32(s_hi, 4), sc_hi)));
      }
    }
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk)));
    const __m512 dmin = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 32)));
    for (int i = 0; i < T; ++i) {
      const BlockQ8_K& xb = xr[i][b];
      __m512i sum_m = _mm512_setzero_si512();
      for (int j = 0; j < 8; ++j) {
        const __m512i mj = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 192 + 16 * j)));
        sum_m = _mm512_add_epi32(sum_m, _mm512_mullo_epi32(mj, _mm512_set1_epi32(xb.bsums[2 * j] + xb.bsums[2 * j + 1])));
      }
      const __m512 f = _mm512_sub_ps(_mm512_mul_ps(dw, _mm512_cvtepi32_ps(sum_q[i])), _mm512_mul_ps(dmin, _mm512_cvtepi32_ps(sum_m)));
      acc[i] = _mm512_add_ps(acc[i], _mm512_mul_ps(_mm512_set1_ps(xb.d), f));
    }
  }
  for (int i = 0; i < T; ++i) _mm512_storeu_ps(a.y + (t0 + i) * a.y_stride + g * kRepackRows, acc[i]);
}

// Q6_K x Q8_K (gemm-ref.cpp's order): per group j of 16 elements, the exact sum starts at
// -32 * bsum_j and takes 4 vpdpbusd of unsigned 6-bit weights, one chain per token (the
// tokens of the tile are the independent chains).
template <int T>
void tile_q6_k(const GemmArgs& a, int64_t g, int64_t t0) {
  constexpr size_t kBytes = repack_block_bytes(DType::Q6_K);  // a.block_bytes
  __m512 acc[T];
  for (int i = 0; i < T; ++i) acc[i] = _mm512_setzero_ps();
  const uint8_t* wg = a.w + static_cast<size_t>(g * a.n_blocks) * kBytes;
  const BlockQ8_K* xr[T];
  for (int i = 0; i < T; ++i) xr[i] = reinterpret_cast<const BlockQ8_K*>(a.x + static_cast<size_t>(t0 + i) * a.x_row);
  for (int64_t b = 0; b < a.n_blocks; ++b) {
    const uint8_t* blk = wg + static_cast<size_t>(b) * kBytes;
    __m512i sum[T];
    for (int i = 0; i < T; ++i) sum[i] = _mm512_setzero_si512();
    for (int j = 0; j < 16; ++j) {
      prefetch_part<T, kBytes, 16>(blk, j);
      __m512i u[4];
      unpack_q6_k(blk + kQ6KRepackedQuants + 192 * j, u);
      const __m512i sc = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 32 + 16 * j)));
      for (int i = 0; i < T; ++i) {
        const BlockQ8_K& xb = xr[i][b];
        __m512i s = _mm512_set1_epi32(-32 * xb.bsums[j]);
        for (int c = 0; c < 4; ++c) s = dpbusd_x4(s, u[c], xb.qs + 16 * j + 4 * c);
        sum[i] = _mm512_add_epi32(sum[i], _mm512_mullo_epi32(s, sc));
      }
    }
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk)));
    for (int i = 0; i < T; ++i) {
      const __m512 dd = _mm512_mul_ps(_mm512_set1_ps(xr[i][b].d), dw);
      acc[i] = _mm512_add_ps(acc[i], _mm512_mul_ps(dd, _mm512_cvtepi32_ps(sum[i])));
    }
  }
  for (int i = 0; i < T; ++i) _mm512_storeu_ps(a.y + (t0 + i) * a.y_stride + g * kRepackRows, acc[i]);
}

// Q5_1 x Q8_1: the Q5_0 weights without the offset, then the min term per block.
template <int T>
void tile_q5_1(const GemmArgs& a, int64_t g, int64_t t0) {
  constexpr size_t kBytes = repack_block_bytes(DType::Q5_1);  // a.block_bytes
  __m512 acc[T];
  for (int i = 0; i < T; ++i) acc[i] = _mm512_setzero_ps();
  const uint8_t* wg = a.w + static_cast<size_t>(g * a.n_blocks) * kBytes;
  const BlockQ8_1* xr[T];
  for (int i = 0; i < T; ++i) xr[i] = reinterpret_cast<const BlockQ8_1*>(a.x + static_cast<size_t>(t0 + i) * a.x_row);
  const __m512i m = _mm512_set1_epi8(0x0f), b4 = _mm512_set1_epi8(0x10);
  for (int64_t b = 0; b < a.n_blocks; ++b) {
    const uint8_t* blk = wg + static_cast<size_t>(b) * kBytes;
    prefetch_ahead<T>(blk, kBytes);
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk)));
    const __m512 mw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 32)));
    uint64_t hm[8];
    std::memcpy(hm, blk + 64 + 256, sizeof hm);
    __m512i w[8];
    for (int k = 0; k < 4; ++k) {
      const __m512i v = _mm512_loadu_si512(blk + 64 + 64 * k);
      w[k] = _mm512_or_si512(_mm512_and_si512(v, m), _mm512_and_si512(_mm512_movm_epi8(hm[2 * k]), b4));
      w[4 + k] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(v, 4), m), _mm512_and_si512(_mm512_movm_epi8(hm[2 * k + 1]), b4));
    }
    for (int i = 0; i < T; ++i) {
      const BlockQ8_1& xb = xr[i][b];
      __m512i s0 = _mm512_setzero_si512(), s1 = _mm512_setzero_si512();
      for (int c = 0; c < 8; c += 2) {
        int32_t x0, x1;
        std::memcpy(&x0, xb.qs + (c < 4 ? 4 * c : 16 + 4 * (c - 4)), 4);
        std::memcpy(&x1, xb.qs + (c + 1 < 4 ? 4 * (c + 1) : 16 + 4 * (c - 3)), 4);
        s0 = _mm512_dpbusd_epi32(s0, w[c], _mm512_set1_epi32(x0));
        s1 = _mm512_dpbusd_epi32(s1, w[c + 1], _mm512_set1_epi32(x1));
      }
      const __m512 dd = _mm512_mul_ps(dw, _mm512_set1_ps(_cvtsh_ss(xb.d)));
      acc[i] = _mm512_fmadd_ps(dd, _mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1)), acc[i]);
      acc[i] = _mm512_fmadd_ps(mw, _mm512_set1_ps(_cvtsh_ss(xb.s)), acc[i]);
    }
  }
  for (int i = 0; i < T; ++i) _mm512_storeu_ps(a.y + (t0 + i) * a.y_stride + g * kRepackRows, acc[i]);
}

// Q4_1 x Q8_1 in the Lanes8 order (gemm-ref.cpp): one float accumulator per lane and row, so
// chunk c's vpdpbusd result is lane c's integer sum for 16 rows. A block is taken a lane at a
// time (one unpacked weight vector live, not eight) and the mins in a second pass over the
// group's blocks, so that 3 tokens' 24 accumulators stay in registers (with all eight weight
// vectors and the mins live, 2 tokens spilled to the stack).
template <int T>
void tile_q4_1(const GemmArgs& a, int64_t g, int64_t t0) {
  constexpr size_t kBytes = repack_block_bytes(DType::Q4_1);  // a.block_bytes
  __m512 acc[T][8];
  for (int i = 0; i < T; ++i)
    for (int l = 0; l < 8; ++l) acc[i][l] = _mm512_setzero_ps();
  const uint8_t* wg = a.w + static_cast<size_t>(g * a.n_blocks) * kBytes;
  const BlockQ8_1* xr[T];
  for (int i = 0; i < T; ++i) xr[i] = reinterpret_cast<const BlockQ8_1*>(a.x + static_cast<size_t>(t0 + i) * a.x_row);
  const __m512i m = _mm512_set1_epi8(0x0f);
  for (int64_t b = 0; b < a.n_blocks; ++b) {
    const uint8_t* blk = wg + static_cast<size_t>(b) * kBytes;
    prefetch_ahead<T>(blk, kBytes);
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk)));
    __m512 dd[T];
    for (int i = 0; i < T; ++i) dd[i] = _mm512_mul_ps(dw, _mm512_set1_ps(_cvtsh_ss(xr[i][b].d)));
    #pragma GCC unroll 8
    for (int l = 0; l < 8; ++l) {
      const __m512i v = _mm512_loadu_si512(blk + 64 + 64 * (l % 4));
      const __m512i w = _mm512_and_si512(l < 4 ? v : _mm512_srli_epi16(v, 4), m);
      for (int i = 0; i < T; ++i) {
        int32_t xv;
        std::memcpy(&xv, xr[i][b].qs + 4 * l, 4);
        const __m512i lane = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w, _mm512_set1_epi32(xv));
        acc[i][l] = _mm512_fmadd_ps(dd[i], _mm512_cvtepi32_ps(lane), acc[i][l]);
      }
    }
  }
  __m512 mins[T];  // m_w * s_x summed in block order, each product rounded
  for (int i = 0; i < T; ++i) mins[i] = _mm512_setzero_ps();
  for (int64_t b = 0; b < a.n_blocks; ++b) {
    const uint8_t* blk = wg + static_cast<size_t>(b) * kBytes;
    const __m512 mw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 32)));
    for (int i = 0; i < T; ++i) mins[i] = _mm512_add_ps(mins[i], _mm512_mul_ps(mw, _mm512_set1_ps(_cvtsh_ss(xr[i][b].s))));
  }
  for (int i = 0; i < T; ++i) {
    const __m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(acc[i][0], acc[i][4]), _mm512_add_ps(acc[i][2], acc[i][6])),
                                   _mm512_add_ps(_mm512_add_ps(acc[i][1], acc[i][5]), _mm512_add_ps(acc[i][3], acc[i][7])));
    _mm512_storeu_ps(a.y + (t0 + i) * a.y_stride + g * kRepackRows, _mm512_add_ps(s, mins[i]));
  }
}

}  // namespace

void gemm_q4_1(const GemmArgs& a) {
  gemm_tiles<3, 2, 1>(a, [&]<int T>(int64_t g, int64_t t0) { tile_q4_1<T>(a, g, t0); });
}

void gemm_q5_1(const GemmArgs& a) {
  gemm_tiles<8, 4, 1>(a, [&]<int T>(int64_t g, int64_t t0) { tile_q5_1<T>(a, g, t0); });
}

// Tiles of 8 tokens share each sub-block's unpacking (unpack_q6_k) among more dot products.
void gemm_q6_k(const GemmArgs& a) {
  gemm_tiles<8, 4, 1>(a, [&]<int T>(int64_t g, int64_t t0) { tile_q6_k<T>(a, g, t0); });
}

void gemm_q4_k(const GemmArgs& a) {
  gemm_tiles<4, 1>(a, [&]<int T>(int64_t g, int64_t t0) { tile_q4_k<T>(a, g, t0); });
}

void gemm_q4_0(const GemmArgs& a) { gemm<Q4Block>(a); }
void gemm_q5_0(const GemmArgs& a) { gemm<Q5Block>(a); }
void gemm_q8_0(const GemmArgs& a) { gemm<Q8Block>(a); }

}  // namespace minfer::cpu::avx512

#include "backends/cpu/isa-end.h"
