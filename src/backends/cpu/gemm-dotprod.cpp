// SDOT (ARMv8.2 FEAT_DotProd) GEMMs of the 32-element block types over repacked weights
// (repack.h), bit-identical to the scalar specs in gemm-ref.cpp. A 16-byte vector of a 64-byte
// chunk of the repacked layout is one quad of rows (4q .. 4q+3) times 4 bytes, exactly what
// vdotq_laneq_s32 takes against 4 activation bytes picked by lane: chunk c pairs with
// activation bytes 4c .. 4c+3 (the low nibbles of chunks 0-3 with elements 0-15, the high
// nibbles with 16-31), i.e. lane c % 4 of the activation's vector c / 4. The weights are made
// signed before the products (Q4_0: stored as signed nibbles, taken times 16 by a shift or a
// mask and the sums converted with 4 fraction bits; Q5_0: the fifth bit's -16 folded in; Q8_0:
// stored signed; IQ4_NL: kIq4nlValues by one table lookup), so no activation sums are needed. Per block, row and token:
//   Q4_0, Q5_0, Q8_0, IQ4_NL  s = fma(d_w * d_x, float(isum), s)                  (Seq order)
//   Q5_1              s = fma(d_w * d_x, float(isum), s); s = fma(m_w, s_x, s)
//   Q4_1              8 lanes per row: a_l = fma(d_w * d_x, float(lane_l), a_l), mins +=
//                     m_w * s_x; at the end ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7)) + mins
// Tiles: R quads x T tokens (quads()); decode takes the whole group (R = 4: the block read front
// to back, prefetched ahead), prefill one quad x 8 tokens (8 accumulators, 8 weight vectors,
// transient activations: no spills in 32 registers). Per block, quad and token the floor is the
// 8 SDOTs plus a zeroing, a convert, the scale product and the fma of the Seq order (their
// llvm-mca figures: bench/arm-mca.py, docs/cpu-performance.md); Q4_1's Lanes8 order costs 8
// converts and fmas per (quad, token). A dotprod region
// (isa-begin.h).
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "backends/cpu/kernels-neon.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/repack.h"
#include "quant/blocks.h"

#define MINFER_ISA dotprod
#include "backends/cpu/isa-begin.h"
#include "backends/cpu/gemm-dotprod-common.h"
#include "backends/cpu/gemm-tiles.h"
// GCC's scheduling before register allocation hoists every load of a tile's unrolled quads and
// tokens and then spills accumulators (tile<Q4_0, 4 quads, 1 token>: 16 vector spills per
// block, tile<Q8_0, 2, 4>: 35); without it the tiles keep their accumulators in registers.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-schedule-insns")
#endif

