// SDOT (ARMv8.2 FEAT_DotProd) GEMMs of the super-block types (Q2_K ... Q6_K, IQ4_XS) over
// repacked weights (repack.h), bit-identical to the scalar specs in gemm-ref.cpp. A 16-byte
// vector of a repacked 64-byte array is one quad of rows (4q .. 4q+3) x 4 bytes; the weights
// of a sub-block are made signed where they carry an offset (Q3_K: u - 4, Q6_K: u - 32,
// IQ4_XS: kIq4nlValues by a table lookup) and vdotq_laneq_s32 gives each row's exact sum over
// the sub-block against the broadcast activation bytes; the sums are then multiplied by the
// rows' sub-block scales and added in int32 (vmlaq_s32), the mins' sums sum_j m_j * bsum_j in
// int16 x int16 -> int32 (vmlal_laneq_s16). The ranges are those of the AVX2 kernels
// (gemm-kquant-avx2.cpp): all below 2^31. Then the float expression of the row kernel per
// super-block, as gemm_super_blocks in gemm-ref.cpp:
//   Q2_K, Q4_K, Q5_K       s += d_x * (d * float(sum_q) - dmin * float(sum_m))
//   Q3_K, Q6_K, IQ4_XS     s += (d_x * d) * float(sum_q)
// Tiles: R quads x T tokens; decode takes the whole group (R = 4: the super-block read front to
// back, its lines asked for a part at a time, prefetch_part), prefill one quad x 8 tokens (the
// int32 sums and the float accumulators of each (quad, token) in registers, no spills).
// llvm-mca figures: bench/arm-mca.py (docs/cpu-performance.md).
// A dotprod region (isa-begin.h).
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
// GCC's scheduling before register allocation hoists the loads of the unrolled quads and tokens
// and spills the accumulators (as in gemm-dotprod.cpp).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-schedule-insns")
#endif

namespace minfer::cpu::dotprod {
namespace {

// 4 bytes (one per row of a quad) widened to int32, loaded straight into a vector register
// (through a general register, the fmov took a vector slot: the decode tiles are bound by them).
inline uint8x8_t load_u8x4(const uint8_t* p) { return vreinterpret_u8_u32(vld1_dup_u32(reinterpret_cast<const uint32_t*>(p))); }
inline int32x4_t widen_u8x4(const uint8_t* p) {
  return vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(vmovl_u8(load_u8x4(p)))));
}
inline int32x4_t widen_s8x4(const uint8_t* p) {
  return vmovl_s16(vget_low_s16(vmovl_s8(vreinterpret_s8_u8(load_u8x4(p)))));
}

// The weights of quad q for one sub-block: w[c] pairs with activation bytes 4c .. 4c+3 of the
// sub-block (kLen bytes: 8 chunks for 32, 4 for 16), sc the rows' scales.
template <int kChunks>
struct Sub {
  int8x16_t w[kChunks];
  int32x4_t sc;
};

// Each type: kSubs sub-blocks of kLen elements; load<j>(blk, q) the weights of sub-block j (a
// compile-time parity where the layout pairs sub-blocks); mins for the types with dmin.

// Q4_K: sub-block j = nibble j % 2 of qs[j / 2][c] (c = 0..7); scales and mins bytes.
struct Q4K {
  static constexpr DType kType = DType::Q4_K;
  static constexpr int kSubs = 8, kLen = 32;
  static constexpr bool kMins = true;
  template <int kOdd>
  static Sub<8> load(const uint8_t* blk, int j, int q) {
    Sub<8> s;
    const uint8_t* qs = blk + 320 + 512 * (j / 2) + 16 * q;
    #pragma GCC unroll 8
    for (int c = 0; c < 8; ++c) {
      const uint8x16_t v = vld1q_u8(qs + 64 * c);
      s.w[c] = vreinterpretq_s8_u8(kOdd ? vshrq_n_u8(v, 4) : vandq_u8(v, vdupq_n_u8(0x0f)));
    }
    s.sc = widen_u8x4(blk + 64 + 16 * j + 4 * q);
    return s;
  }
  // Sub-blocks 2p and 2p + 1 from one load of each byte (the tiles' path: half the loads).
  static void load_pair(const uint8_t* blk, int p, int q, Sub<8>& even, Sub<8>& odd) {
    const uint8_t* qs = blk + 320 + 512 * p + 16 * q;
    #pragma GCC unroll 8
    for (int c = 0; c < 8; ++c) {
      const uint8x16_t v = vld1q_u8(qs + 64 * c);
      even.w[c] = vreinterpretq_s8_u8(vandq_u8(v, vdupq_n_u8(0x0f)));
      odd.w[c] = vreinterpretq_s8_u8(vshrq_n_u8(v, 4));
    }
    // the two sub-blocks' scale bytes in one vector, widened together
    const uint8_t* sc = blk + 64 + 32 * p + 4 * q;
    const uint16x8_t sc16 = vmovl_u8(vreinterpret_u8_u32(
        vld1_lane_u32(reinterpret_cast<const uint32_t*>(sc + 16), vld1_dup_u32(reinterpret_cast<const uint32_t*>(sc)), 1)));
    even.sc = vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(sc16)));
    odd.sc = vreinterpretq_s32_u32(vmovl_high_u16(sc16));
  }
};

