// SMMLA (ARMv8.6 FEAT_I8MM) GEMMs of Q4_K and Q6_K over the repacked weights of repack.h (the
// layout of the SDOT kernels, gemm-kquant-dotprod.cpp), bit-identical to the scalar specs in
// gemm-ref.cpp. As in gemm-i8mm.cpp, vmmlaq_s32(acc, x, w) takes two tokens' activation bytes
// 8k .. 8k+7 and two rows' weights of the same elements (two 4-byte chunks of the layout zipped)
// and gives [t0 r0, t0 r1, t1 r0, t1 r1]. Per sub-block the exact sums are multiplied by the
// rows' scales in int32 ([sc_r, sc_r', sc_r, sc_r'], vmlaq_s32); Q4_K's mins are one more
// matrix product, sum_j m_j * bs_j with bs_j = bsums[2j] + bsums[2j + 1] split as 128 * hi + lo
// (hi = bs >> 7 in -64..63, lo = bs & 127: both int8) against the rows' 8 mins:
// (SMMLA(hi) << 7) + SMMLA(lo). Then per super-block the float expression of the row kernel
// (gemm_super_blocks in gemm-ref.cpp) in the same lanes:
//   Q4_K  s += d_x * (d * float(sum_q) - dmin * float(sum_m))
//   Q6_K  s += (d_x * d) * float(sum_q)
// A tile is a group x 2P tokens; the activations of a chunk of super-blocks are interleaved
// into operands once (XChunk) and used by the group's four quads in turn. A single token goes
// to the SDOT kernel. llvm-mca figures beside the SDOT tiles': bench/arm-mca.py
// (docs/cpu-performance.md). An i8mm
// region (isa-begin.h).
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

constexpr int kChunk = 2;  // super-blocks of activations interleaved at a time (P = 4: 4.4 KiB)

// The activations of token pairs t0 + 2p, t0 + 2p + 1 (p < P) for super-blocks b0 .. b0 + n - 1.
template <int P>
struct XChunk {
  int8x16_t op[kChunk][P][32];  // bytes 8k .. 8k+7 of the pair's first token | of its second
  int8x16_t hi[kChunk][P], lo[kChunk][P];  // bs_j >> 7, bs_j & 127 (j = 0..7) of each token
  float32x4_t d[kChunk][P];     // [d_t0, d_t0, d_t1, d_t1]
  void fill(const BlockQ8_K* const xr[2 * P], int64_t b0, int n) {
    for (int bi = 0; bi < n; ++bi) {
      #pragma GCC unroll 4
      for (int p = 0; p < P; ++p) {
        const BlockQ8_K& x0 = xr[2 * p][b0 + bi];
        const BlockQ8_K& x1 = xr[2 * p + 1][b0 + bi];
        #pragma GCC unroll 4
        for (int v = 0; v < 16; ++v) {
          const int64x2_t a = vreinterpretq_s64_s8(vld1q_s8(x0.qs + 16 * v));
          const int64x2_t c = vreinterpretq_s64_s8(vld1q_s8(x1.qs + 16 * v));
          op[bi][p][2 * v] = vreinterpretq_s8_s64(vzip1q_s64(a, c));
          op[bi][p][2 * v + 1] = vreinterpretq_s8_s64(vzip2q_s64(a, c));
        }
        const int16x8_t bs0 = vpaddq_s16(vld1q_s16(x0.bsums), vld1q_s16(x0.bsums + 8));
        const int16x8_t bs1 = vpaddq_s16(vld1q_s16(x1.bsums), vld1q_s16(x1.bsums + 8));
        const int16x8_t m7 = vdupq_n_s16(127);
        hi[bi][p] = vshrn_high_n_s16(vshrn_n_s16(bs0, 7), bs1, 7);
        lo[bi][p] = vmovn_high_s16(vmovn_s16(vandq_s16(bs0, m7)), vandq_s16(bs1, m7));
        d[bi][p] = vcombine_f32(vdup_n_f32(x0.d), vdup_n_f32(x1.d));
      }
    }
  }
};

