// 128-bit Advanced SIMD helpers shared by the AArch64 kernel files (neon, dotprod, i8mm): an
// ISA header, its functions compiled into the including region's namespace (isa-begin.h).
// Weight unpacking (nibbles, Q5's fifth bits, the K-quants' packed scales) and the f16 scales;
// the products themselves are each file's (widening multiplies or SDOT). Internal.
#pragma once
#ifndef MINFER_ISA_REGION
#error "neon-common.h: include it inside an ISA region (isa-begin.h), after every other header"
#endif

#include <arm_neon.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "quant/blocks.h"

namespace minfer::cpu::MINFER_ISA {

// f16 -> f32, exact for every finite value and infinity (FCVTL; a NaN comes back quiet).
inline float fp16(uint16_t h) { return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))), 0); }

inline float32x4_t fp16x4(uint16_t h0, uint16_t h1, uint16_t h2, uint16_t h3) {
  const uint16_t h[4] = {h0, h1, h2, h3};
  return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(h)));
}

// d_w * d_x of blocks p .. p + 3 (the reference's dxw: two exact widenings, one product).
template <typename BW, typename BX>
inline float32x4_t dxw4(const BW* a, const BX* b) {
  return vmulq_f32(fp16x4(a[0].d, a[1].d, a[2].d, a[3].d), fp16x4(b[0].d, b[1].d, b[2].d, b[3].d));
}

// s = fma(d[k], f[k], s) for k = 0 .. 3 in order: four steps of the reference's Seq chain.
inline float seq_fma4(float s, float32x4_t d, float32x4_t f) {
  s = std::fma(vgetq_lane_f32(d, 0), vgetq_lane_f32(f, 0), s);
  s = std::fma(vgetq_lane_f32(d, 1), vgetq_lane_f32(f, 1), s);
  s = std::fma(vgetq_lane_f32(d, 2), vgetq_lane_f32(f, 2), s);
  return std::fma(vgetq_lane_f32(d, 3), vgetq_lane_f32(f, 3), s);
}

// [sum s0, sum s1, sum s2, sum s3]: the horizontal sums of four vectors.
inline int32x4_t hsum4(int32x4_t s0, int32x4_t s1, int32x4_t s2, int32x4_t s3) {
  return vpaddq_s32(vpaddq_s32(s0, s1), vpaddq_s32(s2, s3));
}

// An activation block's (Q8_0, Q8_1) 32 quants as two vectors.
template <typename B>
inline int8x16_t x_lo(const B& b) { return vld1q_s8(b.qs); }
template <typename B>
inline int8x16_t x_hi(const B& b) { return vld1q_s8(b.qs + 16); }

// The Seq order of vec-dot-ref.cpp over nb blocks: s = fma(d_w * d_x, isum, s) per block in
// order (kMin, Q5_1: then s = fma(m_w, s_x, s)). isum(k) gives block k's integer sum as 4
// int32 lanes; four blocks' sums and scale products are taken at once, their fmas in order.
template <bool kMin, typename BW, typename BX, typename ISum>
float seq_blocks(const BW* a, const BX* b, int64_t nb, ISum isum) {
  float s = 0.0f;
  int64_t ib = 0;
  for (; ib + 4 <= nb; ib += 4) {
    const float32x4_t f = vcvtq_f32_s32(hsum4(isum(ib), isum(ib + 1), isum(ib + 2), isum(ib + 3)));  // exact
    const float32x4_t d = dxw4(a + ib, b + ib);
    if constexpr (kMin) {
      const float32x4_t m = fp16x4(a[ib].m, a[ib + 1].m, a[ib + 2].m, a[ib + 3].m);
      const float32x4_t sx = fp16x4(b[ib].s, b[ib + 1].s, b[ib + 2].s, b[ib + 3].s);
      s = std::fma(vgetq_lane_f32(d, 0), vgetq_lane_f32(f, 0), s);
      s = std::fma(vgetq_lane_f32(m, 0), vgetq_lane_f32(sx, 0), s);
      s = std::fma(vgetq_lane_f32(d, 1), vgetq_lane_f32(f, 1), s);
      s = std::fma(vgetq_lane_f32(m, 1), vgetq_lane_f32(sx, 1), s);
      s = std::fma(vgetq_lane_f32(d, 2), vgetq_lane_f32(f, 2), s);
      s = std::fma(vgetq_lane_f32(m, 2), vgetq_lane_f32(sx, 2), s);
      s = std::fma(vgetq_lane_f32(d, 3), vgetq_lane_f32(f, 3), s);
      s = std::fma(vgetq_lane_f32(m, 3), vgetq_lane_f32(sx, 3), s);
    } else {
      s = seq_fma4(s, d, f);
    }
  }
  for (; ib < nb; ++ib) {
    s = std::fma(fp16(a[ib].d) * fp16(b[ib].d), static_cast<float>(vaddvq_s32(isum(ib))), s);
    if constexpr (kMin) s = std::fma(fp16(a[ib].m), fp16(b[ib].s), s);
  }
  return s;
}