// Q5_K: Q4_K's nibbles (qs[p] at q5_k_qs_offset) with bit c of hm[j] as the fifth bit of chunk c.
struct Q5K {
  static constexpr DType kType = DType::Q5_K;
  static constexpr int kSubs = 8, kLen = 32;
  static constexpr bool kMins = true;
  template <int kOdd>
  static Sub<8> load(const uint8_t* blk, int j, int q) {
    Sub<8> s;
    const uint8_t* qs = blk + q5_k_qs_offset(j / 2) + 16 * q;
    const uint8x16_t hm = vld1q_u8(blk + q5_k_hm_offset(j) + 16 * q), b4 = vdupq_n_u8(0x10);
    static_for<0, 8>([&]<int c>() {
      const uint8x16_t v = vld1q_u8(qs + 64 * c);
      const uint8x16_t nib = kOdd ? vshrq_n_u8(v, 4) : vandq_u8(v, vdupq_n_u8(0x0f));
      uint8x16_t h;
      if constexpr (c < 4) h = vshlq_n_u8(hm, 4 - c);
      else if constexpr (c == 4) h = hm;
      else h = vshrq_n_u8(hm, c - 4);
      s.w[c] = vreinterpretq_s8_u8(vbslq_u8(b4, h, nib));
    });
    s.sc = widen_u8x4(blk + 64 + 16 * j + 4 * q);
    return s;
  }
};

// Q4_K / Q5_K mins: m[j] bytes at 192; sum_m = sum_j m_j * (bsums[2j] + bsums[2j + 1]).
struct MinsK {
  int16x4_t m[8];
  MinsK(const uint8_t* blk, int q) {
    #pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) m[j] = vreinterpret_s16_u16(vget_low_u16(vmovl_u8(load_u8x4(blk + 192 + 16 * j + 4 * q))));
  }
  int32x4_t sum(const BlockQ8_K& x) const {
    const int16x8_t bs = vpaddq_s16(vld1q_s16(x.bsums), vld1q_s16(x.bsums + 8));  // pairs of 16
    int32x4_t s = vmull_laneq_s16(m[0], bs, 0);
    static_for<1, 8>([&]<int j>() { s = vmlal_laneq_s16(s, m[j], bs, j); });
    return s;
  }
  // The same sums for all 16 rows (s[q]: quad q) from 16-byte loads: decode's whole group.
  static void sum16(const uint8_t* blk, const BlockQ8_K& x, int32x4_t s[4]) {
    const int16x8_t bs = vpaddq_s16(vld1q_s16(x.bsums), vld1q_s16(x.bsums + 8));
    static_for<0, 8>([&]<int j>() {
      const uint8x16_t v = vld1q_u8(blk + 192 + 16 * j);
      const int16x8_t lo = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(v))), hi = vreinterpretq_s16_u16(vmovl_high_u8(v));
      if constexpr (j == 0) {
        s[0] = vmull_laneq_s16(vget_low_s16(lo), bs, 0), s[1] = vmull_high_laneq_s16(lo, bs, 0);
        s[2] = vmull_laneq_s16(vget_low_s16(hi), bs, 0), s[3] = vmull_high_laneq_s16(hi, bs, 0);
      } else {
        s[0] = vmlal_laneq_s16(s[0], vget_low_s16(lo), bs, j), s[1] = vmlal_high_laneq_s16(s[1], lo, bs, j);
        s[2] = vmlal_laneq_s16(s[2], vget_low_s16(hi), bs, j), s[3] = vmlal_high_laneq_s16(s[3], hi, bs, j);
      }
    });
  }
};