// [v_r, v_r', v_r, v_r'] of row pair h from a quad's four values.
inline int32x4_t pair_i32(int32x4_t v, int h) {
  const int64x2_t u = vreinterpretq_s64_s32(v);
  return vreinterpretq_s32_s64(h == 0 ? vdupq_laneq_s64(u, 0) : vdupq_laneq_s64(u, 1));
}
inline float32x4_t pair_f32(float32x4_t v, int h) {
  return vreinterpretq_f32_s32(pair_i32(vreinterpretq_s32_f32(v), h));
}

// 4 bytes (one per row of a quad) widened to int32.
inline int32x4_t widen_u8x4(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(vmovl_u8(vcreate_u8(v)))));
}
inline int32x4_t widen_s8x4(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return vmovl_s16(vget_low_s16(vmovl_s8(vcreate_s8(v))));
}

// Chunks c, c + 1 of a quad (4 rows x 4 bytes each) as two row-pair operands: z[0] rows 0-1,
// z[1] rows 2-3, each row's 4 bytes of chunk c then of chunk c + 1.
inline void zip_rows(uint8x16_t c0, uint8x16_t c1, uint8x16_t z[2]) {
  z[0] = vreinterpretq_u8_u32(vzip1q_u32(vreinterpretq_u32_u8(c0), vreinterpretq_u32_u8(c1)));
  z[1] = vreinterpretq_u8_u32(vzip2q_u32(vreinterpretq_u32_u8(c0), vreinterpretq_u32_u8(c1)));
}

// Q4_K sub-block j (32 elements) of quad q: w[h][k] = row pair h's weights of elements 8k .. 8k+7
// (nibble j % 2 of chunks 2k, 2k + 1 of qs[j / 2]); sc = the rows' scales.
template <int kOdd>
inline void q4_k_sub(const uint8_t* blk, int j, int q, int8x16_t w[2][4], int32x4_t& sc) {
  const uint8_t* qs = blk + 320 + 512 * (j / 2) + 16 * q;
  #pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) {
    uint8x16_t z[2];
    zip_rows(vld1q_u8(qs + 128 * k), vld1q_u8(qs + 128 * k + 64), z);
    #pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) w[h][k] = vreinterpretq_s8_u8(kOdd ? vshrq_n_u8(z[h], 4) : vandq_u8(z[h], vdupq_n_u8(0x0f)));
  }
  sc = widen_u8x4(blk + 64 + 16 * j + 4 * q);
}

// Row pair h's 8 mins, [m_0 .. m_7 of row r | of row r + 1] (r = 4q + 2h), from m[8][16] at 192:
// a table lookup over m[0..3] (bytes 16j + r) and one over m[4..7] for the other half.
inline void q4_k_mins(const uint8_t* blk, int q, int8x16_t m[2]) {
  const uint8x16x4_t lo = {{vld1q_u8(blk + 192), vld1q_u8(blk + 208), vld1q_u8(blk + 224), vld1q_u8(blk + 240)}};
  const uint8x16x4_t hi = {{vld1q_u8(blk + 256), vld1q_u8(blk + 272), vld1q_u8(blk + 288), vld1q_u8(blk + 304)}};
  // Byte i of row pair (r, r + 1): j = i % 8, row r + i / 8; 0x80 (out of range) where the
  // other table holds it.
  constexpr uint8_t kX = 0x80;
  const uint8x16_t base_lo = {0, 16, 32, 48, kX, kX, kX, kX, 1, 17, 33, 49, kX, kX, kX, kX};
  const uint8x16_t base_hi = {kX, kX, kX, kX, 0, 16, 32, 48, kX, kX, kX, kX, 1, 17, 33, 49};
  #pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {
    const uint8x16_t r = vdupq_n_u8(static_cast<uint8_t>(4 * q + 2 * h));
    m[h] = vreinterpretq_s8_u8(vqtbx4q_u8(vqtbl4q_u8(lo, vaddq_u8(base_lo, r)), hi, vaddq_u8(base_hi, r)));
  }
}