// A 32-element block's 16 bytes of nibbles: lo = elements 0..15 (low nibbles), hi = 16..31
// (the order of Q4_0, Q4_1, Q5_*, IQ4_NL and IQ4_XS's sub-blocks).
struct Nibbles {
  uint8x16_t lo, hi;
};
inline Nibbles nibbles(const uint8_t* qs) {
  const uint8x16_t v = vld1q_u8(qs);
  return {vandq_u8(v, vdupq_n_u8(0x0f)), vshrq_n_u8(v, 4)};
}

// Q5's 32 fifth bits (little-endian u32 qh) as bytes: lo[i] = 0xff where bit i is set
// (elements 0..15), hi[i] for bit 16 + i.
inline Nibbles bits_to_bytes(const uint8_t* qh) {
  uint32_t h;
  std::memcpy(&h, qh, 4);
  const uint8x16_t t = vreinterpretq_u8_u32(vdupq_n_u32(h));
  static constexpr uint8_t kLo[16] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1};
  static constexpr uint8_t kHi[16] = {2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3};
  const uint8x16_t bit = vreinterpretq_u8_u64(vdupq_n_u64(0x8040201008040201ull));
  return {vtstq_u8(vqtbl1q_u8(t, vld1q_u8(kLo)), bit), vtstq_u8(vqtbl1q_u8(t, vld1q_u8(kHi)), bit)};
}

// Q5_0's signed quants q - 16: the nibble with 0xf0 set where the fifth bit is clear.
inline int8x16_t q5_0_signed(uint8x16_t nib, uint8x16_t set) {
  return vreinterpretq_s8_u8(vorrq_u8(nib, vbicq_u8(vdupq_n_u8(0xf0), set)));
}
// Q5_1's quants 0..31.
inline int8x16_t q5_1_unsigned(uint8x16_t nib, uint8x16_t set) {
  return vreinterpretq_s8_u8(vorrq_u8(nib, vandq_u8(set, vdupq_n_u8(0x10))));
}

// The 16 IQ4_NL levels as a lookup table (vqtbl1q_s8 by nibble).
inline int8x16_t iq4nl_table() { return vld1q_s8(kIq4nlValues); }

// ---- K-quant scales ----------------------------------------------------------------------

// Q4_K / Q5_K: the 8 6-bit scales (sc[0..7]) and mins (m[0..7]) of unpack_scale_min_k4, all
// at once: bytes 0..7 of out are the scales, 8..15 the mins.
inline void unpack_scales_mins_k4(const uint8_t* s, uint8_t out[16]) {
  constexpr uint32_t kMask6 = 0x3f3f3f3f, kMask4 = 0x0f0f0f0f, kMask2 = 0x03030303;
  uint32_t u[3];
  std::memcpy(u, s, 12);
  const uint32_t w[4] = {
      u[0] & kMask6,                                    // sc 0..3 = s[j] & 63
      (u[2] & kMask4) | (((u[0] >> 6) & kMask2) << 4),  // sc 4..7 = s[j+4] & 15 | s[j-4] >> 6 << 4
      u[1] & kMask6,                                    // m 0..3 = s[j+4] & 63
      ((u[2] >> 4) & kMask4) | (((u[1] >> 6) & kMask2) << 4),  // m 4..7 = s[j+4] >> 4 | s[j] >> 6 << 4
  };
  std::memcpy(out, w, 16);
}

