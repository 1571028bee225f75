// Helpers of the SDOT / SMMLA GEMMs over repacked weights (gemm-dotprod.cpp,
// gemm-iq4-dotprod.cpp, gemm-kquant-dotprod.cpp, gemm-i8mm.cpp): an ISA header for the
// dotprod and i8mm regions, its functions compiled into the including region's namespace
// (isa-begin.h). A 16-byte vector of a repacked 64-byte chunk is one quad of rows (4q .. 4q+3)
// x 4 bytes (repack.h). Internal.
#pragma once
#ifndef MINFER_ISA_REGION
#error "gemm-dotprod-common.h: include it inside an ISA region (isa-begin.h), after every other header"
#endif

#include <arm_neon.h>

#include <cstdint>
#include <cstring>

namespace minfer::cpu::MINFER_ISA {

// for (int i = I; i < N; ++i) f.template operator()<i>(): lanes of the NEON intrinsics must be
// constants.
template <int I, int N, class F>
[[gnu::always_inline]] inline void static_for(F&& f) {
  if constexpr (I < N) {
    f.template operator()<I>();
    static_for<I + 1, N>(f);
  }
}

// An f16 (its bits) widened to f32: exact (FCVT).
inline float f16_f32(uint16_t h) {
  __fp16 v;
  std::memcpy(&v, &h, 2);
  return static_cast<float>(v);
}

// 4 consecutive f16 (the scales of one quad of rows) widened to f32.
inline float32x4_t load_f16x4(const uint8_t* p) {
  return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(reinterpret_cast<const uint16_t*>(p))));
}

// The 8 chunks of one quad (w[c]: 4 rows x 4 bytes) times 32 activation bytes x0 | x1, chunk
// c against bytes 4c .. 4c+3: per row the exact sum of its 32 products. One chain: the tiles
// have several (quads, tokens) in flight, and a second chain's zeroing and final add cost
// more vector instructions than its latency saves.
inline int32x4_t dot8(const int8x16_t w[8], int8x16_t x0, int8x16_t x1) {
  int32x4_t s = vdotq_laneq_s32(vdupq_n_s32(0), w[0], x0, 0);
  s = vdotq_laneq_s32(s, w[1], x0, 1);
  s = vdotq_laneq_s32(s, w[2], x0, 2);
  s = vdotq_laneq_s32(s, w[3], x0, 3);
  s = vdotq_laneq_s32(s, w[4], x1, 0);
  s = vdotq_laneq_s32(s, w[5], x1, 1);
  s = vdotq_laneq_s32(s, w[6], x1, 2);
  return vdotq_laneq_s32(s, w[7], x1, 3);
}

// The same for 4 chunks against 16 bytes x (chunk c against bytes 4c .. 4c+3), added to s.
inline int32x4_t dot4(int32x4_t s, const int8x16_t w[4], int8x16_t x) {
  s = vdotq_laneq_s32(s, w[0], x, 0);
  s = vdotq_laneq_s32(s, w[1], x, 1);
  s = vdotq_laneq_s32(s, w[2], x, 2);
  return vdotq_laneq_s32(s, w[3], x, 3);
}

// Q4_0 (stored with each nibble XOR 8, repack.h kRepackQ4Xor): the 4 chunks of quad q at qs
// (stride 64 bytes) as signed weights times 16: w[k] = byte << 4 (elements 4k ..), w[4 + k] =
// byte & 0xf0 (elements 16 + 4k ..). Their integer sums are 16x the weights'; isum_f32<4>
// converts them exactly.
inline void nibbles_x16(const uint8_t* qs, int8x16_t w[8]) {
  const int8x16_t high = vdupq_n_s8(static_cast<int8_t>(0xf0));
  #pragma GCC unroll 16
  for (int k = 0; k < 4; ++k) {
    const int8x16_t v = vld1q_s8(reinterpret_cast<const int8_t*>(qs + 64 * k));
    w[k] = vshlq_n_s8(v, 4);
    w[4 + k] = vandq_s8(v, high);
  }
}

// An integer sum of products as float: F fraction bits (sums of weights times 2^F) divided out
// by the conversion itself (exact: |i| < 2^24).
template <int F>
inline float32x4_t isum_f32(int32x4_t i) {
  if constexpr (F == 0) return vcvtq_f32_s32(i);
  else return vcvtq_n_f32_s32(i, F);
}

// Fraction bits of a weight loader B's integer sums: B::kFrac where it has one, else 0.
template <class B>
constexpr int frac() {
  if constexpr (requires { B::kFrac; }) return B::kFrac;
  else return 0;
}