// Q6_K sub-block j (16 elements) of quad q: chunks 0-2 = the low 6 bits of q[j][0..2], chunk 3
// their top bit pairs (repack.h), weights u - 32; w[h][k] = row pair h's elements 8k .. 8k+7.
inline void q6_k_sub(const uint8_t* blk, int j, int q, int8x16_t w[2][2], int32x4_t& sc) {
  const uint8_t* p = blk + kQ6KRepackedQuants + 192 * j + 16 * q;
  const uint8x16_t v0 = vld1q_u8(p), v1 = vld1q_u8(p + 64), v2 = vld1q_u8(p + 128);
  const uint8x16_t m6 = vdupq_n_u8(0x3f);
  // bits 7-6 of v2, v1, v0 to 5-4, 3-2, 1-0: v2's top kept, v1 >> 2 and v0 >> 4 inserted under it.
  const uint8x16_t c3 = vshrq_n_u8(vsriq_n_u8(vsriq_n_u8(v2, v1, 2), v0, 4), 2);
  uint8x16_t z0[2], z1[2];
  zip_rows(vandq_u8(v0, m6), vandq_u8(v1, m6), z0);
  zip_rows(vandq_u8(v2, m6), c3, z1);
  const int8x16_t k32 = vdupq_n_s8(32);
  #pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {
    w[h][0] = vsubq_s8(vreinterpretq_s8_u8(z0[h]), k32);
    w[h][1] = vsubq_s8(vreinterpretq_s8_u8(z1[h]), k32);
  }
  sc = widen_s8x4(blk + 32 + 16 * j + 4 * q);
}