// Q6_K: per sub-block s of 16, chunks 0-2 = the low 6 bits of q[s][0..2], chunk 3 = their top
// bit pairs (repack.h); weights u - 32; int8 scales.
struct Q6K {
  static constexpr DType kType = DType::Q6_K;
  static constexpr int kSubs = 16, kLen = 16;
  static constexpr bool kMins = false;
  template <int kOdd>
  static Sub<4> load(const uint8_t* blk, int j, int q) {
    Sub<4> s;
    const uint8_t* p = blk + kQ6KRepackedQuants + 192 * j + 16 * q;
    const uint8x16_t v0 = vld1q_u8(p), v1 = vld1q_u8(p + 64), v2 = vld1q_u8(p + 128);
    const uint8x16_t m6 = vdupq_n_u8(0x3f);
    const int8x16_t k32 = vdupq_n_s8(32);
    s.w[0] = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(v0, m6)), k32);
    s.w[1] = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(v1, m6)), k32);
    s.w[2] = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(v2, m6)), k32);
    // bits 7-6 of v2, v1, v0 to 5-4, 3-2, 1-0: v2's top kept, v1 >> 2 and v0 >> 4 inserted under it.
    s.w[3] = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(vsriq_n_u8(vsriq_n_u8(v2, v1, 2), v0, 4), 2)), k32);
    s.sc = widen_s8x4(blk + 32 + 16 * j + 4 * q);
    return s;
  }
};

// Q3_K: per sub-block s of 16, chunk v = bits 2v+1..2v of q2[s] | the hmask bit c = 4 (s % 2) + v
// of hm[s / 2] at bit 2; weights u - 4; int8 scales (already - 32).
struct Q3K {
  static constexpr DType kType = DType::Q3_K;
  static constexpr int kSubs = 16, kLen = 16;
  static constexpr bool kMins = false;
  template <int kOdd>
  static Sub<4> load(const uint8_t* blk, int j, int q) {
    Sub<4> s;
    const uint8x16_t q2 = vld1q_u8(blk + q3_k_q2_offset(j) + 16 * q);
    const uint8x16_t hm = vld1q_u8(blk + q3_k_hm_offset(j / 2) + 16 * q);
    const uint8x16_t m3 = vdupq_n_u8(0x03), b2 = vdupq_n_u8(0x04);
    const int8x16_t k4 = vdupq_n_s8(4);
    static_for<0, 4>([&]<int v>() {
      constexpr int c = 4 * kOdd + v;
      uint8x16_t low;
      if constexpr (v == 0) low = vandq_u8(q2, m3);
      else low = vandq_u8(vshrq_n_u8(q2, 2 * v), m3);
      uint8x16_t h;
      if constexpr (c < 2) h = vshlq_n_u8(hm, 2 - c);
      else if constexpr (c == 2) h = hm;
      else h = vshrq_n_u8(hm, c - 2);
      s.w[v] = vsubq_s8(vreinterpretq_s8_u8(vbslq_u8(b2, h, low)), k4);
    });
    s.sc = widen_s8x4(blk + 32 + 16 * j + 4 * q);
    return s;
  }
};

// Q2_K: per sub-block s of 16, chunk v = bits 2v+1..2v of q2[s] (unsigned); scm[s]: the scale
// in the low nibble, the min in the high one; sum_m = sum_s min_s * bsums[s].
struct Q2K {
  static constexpr DType kType = DType::Q2_K;
  static constexpr int kSubs = 16, kLen = 16;
  static constexpr bool kMins = true;
  template <int kOdd>
  static Sub<4> load(const uint8_t* blk, int j, int q) {
    Sub<4> s;
    const uint8x16_t q2 = vld1q_u8(blk + q2_k_q2_offset(j) + 16 * q), m3 = vdupq_n_u8(0x03);
    s.w[0] = vreinterpretq_s8_u8(vandq_u8(q2, m3));
    s.w[1] = vreinterpretq_s8_u8(vandq_u8(vshrq_n_u8(q2, 2), m3));
    s.w[2] = vreinterpretq_s8_u8(vandq_u8(vshrq_n_u8(q2, 4), m3));
    s.w[3] = vreinterpretq_s8_u8(vshrq_n_u8(q2, 6));
    s.sc = vandq_s32(widen_u8x4(blk + 64 + 16 * j + 4 * q), vdupq_n_s32(0x0f));
    return s;
  }
};