namespace minfer::cpu::dotprod {
namespace {

// The weights of quad q of one block: w[c] pairs with activation bytes 4c .. 4c+3.
struct Q4_0W {
  static constexpr DType kType = DType::Q4_0;
  static constexpr size_t kQs = 32;  // after d[16]
  static constexpr int kFrac = 4;    // weights x 16 (nibbles_x16)
  static void load(const uint8_t* blk, int q, int8x16_t w[8]) { nibbles_x16(blk + kQs + 16 * q, w); }
};

struct Q5_0W {
  static constexpr DType kType = DType::Q5_0;
  static constexpr size_t kQs = 32;
  static void load(const uint8_t* blk, int q, int8x16_t w[8]) { nibbles5(blk + kQs, q, w, true); }
};

struct Q5_1W {
  static constexpr DType kType = DType::Q5_1;
  static constexpr size_t kQs = 64;  // after d[16] and m[16]
  static void load(const uint8_t* blk, int q, int8x16_t w[8]) { nibbles5(blk + kQs, q, w, false); }
};

struct Q8_0W {
  static constexpr DType kType = DType::Q8_0;
  static constexpr size_t kQs = 32;
  static void load(const uint8_t* blk, int q, int8x16_t w[8]) {
    #pragma GCC unroll 16
    for (int c = 0; c < 8; ++c) w[c] = vld1q_s8(reinterpret_cast<const int8_t*>(blk + kQs + 64 * c + 16 * q));
  }
};

struct IQ4_NLW {
  static constexpr DType kType = DType::IQ4_NL;
  static constexpr size_t kQs = 32;
  static void load(const uint8_t* blk, int q, int8x16_t w[8]) {
    const int8x16_t table = vld1q_s8(kIq4nlValues);
    const uint8x16_t m4 = vdupq_n_u8(0x0f);
    #pragma GCC unroll 16
    for (int k = 0; k < 4; ++k) {
      const uint8x16_t v = vld1q_u8(blk + kQs + 64 * k + 16 * q);
      w[k] = vqtbl1q_s8(table, vandq_u8(v, m4));
      w[4 + k] = vqtbl1q_s8(table, vshrq_n_u8(v, 4));
    }
  }
};

// Quads q0 .. q0 + R - 1 of group g for tokens t0 .. t0 + T - 1 (Seq order; Q5_1 with the
// mins' fma after each block's). X: the activation block type (Q8_0, or Q8_1 for Q5_1).
// kXd: the tokens' block scales from a.xd_tiles (whole 16-token tiles of Q8_0 activations,
// as f32: one vector load for 4 tokens instead of a load and a conversion each).
template <class B, class X, int R, int T, bool kXd = false>
[[gnu::noinline]] void tile(const GemmArgs& a, int64_t g, int q0, int64_t t0) {
  constexpr bool kMins = B::kType == DType::Q5_1;
  constexpr size_t kBytes = repack_block_bytes(B::kType);  // a.block_bytes
  float32x4_t acc[R][T];
  #pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    #pragma GCC unroll 16
    for (int i = 0; i < T; ++i) acc[r][i] = vdupq_n_f32(0.0f);
  }
  const uint8_t* wg = a.w + static_cast<size_t>(g * a.n_blocks) * kBytes;
  const X* xr[T];
  #pragma GCC unroll 16
  for (int i = 0; i < T; ++i) xr[i] = reinterpret_cast<const X*>(a.x + static_cast<size_t>(t0 + i) * a.x_row);
  // xd[16 b + i]: token t0 + i's scale of block b
  const float* xd = kXd ? a.xd_tiles + (t0 / kGemmScaleTokens) * a.n_blocks * kGemmScaleTokens + t0 % kGemmScaleTokens : nullptr;
  for (int64_t b = 0; b < a.n_blocks; ++b) {
    const uint8_t* blk = wg + static_cast<size_t>(b) * kBytes;
    if (R == 4) prefetch_ahead<T>(blk, kBytes);
    #pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const int q = q0 + r;
      int8x16_t w[8];
      B::load(blk, q, w);
      const float32x4_t dw = load_f16x4(blk + 8 * q), mw = kMins ? load_f16x4(blk + 32 + 8 * q) : dw;
      static_for<0, T>([&]<int i>() {
        const int32x4_t isum = dot8(w, vld1q_s8(xr[i][b].qs), vld1q_s8(xr[i][b].qs + 16));
        // The token's scale read here, not kept for the quads: 8 tokens' worth of scalars
        // in vector registers made GCC spill accumulators.
        float32x4_t dd;
        if constexpr (kXd) dd = vmulq_laneq_f32(dw, vld1q_f32(xd + kGemmScaleTokens * b + i / 4 * 4), i % 4);
        else dd = vmulq_n_f32(dw, f16_f32(xr[i][b].d));
        acc[r][i] = vfmaq_f32(acc[r][i], dd, isum_f32<frac<B>()>(isum));
        if constexpr (kMins) acc[r][i] = vfmaq_n_f32(acc[r][i], mw, f16_f32(xr[i][b].s));
      });
    }
  }
  #pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    #pragma GCC unroll 16
    for (int i = 0; i < T; ++i) vst1q_f32(a.y + (t0 + i) * a.y_stride + g * kRepackRows + 4 * (q0 + r), acc[r][i]);
  }
}

// Quads per tile: all 4 for decode; fewer as the tokens' accumulators and activations take
// registers. Q5_0 / Q5_1 spend more on the weights (the fifth bits: a table lookup and a test
// per vector) and spill with two quads of several tokens: one quad per tile beyond decode.
template <class B>
constexpr bool kFifthBit = B::kType == DType::Q5_0 || B::kType == DType::Q5_1;

template <class B, class X, int T, bool kXd = false>
void quads(const GemmArgs& a, int64_t g, int64_t t) {
  constexpr int R = T == 1 ? 4 : kFifthBit<B> ? 1 : T <= 2 ? 4 : T <= 4 ? 2 : 1;
  for (int q = 0; q < 4; q += R) tile<B, X, R, T, kXd>(a, g, q, t);
}

