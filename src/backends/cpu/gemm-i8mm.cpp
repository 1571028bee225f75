// SMMLA (ARMv8.6 FEAT_I8MM) GEMMs of Q4_0, Q5_0, Q8_0 and IQ4_NL over the repacked weights of repack.h (the
// layout of the SDOT kernels, gemm-dotprod.cpp), bit-identical to the scalar specs in
// gemm-ref.cpp. vmmlaq_s32(acc, x, w) multiplies a 2 x 8 matrix of int8 by the transpose of
// another: with x = two tokens' activation bytes 8k .. 8k+7 and w = two rows' weight bytes of
// the same elements, acc gains [t0 r0, t0 r1, t1 r0, t1 r1], 32 products in one instruction
// (SDOT: 16). A row pair's operand is two 4-byte chunks of the repacked layout zipped:
// vzip1q_s32 / vzip2q_s32 of chunks c, c + 1 (each 4 rows x 4 bytes) give rows 0-1 / 2-3 x
// the 8 bytes of elements 4c .. 4c+7. The float steps are the Seq order's, one per block in
// block order, in the same [t0 r, t0 r', t1 r, t1 r'] lanes:
//   s = fma(d_w * d_x, float(isum), s)   with d_w * d_x = [d_r, d_r', d_r, d_r'] * [d_t0, d_t0, d_t1, d_t1]
// and the lanes are put back in token order once, at the store.
// A tile is a group x 2P tokens. The activations of a chunk of blocks are interleaved into
// operands once (XChunk) and used by the group's four quads in turn, the quad's 2P float
// accumulators held in registers over the chunk (kept in memory between chunks). A single
// token (decode, or the last of an odd batch) goes to the SDOT kernel: half of an SMMLA would
// be wasted on it. llvm-mca figures beside the SDOT tiles': bench/arm-mca.py
// (docs/cpu-performance.md). An i8mm region (isa-begin.h).
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "backends/cpu/kernels-neon.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/repack.h"
#include "quant/blocks.h"

#define MINFER_ISA i8mm
#include "backends/cpu/isa-begin.h"
#include "backends/cpu/gemm-dotprod-common.h"
// GCC's scheduling before register allocation hoists the loads of the unrolled token pairs and
// spills accumulators (as in gemm-dotprod.cpp).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-schedule-insns")
#endif