struct MinsQ2K {
  int16x8_t m[8];  // lanes 0-3: min of sub-block 2k of the quad's rows, 4-7: of 2k + 1
  MinsQ2K(const uint8_t* blk, int q) {
    #pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) {
      const uint32x2_t b = vld1_lane_u32(reinterpret_cast<const uint32_t*>(blk + 64 + 32 * k + 16 + 4 * q),
                                         vld1_dup_u32(reinterpret_cast<const uint32_t*>(blk + 64 + 32 * k + 4 * q)), 1);
      m[k] = vreinterpretq_s16_u16(vmovl_u8(vshr_n_u8(vreinterpret_u8_u32(b), 4)));
    }
  }
  int32x4_t sum(const BlockQ8_K& x) const {
    const int16x8_t lo = vld1q_s16(x.bsums), hi = vld1q_s16(x.bsums + 8);
    int32x4_t s = vmull_laneq_s16(vget_low_s16(m[0]), lo, 0);
    static_for<0, 8>([&]<int k>() {
      if constexpr (k > 0) s = vmlal_laneq_s16(s, vget_low_s16(m[k]), k < 4 ? lo : hi, (2 * k) % 8);
      s = vmlal_laneq_s16(s, vget_high_s16(m[k]), k < 4 ? lo : hi, (2 * k + 1) % 8);
    });
    return s;
  }
};

// IQ4_XS: sub-block s of 32, chunks k = 0..3 of qs[s] (low nibbles: elements 4k.., high:
// 16 + 4k..) as kIq4nlValues; int8 scales ls (already - 32).
struct IQ4XS {
  static constexpr DType kType = DType::IQ4_XS;
  static constexpr int kSubs = 8, kLen = 32;
  static constexpr bool kMins = false;
  template <int kOdd>
  static Sub<8> load(const uint8_t* blk, int j, int q) {
    Sub<8> s;
    const int8x16_t table = vld1q_s8(kIq4nlValues);
    const uint8x16_t m4 = vdupq_n_u8(0x0f);
    #pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      const uint8x16_t v = vld1q_u8(blk + kIQ4XSRepackedQuants + 64 * (4 * j + k) + 16 * q);
      s.w[k] = vqtbl1q_s8(table, vandq_u8(v, m4));
      s.w[4 + k] = vqtbl1q_s8(table, vshrq_n_u8(v, 4));
    }
    s.sc = widen_s8x4(blk + 32 + 16 * j + 4 * q);
    return s;
  }
};

template <class K>
using Mins = std::conditional_t<K::kType == DType::Q2_K, MinsQ2K, MinsK>;