// Q3_K: the 16 6-bit scales minus their offset 32 (scale_q3_k(s, j) - 32 of the reference).
inline int8x16_t q3_k_scales(const uint8_t* s) {
  constexpr uint32_t kMask4 = 0x0f0f0f0f, kMask2 = 0x03030303;
  uint32_t u[3];
  std::memcpy(u, s, 12);
  const uint32_t w[4] = {
      (u[0] & kMask4) | (((u[2] >> 0) & kMask2) << 4),         // j 0..3: s[j] & 15, bits 0-1 of s[8 + j]
      (u[1] & kMask4) | (((u[2] >> 2) & kMask2) << 4),         // j 4..7: s[j] & 15, bits 2-3
      ((u[0] >> 4) & kMask4) | (((u[2] >> 4) & kMask2) << 4),  // j 8..11: s[j-8] >> 4, bits 4-5
      ((u[1] >> 4) & kMask4) | (((u[2] >> 6) & kMask2) << 4),  // j 12..15: s[j-8] >> 4, bits 6-7
  };
  uint8_t b[16];
  std::memcpy(b, w, 16);
  return vsubq_s8(vreinterpretq_s8_u8(vld1q_u8(b)), vdupq_n_s8(32));
}

// IQ4_XS: the 8 6-bit sub-block scales minus 32.
inline void iq4_xs_scales(const BlockIQ4_XS& x, int ls[8]) {
  for (int j = 0; j < 8; ++j)
    ls[j] = (((x.scales_l[j / 2] >> (4 * (j % 2))) & 0x0f) | (((x.scales_h >> (2 * j)) & 3) << 4)) - 32;
}

// sum_j m[j] * (bsums[2j] + bsums[2j + 1]) over the 8 sub-blocks of 32 (Q4_K, Q5_K's mins);
// |bsums| <= 16 * 128, so a pair fits in int16.
inline int32_t mins_dot_k4(const uint8_t* mins8, const int16_t* bsums) {
  const int16x8_t pairs = vpaddq_s16(vld1q_s16(bsums), vld1q_s16(bsums + 8));
  const int16x8_t m = vreinterpretq_s16_u16(vmovl_u8(vld1_u8(mins8)));
  return vaddvq_s32(vmlal_high_s16(vmull_s16(vget_low_s16(pairs), vget_low_s16(m)), pairs, m));
}

// Q4_1 x Q8_1 in the reference's Lanes8 order: per block, lane l (4 consecutive elements) of
// each 16-byte half is an integer sum, as float, times d_w * d_x into accumulator lane l (lo:
// lanes 0-3, hi: 4-7); the mins m_w * s_x summed in block order; the lanes then joined as
// ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7)), plus the mins. lanes4(w, x) gives the four
// 4-element integer sums (SDOT where there is one, widening multiplies elsewhere).
template <typename Lanes4>
inline float q4_1_lanes8(int64_t n, const BlockQ4_1* a, const BlockQ8_1* b, Lanes4 lanes4) {
  const int64_t nb = n / 32;
  float32x4_t lo = vdupq_n_f32(0.0f), hi = vdupq_n_f32(0.0f);
  float mins = 0.0f;
  auto block = [&](int64_t k, float32x4_t d) {
    const Nibbles q = nibbles(a[k].qs);
    lo = vfmaq_f32(lo, vcvtq_f32_s32(lanes4(vreinterpretq_s8_u8(q.lo), x_lo(b[k]))), d);
    hi = vfmaq_f32(hi, vcvtq_f32_s32(lanes4(vreinterpretq_s8_u8(q.hi), x_hi(b[k]))), d);
  };
  int64_t ib = 0;
  for (; ib + 4 <= nb; ib += 4) {
    const float32x4_t d = dxw4(a + ib, b + ib);
    const float32x4_t m = vmulq_f32(fp16x4(a[ib].m, a[ib + 1].m, a[ib + 2].m, a[ib + 3].m),
                                    fp16x4(b[ib].s, b[ib + 1].s, b[ib + 2].s, b[ib + 3].s));
    block(ib, vdupq_laneq_f32(d, 0));
    block(ib + 1, vdupq_laneq_f32(d, 1));
    block(ib + 2, vdupq_laneq_f32(d, 2));
    block(ib + 3, vdupq_laneq_f32(d, 3));
    mins += vgetq_lane_f32(m, 0);
    mins += vgetq_lane_f32(m, 1);
    mins += vgetq_lane_f32(m, 2);
    mins += vgetq_lane_f32(m, 3);
  }
  for (; ib < nb; ++ib) {
    block(ib, vdupq_n_f32(fp16(a[ib].d) * fp16(b[ib].d)));
    mins += fp16(a[ib].m) * fp16(b[ib].s);
  }
  const float32x4_t t = vaddq_f32(lo, hi);                           // [a0 + a4, a1 + a5, a2 + a6, a3 + a7]
  const float32x2_t u = vadd_f32(vget_low_f32(t), vget_high_f32(t));  // [t0 + t2, t1 + t3]
  return vpadds_f32(u) + mins;
}

}  // namespace minfer::cpu::MINFER_ISA