namespace minfer::cpu::i8mm {
namespace {

constexpr int kChunk = 16;  // blocks of activations interleaved at a time (P = 4: 5 KiB)

// The activations of token pairs t0 + 2p, t0 + 2p + 1 (p < P) for blocks b0 .. b0 + n - 1.
template <int P>
struct XChunk {
  int8x16_t op[kChunk][P][4];  // bytes 8k .. 8k+7 of the pair's first token | of its second
  float32x4_t d[kChunk][P];    // [d_t0, d_t0, d_t1, d_t1]
  void fill(const BlockQ8_0* const xr[2 * P], int64_t b0, int n) {
    for (int bi = 0; bi < n; ++bi) {
      #pragma GCC unroll 4
      for (int p = 0; p < P; ++p) {
        const BlockQ8_0& x0 = xr[2 * p][b0 + bi];
        const BlockQ8_0& x1 = xr[2 * p + 1][b0 + bi];
        const int64x2_t a0 = vreinterpretq_s64_s8(vld1q_s8(x0.qs)), a1 = vreinterpretq_s64_s8(vld1q_s8(x0.qs + 16));
        const int64x2_t c0 = vreinterpretq_s64_s8(vld1q_s8(x1.qs)), c1 = vreinterpretq_s64_s8(vld1q_s8(x1.qs + 16));
        op[bi][p][0] = vreinterpretq_s8_s64(vzip1q_s64(a0, c0));
        op[bi][p][1] = vreinterpretq_s8_s64(vzip2q_s64(a0, c0));
        op[bi][p][2] = vreinterpretq_s8_s64(vzip1q_s64(a1, c1));
        op[bi][p][3] = vreinterpretq_s8_s64(vzip2q_s64(a1, c1));
        uint16x4_t h = vdup_n_u16(x0.d);
        h = vset_lane_u16(x1.d, h, 2);
        h = vset_lane_u16(x1.d, h, 3);
        d[bi][p] = vcvt_f32_f16(vreinterpret_f16_u16(h));
      }
    }
  }
};

// Row pair h (rows 4q + 2h, 4q + 2h + 1) of quad q: w[h][k] = the weights of elements 8k .. 8k+7.
struct Q4_0W {
  static constexpr DType kType = DType::Q4_0;
  static constexpr int kFrac = 4;  // weights x 16
  static void load(const uint8_t* blk, int q, int8x16_t w[2][4]) {
    const uint8_t* qs = blk + 32 + 16 * q;
    const uint32x4_t r0 = vld1q_u32(reinterpret_cast<const uint32_t*>(qs));
    const uint32x4_t r1 = vld1q_u32(reinterpret_cast<const uint32_t*>(qs + 64));
    const uint32x4_t r2 = vld1q_u32(reinterpret_cast<const uint32_t*>(qs + 128));
    const uint32x4_t r3 = vld1q_u32(reinterpret_cast<const uint32_t*>(qs + 192));
    // Chunks 0, 1 hold elements 0-7 (low nibbles) and 16-23 (high); chunks 2, 3: 8-15, 24-31.
    const uint8x16_t z[2][2] = {{vreinterpretq_u8_u32(vzip1q_u32(r0, r1)), vreinterpretq_u8_u32(vzip1q_u32(r2, r3))},
                                {vreinterpretq_u8_u32(vzip2q_u32(r0, r1)), vreinterpretq_u8_u32(vzip2q_u32(r2, r3))}};
    // Signed nibbles (kRepackQ4Xor) times 16, as nibbles_x16.
    const uint8x16_t high = vdupq_n_u8(0xf0);
    #pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      #pragma GCC unroll 2
      for (int k = 0; k < 2; ++k) {
        w[h][k] = vreinterpretq_s8_u8(vshlq_n_u8(z[h][k], 4));
        w[h][2 + k] = vreinterpretq_s8_u8(vandq_u8(z[h][k], high));
      }
    }
  }
};

// IQ4_NL: Q4_0's layout and zips, each nibble a kIq4nlValues lookup.
struct IQ4_NLW {
  static constexpr DType kType = DType::IQ4_NL;
  static void load(const uint8_t* blk, int q, int8x16_t w[2][4]) {
    const uint8_t* qs = blk + 32 + 16 * q;
    const uint32x4_t r0 = vld1q_u32(reinterpret_cast<const uint32_t*>(qs));
    const uint32x4_t r1 = vld1q_u32(reinterpret_cast<const uint32_t*>(qs + 64));
    const uint32x4_t r2 = vld1q_u32(reinterpret_cast<const uint32_t*>(qs + 128));
    const uint32x4_t r3 = vld1q_u32(reinterpret_cast<const uint32_t*>(qs + 192));
    const uint8x16_t z[2][2] = {{vreinterpretq_u8_u32(vzip1q_u32(r0, r1)), vreinterpretq_u8_u32(vzip1q_u32(r2, r3))},
                                {vreinterpretq_u8_u32(vzip2q_u32(r0, r1)), vreinterpretq_u8_u32(vzip2q_u32(r2, r3))}};
    const int8x16_t table = vld1q_s8(kIq4nlValues);
    const uint8x16_t m4 = vdupq_n_u8(0x0f);
    #pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      #pragma GCC unroll 2
      for (int k = 0; k < 2; ++k) {
        w[h][k] = vqtbl1q_s8(table, vandq_u8(z[h][k], m4));
        w[h][2 + k] = vqtbl1q_s8(table, vshrq_n_u8(z[h][k], 4));
      }
    }
  }
};

// Q5_0: the SDOT kernel's signed chunks (nibbles5: c < 4 elements 4c .., c >= 4 elements
// 16 + 4(c - 4) ..), chunks 2k, 2k + 1 zipped into the operand of elements 8k .. 8k+7.
struct Q5_0W {
  static constexpr DType kType = DType::Q5_0;
  static void load(const uint8_t* blk, int q, int8x16_t w[2][4]) {
    int8x16_t c[8];
    nibbles5(blk + 32, q, c, true);
    #pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      const int32x4_t a = vreinterpretq_s32_s8(c[2 * k]), b = vreinterpretq_s32_s8(c[2 * k + 1]);
      w[0][k] = vreinterpretq_s8_s32(vzip1q_s32(a, b));
      w[1][k] = vreinterpretq_s8_s32(vzip2q_s32(a, b));
    }
  }
};