// Group g, tokens t0 .. t0 + 2P - 1.
template <DType kType, int P>
[[gnu::noinline]] void tile(const GemmArgs& a, int64_t g, int64_t t0) {
  constexpr bool kQ4 = kType == DType::Q4_K;
  constexpr size_t kBytes = repack_block_bytes(kType);  // a.block_bytes
  const uint8_t* wg = a.w + static_cast<size_t>(g * a.n_blocks) * kBytes;
  const BlockQ8_K* xr[2 * P];
  #pragma GCC unroll 8
  for (int i = 0; i < 2 * P; ++i) xr[i] = reinterpret_cast<const BlockQ8_K*>(a.x + static_cast<size_t>(t0 + i) * a.x_row);
  XChunk<P> xc;
  float32x4_t acc[4][2][P];  // [quad][row pair][token pair]
  for (auto& q : acc)
    for (auto& h : q)
      for (float32x4_t& v : h) v = vdupq_n_f32(0.0f);
  for (int64_t b0 = 0; b0 < a.n_blocks; b0 += kChunk) {
    const int n = static_cast<int>(std::min<int64_t>(kChunk, a.n_blocks - b0));
    xc.fill(xr, b0, n);
    for (int q = 0; q < 4; ++q) {
      for (int bi = 0; bi < n; ++bi) {
        const uint8_t* blk = wg + static_cast<size_t>(b0 + bi) * kBytes;
        int32x4_t sq[2][P];
        #pragma GCC unroll 2
        for (int h = 0; h < 2; ++h) {
          #pragma GCC unroll 4
          for (int p = 0; p < P; ++p) sq[h][p] = vdupq_n_s32(0);
        }
        if constexpr (kQ4) {
          for (int j = 0; j < 8; j += 2) {
            static_for<0, 2>([&]<int kOdd>() {
              int8x16_t w[2][4];
              int32x4_t sc;
              q4_k_sub<kOdd>(blk, j + kOdd, q, w, sc);
              const int32x4_t sp[2] = {pair_i32(sc, 0), pair_i32(sc, 1)};
              const int8x16_t* xo = xc.op[bi][0] + 4 * (j + kOdd);
              #pragma GCC unroll 4
              for (int p = 0; p < P; ++p) {
                #pragma GCC unroll 2
                for (int h = 0; h < 2; ++h) {
                  int32x4_t i = vmmlaq_s32(vdupq_n_s32(0), xo[32 * p], w[h][0]);
                  i = vmmlaq_s32(i, xo[32 * p + 1], w[h][1]);
                  i = vmmlaq_s32(i, xo[32 * p + 2], w[h][2]);
                  i = vmmlaq_s32(i, xo[32 * p + 3], w[h][3]);
                  sq[h][p] = vmlaq_s32(sq[h][p], i, sp[h]);
                }
              }
            });
          }
        } else {
          for (int j = 0; j < 16; ++j) {
            int8x16_t w[2][2];
            int32x4_t sc;
            q6_k_sub(blk, j, q, w, sc);
            const int32x4_t sp[2] = {pair_i32(sc, 0), pair_i32(sc, 1)};
            const int8x16_t* xo = xc.op[bi][0] + 2 * j;
            #pragma GCC unroll 4
            for (int p = 0; p < P; ++p) {
              #pragma GCC unroll 2
              for (int h = 0; h < 2; ++h) {
                int32x4_t i = vmmlaq_s32(vdupq_n_s32(0), xo[32 * p], w[h][0]);
                i = vmmlaq_s32(i, xo[32 * p + 1], w[h][1]);
                sq[h][p] = vmlaq_s32(sq[h][p], i, sp[h]);
              }
            }
          }
        }
        const float32x4_t dw = load_f16x4(blk + 8 * q);
        if constexpr (kQ4) {
          const float32x4_t dmin = load_f16x4(blk + 32 + 8 * q);
          int8x16_t m[2];
          q4_k_mins(blk, q, m);
          #pragma GCC unroll 2
          for (int h = 0; h < 2; ++h) {
            const float32x4_t dp = pair_f32(dw, h), mp = pair_f32(dmin, h);
            #pragma GCC unroll 4
            for (int p = 0; p < P; ++p) {
              const int32x4_t sm = vmmlaq_s32(vshlq_n_s32(vmmlaq_s32(vdupq_n_s32(0), xc.hi[bi][p], m[h]), 7), xc.lo[bi][p], m[h]);
              const float32x4_t f = vsubq_f32(vmulq_f32(dp, vcvtq_f32_s32(sq[h][p])), vmulq_f32(mp, vcvtq_f32_s32(sm)));
              acc[q][h][p] = vaddq_f32(acc[q][h][p], vmulq_f32(f, xc.d[bi][p]));
            }
          }
        } else {
          #pragma GCC unroll 2
          for (int h = 0; h < 2; ++h) {
            const float32x4_t dp = pair_f32(dw, h);
            #pragma GCC unroll 4
            for (int p = 0; p < P; ++p)
              acc[q][h][p] = vaddq_f32(acc[q][h][p], vmulq_f32(vmulq_f32(xc.d[bi][p], dp), vcvtq_f32_s32(sq[h][p])));
          }
        }
      }
    }
  }
  store_pair_tile<P>(a, g, t0, acc);
}

template <DType kType>
void gemm(const GemmArgs& a, GemmFn one) {
  smmla_gemm(a, one, [&]<int P>(int64_t g, int64_t t0) { tile<kType, P>(a, g, t0); });
}

}  // namespace

void gemm_q4_k(const GemmArgs& a) { gemm<DType::Q4_K>(a, dotprod::gemm_q4_k); }
void gemm_q6_k(const GemmArgs& a) { gemm<DType::Q6_K>(a, dotprod::gemm_q6_k); }

}  // namespace minfer::cpu::i8mm

#include "backends/cpu/isa-end.h"