// 0xff in byte i of the result where bit i of the 16 bits at p is set (bytes 0-7: bits of
// p[0], 8-15: bits of p[1]); p[0], p[1] are bytes `at`, `at + 1` of the 16 bytes v.
inline uint8x16_t bit_mask16(uint8x16_t v, int at) {
  const uint8x16_t idx = vaddq_u8(vcombine_u8(vdup_n_u8(0), vdup_n_u8(1)), vdupq_n_u8(static_cast<uint8_t>(at)));
  const uint8x16_t bits = vreinterpretq_u8_u64(vdupq_n_u64(0x8040201008040201ull));
  return vtstq_u8(vqtbl1q_u8(v, idx), bits);
}

// Q5_0 / Q5_1: the quad q of a block whose qs[4][16][4] are at qs, followed by hm[4][2] u64
// (bit 4r + j of hm[k][h] = the fifth bit of row r's element 16h + 4k + j). Signed (Q5_0:
// nibble + 16 * bit - 16, i.e. the nibble with 0xf0 OR-ed in where the bit is clear) or
// unsigned (Q5_1: nibble + 16 * bit). The 16 bits of quad q are bytes 2q, 2q + 1 of each u64.
inline void nibbles5(const uint8_t* qs, int q, int8x16_t w[8], bool is_signed) {
  const uint8x16_t m4 = vdupq_n_u8(0x0f), hi = vdupq_n_u8(is_signed ? 0xf0 : 0x10);
  #pragma GCC unroll 16
  for (int k = 0; k < 4; ++k) {
    const uint8x16_t v = vld1q_u8(qs + 64 * k + 16 * q);
    const uint8x16_t hm = vld1q_u8(qs + 256 + 16 * k);  // hm[k][0] | hm[k][1]
    const uint8x16_t lo = vandq_u8(v, m4), up = vshrq_n_u8(v, 4);
    const uint8x16_t b0 = bit_mask16(hm, 2 * q), b1 = bit_mask16(hm, 8 + 2 * q);
    if (is_signed) {
      w[k] = vreinterpretq_s8_u8(vbslq_u8(b0, lo, vorrq_u8(lo, hi)));
      w[4 + k] = vreinterpretq_s8_u8(vbslq_u8(b1, up, vorrq_u8(up, hi)));
    } else {
      w[k] = vreinterpretq_s8_u8(vorrq_u8(lo, vandq_u8(b0, hi)));
      w[4 + k] = vreinterpretq_s8_u8(vorrq_u8(up, vandq_u8(b1, hi)));
    }
  }
}

// The i8mm GEMMs' shared steps. store_pair_tile: a tile's SMMLA sums, acc[quad][row pair][token
// pair] (each [r0t0, r0t1, r1t0, r1t1]), written to y as rows of tokens t0 + 2p and t0 + 2p + 1.
template <int P>
inline void store_pair_tile(const GemmArgs& a, int64_t g, int64_t t0, const float32x4_t (&acc)[4][2][P]) {
  for (int q = 0; q < 4; ++q)
    for (int p = 0; p < P; ++p) {
      const float64x2_t lo = vreinterpretq_f64_f32(acc[q][0][p]), hi = vreinterpretq_f64_f32(acc[q][1][p]);
      float* y = a.y + (t0 + 2 * p) * a.y_stride + g * kRepackRows + 4 * q;
      vst1q_f32(y, vreinterpretq_f32_f64(vzip1q_f64(lo, hi)));
      vst1q_f32(y + a.y_stride, vreinterpretq_f32_f64(vzip2q_f64(lo, hi)));
    }
}

// Token tiles of 8, 4, 2 through SMMLA (tile.template operator()<P>(g, t0): P token pairs); an
// odd last token through the SDOT kernel `one`.
template <class Tile>
inline void smmla_gemm(const GemmArgs& a, GemmFn one, Tile tile) {
  for (int64_t g = a.g0; g < a.g1; ++g) {
    int64_t t = 0;
    for (; t + 8 <= a.n_tok; t += 8) tile.template operator()<4>(g, t);
    if (t + 4 <= a.n_tok) tile.template operator()<2>(g, t), t += 4;
    if (t + 2 <= a.n_tok) tile.template operator()<1>(g, t);
  }
  if (a.n_tok % 2) {
    GemmArgs o = a;
    const int64_t t = a.n_tok - 1;
    o.x = a.x + static_cast<size_t>(t) * a.x_row;
    o.xsum = a.xsum ? a.xsum + t * a.n_blocks : nullptr;
    o.xd_tiles = nullptr;
    o.n_tok = 1;
    o.y = a.y + t * a.y_stride;
    one(o);
  }
}

}  // namespace minfer::cpu::MINFER_ISA