struct Q8_0W {
  static constexpr DType kType = DType::Q8_0;
  static void load(const uint8_t* blk, int q, int8x16_t w[2][4]) {
    const uint8_t* qs = blk + 32 + 16 * q;
    #pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      const uint32x4_t c0 = vld1q_u32(reinterpret_cast<const uint32_t*>(qs + 128 * k));
      const uint32x4_t c1 = vld1q_u32(reinterpret_cast<const uint32_t*>(qs + 128 * k + 64));
      w[0][k] = vreinterpretq_s8_u32(vzip1q_u32(c0, c1));
      w[1][k] = vreinterpretq_s8_u32(vzip2q_u32(c0, c1));
    }
  }
};

// [d_r, d_r', d_r, d_r'] of row pair h from the quad's four scales.
inline float32x4_t pair_scales(float32x4_t d, int h) {
  const float64x2_t v = vreinterpretq_f64_f32(d);
  return vreinterpretq_f32_f64(h == 0 ? vdupq_laneq_f64(v, 0) : vdupq_laneq_f64(v, 1));
}

// Group g, tokens t0 .. t0 + 2P - 1.
template <class B, int P>
[[gnu::noinline]] void tile(const GemmArgs& a, int64_t g, int64_t t0) {
  constexpr size_t kBytes = repack_block_bytes(B::kType);  // a.block_bytes
  const uint8_t* wg = a.w + static_cast<size_t>(g * a.n_blocks) * kBytes;
  const BlockQ8_0* xr[2 * P];
  #pragma GCC unroll 8
  for (int i = 0; i < 2 * P; ++i) xr[i] = reinterpret_cast<const BlockQ8_0*>(a.x + static_cast<size_t>(t0 + i) * a.x_row);
  XChunk<P> xc;
  float32x4_t acc[4][2][P];  // [quad][row pair][token pair]
  for (auto& q : acc)
    for (auto& h : q)
      for (float32x4_t& v : h) v = vdupq_n_f32(0.0f);
  for (int64_t b0 = 0; b0 < a.n_blocks; b0 += kChunk) {
    const int n = static_cast<int>(std::min<int64_t>(kChunk, a.n_blocks - b0));
    xc.fill(xr, b0, n);
    for (int q = 0; q < 4; ++q) {
      float32x4_t s[2][P];
      #pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        #pragma GCC unroll 4
        for (int p = 0; p < P; ++p) s[h][p] = acc[q][h][p];
      }
      for (int bi = 0; bi < n; ++bi) {
        const uint8_t* blk = wg + static_cast<size_t>(b0 + bi) * kBytes;
        int8x16_t w[2][4];
        B::load(blk, q, w);
        const float32x4_t dw = load_f16x4(blk + 8 * q);
        const float32x4_t dp[2] = {pair_scales(dw, 0), pair_scales(dw, 1)};
        #pragma GCC unroll 4
        for (int p = 0; p < P; ++p) {
          #pragma GCC unroll 2
          for (int h = 0; h < 2; ++h) {
            int32x4_t i = vmmlaq_s32(vdupq_n_s32(0), xc.op[bi][p][0], w[h][0]);
            i = vmmlaq_s32(i, xc.op[bi][p][1], w[h][1]);
            i = vmmlaq_s32(i, xc.op[bi][p][2], w[h][2]);
            i = vmmlaq_s32(i, xc.op[bi][p][3], w[h][3]);
            s[h][p] = vfmaq_f32(s[h][p], vmulq_f32(dp[h], xc.d[bi][p]), isum_f32<frac<B>()>(i));
          }
        }
      }
      #pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        #pragma GCC unroll 4
        for (int p = 0; p < P; ++p) acc[q][h][p] = s[h][p];
      }
    }
  }
  store_pair_tile<P>(a, g, t0, acc);
}

template <class B>
void gemm(const GemmArgs& a, GemmFn one) {
  smmla_gemm(a, one, [&]<int P>(int64_t g, int64_t t0) { tile<B, P>(a, g, t0); });
}

}  // namespace

void gemm_q4_0(const GemmArgs& a) { gemm<Q4_0W>(a, dotprod::gemm_q4_0); }
void gemm_q8_0(const GemmArgs& a) { gemm<Q8_0W>(a, dotprod::gemm_q8_0); }
void gemm_q5_0(const GemmArgs& a) { gemm<Q5_0W>(a, dotprod::gemm_q5_0); }
void gemm_iq4_nl(const GemmArgs& a) { gemm<IQ4_NLW>(a, dotprod::gemm_iq4_nl); }

}  // namespace minfer::cpu::i8mm

#include "backends/cpu/isa-end.h"