// Quads q0 .. q0 + R - 1 of group g for tokens t0 .. t0 + T - 1.
template <class K, int R, int T>
[[gnu::noinline]] void tile(const GemmArgs& a, int64_t g, int q0, int64_t t0) {
  constexpr size_t kBytes = repack_block_bytes(K::kType);  // a.block_bytes
  float32x4_t acc[R][T];
  #pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    #pragma GCC unroll 16
    for (int i = 0; i < T; ++i) acc[r][i] = vdupq_n_f32(0.0f);
  }
  const uint8_t* wg = a.w + static_cast<size_t>(g * a.n_blocks) * kBytes;
  const BlockQ8_K* xr[T];
  #pragma GCC unroll 16
  for (int i = 0; i < T; ++i) xr[i] = reinterpret_cast<const BlockQ8_K*>(a.x + static_cast<size_t>(t0 + i) * a.x_row);
  for (int64_t b = 0; b < a.n_blocks; ++b) {
    const uint8_t* blk = wg + static_cast<size_t>(b) * kBytes;
    int32x4_t sq[R][T];
    #pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      #pragma GCC unroll 16
      for (int i = 0; i < T; ++i) sq[r][i] = vdupq_n_s32(0);
    }
    // One sub-block's products for quad r, token i, added to sq.
    auto sub = [&](const auto& s, int j, int r, int i) {
      const int8_t* x = xr[i][b].qs + K::kLen * j;
      int32x4_t isum;
      if constexpr (K::kLen == 32) isum = dot8(s.w, vld1q_s8(x), vld1q_s8(x + 16));
      else isum = dot4(vdupq_n_s32(0), s.w, vld1q_s8(x));
      sq[r][i] = vmlaq_s32(sq[r][i], isum, s.sc);
    };
    for (int j = 0; j < K::kSubs; j += 2) {  // sub-blocks in pairs: their parity is a constant
      // decode only: with several tokens the pair's 16 weight vectors beside the tokens'
      // sums and accumulators spill (GCC, Q4_K 1 x 8)
      if constexpr (T == 1 && requires(Sub<8>& e) { K::load_pair(blk, 0, 0, e, e); }) {
        if (R == 4) prefetch_part<T, kBytes, K::kSubs>(blk, j), prefetch_part<T, kBytes, K::kSubs>(blk, j + 1);
        #pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
          Sub<8> even, odd;
          K::load_pair(blk, j / 2, q0 + r, even, odd);
          #pragma GCC unroll 16
          for (int i = 0; i < T; ++i) sub(even, j, r, i), sub(odd, j + 1, r, i);
        }
        continue;
      }
      static_for<0, 2>([&]<int kOdd>() {
        if (R == 4) prefetch_part<T, kBytes, K::kSubs>(blk, j + kOdd);
        #pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
          const auto s = K::template load<kOdd>(blk, j + kOdd, q0 + r);
          #pragma GCC unroll 16
          for (int i = 0; i < T; ++i) sub(s, j + kOdd, r, i);
        }
      });
    }
    // Decode with Q4_K / Q5_K's mins: the whole group's sums at once (MinsK::sum16).
    constexpr bool kMins16 = R == 4 && T == 1 && std::is_same_v<Mins<K>, MinsK>;
    int32x4_t m16[4];
    if constexpr (K::kMins && kMins16) MinsK::sum16(blk, xr[0][b], m16);
    #pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const int q = q0 + r;
      const float32x4_t dw = load_f16x4(blk + 8 * q);
      if constexpr (K::kMins) {
        const float32x4_t dmin = load_f16x4(blk + 32 + 8 * q);
        auto add = [&](int i, int32x4_t msum) {  // token i's super-block, its mins' sum given
          const float32x4_t f = vsubq_f32(vmulq_f32(dw, vcvtq_f32_s32(sq[r][i])), vmulq_f32(dmin, vcvtq_f32_s32(msum)));
          acc[r][i] = vaddq_f32(acc[r][i], vmulq_n_f32(f, xr[i][b].d));
        };
        if constexpr (kMins16) {
          add(0, m16[r]);
        } else {
          const Mins<K> mins(blk, q);  // the quad's mins, once for the tokens
          #pragma GCC unroll 16
          for (int i = 0; i < T; ++i) add(i, mins.sum(xr[i][b]));
        }
      } else {
        #pragma GCC unroll 16
        for (int i = 0; i < T; ++i)
          acc[r][i] = vaddq_f32(acc[r][i], vmulq_f32(vmulq_n_f32(dw, xr[i][b].d), vcvtq_f32_s32(sq[r][i])));
      }
    }
  }
  #pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    #pragma GCC unroll 16
    for (int i = 0; i < T; ++i) vst1q_f32(a.y + (t0 + i) * a.y_stride + g * kRepackRows + 4 * (q0 + r), acc[r][i]);
  }
}

template <class K, int T>
void quads(const GemmArgs& a, int64_t g, int64_t t) {
  constexpr int R = T == 1 ? 4 : T == 2 ? 2 : 1;
  for (int q = 0; q < 4; q += R) tile<K, R, T>(a, g, q, t);
}

template <class K>
void gemm(const GemmArgs& a) {
  for (int64_t g = a.g0; g < a.g1; ++g) {
    int64_t t = 0;
    for (; t + 8 <= a.n_tok; t += 8) quads<K, 8>(a, g, t);
    if (t + 4 <= a.n_tok) quads<K, 4>(a, g, t), t += 4;
    if (t + 2 <= a.n_tok) quads<K, 2>(a, g, t), t += 2;
    if (t < a.n_tok) quads<K, 1>(a, g, t);
  }
}

}  // namespace

void gemm_q2_k(const GemmArgs& a) { gemm<Q2K>(a); }
void gemm_q3_k(const GemmArgs& a) { gemm<Q3K>(a); }
void gemm_q4_k(const GemmArgs& a) { gemm<Q4K>(a); }
void gemm_q5_k(const GemmArgs& a) { gemm<Q5K>(a); }
void gemm_q6_k(const GemmArgs& a) { gemm<Q6K>(a); }
void gemm_iq4_xs(const GemmArgs& a) { gemm<IQ4XS>(a); }

}  // namespace minfer::cpu::dotprod

#include "backends/cpu/isa-end.h"