template <class B, class X = BlockQ8_0>
void gemm(const GemmArgs& a) {
  for (int64_t g = a.g0; g < a.g1; ++g) {
    int64_t t = 0;
    for (; t + 8 <= a.n_tok; t += 8) {
      if (std::is_same_v<X, BlockQ8_0> && a.xd_tiles && (t / kGemmScaleTokens + 1) * kGemmScaleTokens <= a.n_tok)
        quads<B, X, 8, std::is_same_v<X, BlockQ8_0>>(a, g, t);
      else
        quads<B, X, 8>(a, g, t);
    }
    if (t + 4 <= a.n_tok) quads<B, X, 4>(a, g, t), t += 4;
    if (t + 2 <= a.n_tok) quads<B, X, 2>(a, g, t), t += 2;
    if (t < a.n_tok) quads<B, X, 1>(a, g, t);
  }
}

// Q4_1 x Q8_1 in the Lanes8 order, quads q0 .. q0 + R - 1, one token: 8 float accumulators
// per quad (one per chunk, each SDOT lane a chunk's 4-product sum) and the mins.
template <int R>
void tile_q4_1(const GemmArgs& a, int64_t g, int q0, int64_t t) {
  constexpr size_t kBytes = repack_block_bytes(DType::Q4_1);  // a.block_bytes
  float32x4_t acc[R][8], mins[R];
  #pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    #pragma GCC unroll 16
    for (int l = 0; l < 8; ++l) acc[r][l] = vdupq_n_f32(0.0f);
    mins[r] = vdupq_n_f32(0.0f);
  }
  const uint8_t* wg = a.w + static_cast<size_t>(g * a.n_blocks) * kBytes;
  const auto* xr = reinterpret_cast<const BlockQ8_1*>(a.x + static_cast<size_t>(t) * a.x_row);
  const uint8x16_t m4 = vdupq_n_u8(0x0f);
  for (int64_t b = 0; b < a.n_blocks; ++b) {
    const uint8_t* blk = wg + static_cast<size_t>(b) * kBytes;
    if (q0 == 0) prefetch_ahead<1>(blk, kBytes);
    const BlockQ8_1& xb = xr[b];
    const float dx = f16_f32(xb.d), sx = f16_f32(xb.s);
    const int8x16_t x0 = vld1q_s8(xb.qs), x1 = vld1q_s8(xb.qs + 16);
    #pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const int q = q0 + r;
      const float32x4_t dd = vmulq_n_f32(load_f16x4(blk + 8 * q), dx);
      static_for<0, 4>([&]<int k>() {
        const uint8x16_t v = vld1q_u8(blk + 64 + 64 * k + 16 * q);
        const int8x16_t lo = vreinterpretq_s8_u8(vandq_u8(v, m4)), hi = vreinterpretq_s8_u8(vshrq_n_u8(v, 4));
        acc[r][k] = vfmaq_f32(acc[r][k], dd, vcvtq_f32_s32(vdotq_laneq_s32(vdupq_n_s32(0), lo, x0, k)));
        acc[r][4 + k] = vfmaq_f32(acc[r][4 + k], dd, vcvtq_f32_s32(vdotq_laneq_s32(vdupq_n_s32(0), hi, x1, k)));
      });
      mins[r] = vaddq_f32(mins[r], vmulq_n_f32(load_f16x4(blk + 32 + 8 * q), sx));
    }
  }
  #pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    const float32x4_t* c = acc[r];
    const float32x4_t s = vaddq_f32(vaddq_f32(vaddq_f32(c[0], c[4]), vaddq_f32(c[2], c[6])),
                                    vaddq_f32(vaddq_f32(c[1], c[5]), vaddq_f32(c[3], c[7])));
    vst1q_f32(a.y + t * a.y_stride + g * kRepackRows + 4 * (q0 + r), vaddq_f32(s, mins[r]));
  }
}

}  // namespace

void gemm_q4_0(const GemmArgs& a) { gemm<Q4_0W>(a); }
void gemm_q5_0(const GemmArgs& a) { gemm<Q5_0W>(a); }
void gemm_q8_0(const GemmArgs& a) { gemm<Q8_0W>(a); }
void gemm_q5_1(const GemmArgs& a) { gemm<Q5_1W, BlockQ8_1>(a); }
void gemm_iq4_nl(const GemmArgs& a) { gemm<IQ4_NLW>(a); }

// Two quads (9 accumulators each) per pass over the group.
void gemm_q4_1(const GemmArgs& a) {
  for (int64_t g = a.g0; g < a.g1; ++g)
    for (int q = 0; q < 4; q += 2)
      for (int64_t t = 0; t < a.n_tok; ++t) tile_q4_1<2>(a, g, q, t);
}

}  // namespace minfer::cpu::dotprod

#include "backends/cpu/isa-end.h"
