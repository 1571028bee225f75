// The AArch64 dot products of the super-block types (Q2_K ... Q6_K, IQ4_XS) with Q8_K
// activations, written once over a product policy P that each table's file supplies
// (vec-dot-kquant-neon.cpp: widening multiplies; vec-dot-kquant-dotprod.cpp: SDOT). An ISA
// header: each region gets its own copy (isa-begin.h). Internal.
//
// The math is vec-dot-kquant-ref.cpp's: the quants are unpacked to signed bytes (q - offset for
// Q3_K, Q6_K), each sub-block's products summed exactly, four sub-blocks' sums gathered into
// one int32x4 and weighted by their scales with one multiply-add, the mins taken through Q8_K's
// bsums; then the reference's float steps per super-block, in its order. Bit-identical.
//
// The policy P:
//   Sub16 dot16(q, x)             the 16 products of a 16-element sub-block, partly summed
//   int32x4_t sums4_16(p0..p3)    [sum p0, sum p1, sum p2, sum p3] (|q| <= 32)
//   Sub32 dot32(q0, q1, x0, x1)   the 32 products of a 32-element sub-block (|q| <= 32)
//   int32x4_t sums4_32(p0..p3)
//   int32x4_t dot32_wide(...)     the same for any weight byte (IQ4_XS's levels), as 4 lanes
// where the Q8_K quants x lie in [-127, 127] (quantize_q8_k never writes -128).
#pragma once
#ifndef MINFER_ISA_REGION
#error "vec-dot-kquant-arm.h: include it inside an ISA region (isa-begin.h), after every other header"
#endif

#include <arm_neon.h>

#include <cstdint>

#include "backends/cpu/neon-common.h"
#include "quant/blocks.h"

namespace minfer::cpu::MINFER_ISA {
namespace kquant {

inline int8x16_t s8(uint8x16_t v) { return vreinterpretq_s8_u8(v); }

// 16 scale bytes -> 4 int32x4 (scales 0-3, 4-7, 8-11, 12-15).
inline void widen_u8(uint8x16_t v, int32x4_t out[4]) {
  const uint16x8_t lo = vmovl_u8(vget_low_u8(v)), hi = vmovl_high_u8(v);
  out[0] = vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(lo)));
  out[1] = vreinterpretq_s32_u32(vmovl_high_u16(lo));
  out[2] = vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(hi)));
  out[3] = vreinterpretq_s32_u32(vmovl_high_u16(hi));
}
inline void widen_s8(int8x16_t v, int32x4_t out[4]) {
  const int16x8_t lo = vmovl_s8(vget_low_s8(v)), hi = vmovl_high_s8(v);
  out[0] = vmovl_s16(vget_low_s16(lo));
  out[1] = vmovl_high_s16(lo);
  out[2] = vmovl_s16(vget_low_s16(hi));
  out[3] = vmovl_high_s16(hi);
}

// sum_j m[j] * bsums[j] over the 16 sub-blocks of 16 (Q2_K's mins, m <= 15).
inline int32_t mins_dot16(uint8x16_t m, const int16_t* bsums) {
  const int16x8_t m0 = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(m)));
  const int16x8_t m1 = vreinterpretq_s16_u16(vmovl_high_u8(m));
  const int16x8_t b0 = vld1q_s16(bsums), b1 = vld1q_s16(bsums + 8);
  int32x4_t acc = vmull_s16(vget_low_s16(m0), vget_low_s16(b0));
  acc = vmlal_high_s16(acc, m0, b0);
  acc = vmlal_s16(acc, vget_low_s16(m1), vget_low_s16(b1));
  return vaddvq_s32(vmlal_high_s16(acc, m1, b1));
}

}  // namespace kquant

// Element 128h + 32sh + l is bits 2sh.. of qs[32h + l]: the two 16-element sub-blocks
// 8h + 2sh (l < 16) and 8h + 2sh + 1.
template <class P>
float vec_dot_q2_k_impl(int64_t n, const void* w, const void* x) {
  using namespace kquant;
  const auto* a = static_cast<const BlockQ2_K*>(w);
  const auto* b = static_cast<const BlockQ8_K*>(x);
  float s = 0.0f;
  for (int64_t ib = 0; ib < n / kQKK; ++ib) {
    const uint8x16_t sc8 = vld1q_u8(a[ib].scales);
    int32x4_t sc[4];
    widen_u8(vandq_u8(sc8, vdupq_n_u8(0x0f)), sc);
    const int32_t sum_m = mins_dot16(vshrq_n_u8(sc8, 4), b[ib].bsums);
    int32x4_t acc = vdupq_n_s32(0);
    for (int h = 0; h < 2; ++h) {
      uint8x16_t q0 = vld1q_u8(a[ib].qs + 32 * h), q1 = vld1q_u8(a[ib].qs + 32 * h + 16);
      const int8_t* y = b[ib].qs + 128 * h;
      typename P::Sub16 p[8];
      for (int sh = 0; sh < 4; ++sh) {
        p[2 * sh] = P::dot16(s8(vandq_u8(q0, vdupq_n_u8(3))), vld1q_s8(y + 32 * sh));
        p[2 * sh + 1] = P::dot16(s8(vandq_u8(q1, vdupq_n_u8(3))), vld1q_s8(y + 32 * sh + 16));
        q0 = vshrq_n_u8(q0, 2);
        q1 = vshrq_n_u8(q1, 2);
      }
      acc = vmlaq_s32(acc, P::sums4_16(p[0], p[1], p[2], p[3]), sc[2 * h]);
      acc = vmlaq_s32(acc, P::sums4_16(p[4], p[5], p[6], p[7]), sc[2 * h + 1]);
    }
    s += b[ib].d * (fp16(a[ib].d) * static_cast<float>(vaddvq_s32(acc)) - fp16(a[ib].dmin) * static_cast<float>(sum_m));
  }
  return s;
}

// As Q2_K, q = low 2 bits - 4 where bit 4h + sh of hmask[l] is clear.
template <class P>
float vec_dot_q3_k_impl(int64_t n, const void* w, const void* x) {
  using namespace kquant;
  const auto* a = static_cast<const BlockQ3_K*>(w);
  const auto* b = static_cast<const BlockQ8_K*>(x);
  float s = 0.0f;
  for (int64_t ib = 0; ib < n / kQKK; ++ib) {
    int32x4_t sc[4];
    widen_s8(q3_k_scales(a[ib].scales), sc);
    const uint8x16_t hm0 = vld1q_u8(a[ib].hmask), hm1 = vld1q_u8(a[ib].hmask + 16);
    const uint8x16_t four = vdupq_n_u8(4);
    int32x4_t acc = vdupq_n_s32(0);
    for (int h = 0; h < 2; ++h) {
      uint8x16_t q0 = vld1q_u8(a[ib].qs + 32 * h), q1 = vld1q_u8(a[ib].qs + 32 * h + 16);
      const int8_t* y = b[ib].qs + 128 * h;
      typename P::Sub16 p[8];
      for (int sh = 0; sh < 4; ++sh) {
        const uint8x16_t bit = vdupq_n_u8(static_cast<uint8_t>(1u << (4 * h + sh)));
        const int8x16_t w0 = vsubq_s8(s8(vandq_u8(q0, vdupq_n_u8(3))), s8(vbicq_u8(four, vtstq_u8(hm0, bit))));
        const int8x16_t w1 = vsubq_s8(s8(vandq_u8(q1, vdupq_n_u8(3))), s8(vbicq_u8(four, vtstq_u8(hm1, bit))));
        p[2 * sh] = P::dot16(w0, vld1q_s8(y + 32 * sh));
        p[2 * sh + 1] = P::dot16(w1, vld1q_s8(y + 32 * sh + 16));
        q0 = vshrq_n_u8(q0, 2);
        q1 = vshrq_n_u8(q1, 2);
      }
      acc = vmlaq_s32(acc, P::sums4_16(p[0], p[1], p[2], p[3]), sc[2 * h]);
      acc = vmlaq_s32(acc, P::sums4_16(p[4], p[5], p[6], p[7]), sc[2 * h + 1]);
    }
    s += b[ib].d * fp16(a[ib].d) * static_cast<float>(vaddvq_s32(acc));
  }
  return s;
}

// Sub-block 2c = the low nibbles of qs[32c .. 32c + 31], 2c + 1 the high ones; Q5_K adds bit
// 2c / 2c + 1 of qh[l] as bit 4.
template <class P, class Block, bool kQ5>
float vec_dot_q45_k_impl(int64_t n, const void* w, const void* x) {
  using namespace kquant;
  const auto* a = static_cast<const Block*>(w);
  const auto* b = static_cast<const BlockQ8_K*>(x);
  const uint8x16_t m4 = vdupq_n_u8(0x0f);
  float s = 0.0f;
  for (int64_t ib = 0; ib < n / kQKK; ++ib) {
    uint8_t sm[16];  // scales 0..7, mins 0..7
    unpack_scales_mins_k4(a[ib].scales, sm);
    int32x4_t sc[4];
    widen_u8(vld1q_u8(sm), sc);  // sc[0], sc[1]: the scales
    const int32_t sum_m = mins_dot_k4(sm + 8, b[ib].bsums);
    uint8x16_t h0 = vdupq_n_u8(0), h1 = vdupq_n_u8(0);
    if constexpr (kQ5) {
      h0 = vld1q_u8(a[ib].qh);
      h1 = vld1q_u8(a[ib].qh + 16);
    }
    int32x4_t acc = vdupq_n_s32(0);
    for (int half = 0; half < 2; ++half) {  // sub-blocks 4 half .. 4 half + 3
      typename P::Sub32 p[4];
      for (int k = 0; k < 2; ++k) {
        const int c = 2 * half + k;
        const uint8x16_t v0 = vld1q_u8(a[ib].qs + 32 * c), v1 = vld1q_u8(a[ib].qs + 32 * c + 16);
        uint8x16_t lo0 = vandq_u8(v0, m4), lo1 = vandq_u8(v1, m4), hi0 = vshrq_n_u8(v0, 4), hi1 = vshrq_n_u8(v1, 4);
        if constexpr (kQ5) {
          const uint8x16_t one = vdupq_n_u8(1), two = vdupq_n_u8(2);
          lo0 = vorrq_u8(lo0, vshlq_n_u8(vandq_u8(h0, one), 4));
          lo1 = vorrq_u8(lo1, vshlq_n_u8(vandq_u8(h1, one), 4));
          hi0 = vorrq_u8(hi0, vshlq_n_u8(vandq_u8(h0, two), 3));
          hi1 = vorrq_u8(hi1, vshlq_n_u8(vandq_u8(h1, two), 3));
          h0 = vshrq_n_u8(h0, 2);
          h1 = vshrq_n_u8(h1, 2);
        }
        const int8_t* y = b[ib].qs + 64 * c;
        p[2 * k] = P::dot32(s8(lo0), s8(lo1), vld1q_s8(y), vld1q_s8(y + 16));
        p[2 * k + 1] = P::dot32(s8(hi0), s8(hi1), vld1q_s8(y + 32), vld1q_s8(y + 48));
      }
      acc = vmlaq_s32(acc, P::sums4_32(p[0], p[1], p[2], p[3]), sc[half]);
    }
    s += b[ib].d * (fp16(a[ib].d) * static_cast<float>(vaddvq_s32(acc)) - fp16(a[ib].dmin) * static_cast<float>(sum_m));
  }
  return s;
}

// Element 128h + 32sh + l: the low nibble (sh < 2) or high nibble of ql[64h + 32(sh % 2) + l],
// bits 2sh.. of qh[32h + l] on top; q - 32 as a signed byte.
template <class P>
float vec_dot_q6_k_impl(int64_t n, const void* w, const void* x) {
  using namespace kquant;
  const auto* a = static_cast<const BlockQ6_K*>(w);
  const auto* b = static_cast<const BlockQ8_K*>(x);
  const uint8x16_t m4 = vdupq_n_u8(0x0f), m30 = vdupq_n_u8(0x30), m3 = vdupq_n_u8(3);
  const int8x16_t off = vdupq_n_s8(32);
  float s = 0.0f;
  for (int64_t ib = 0; ib < n / kQKK; ++ib) {
    int32x4_t sc[4];
    widen_s8(vld1q_s8(a[ib].scales), sc);
    int32x4_t acc = vdupq_n_s32(0);
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = a[ib].ql + 64 * h;
      const uint8x16_t l0 = vld1q_u8(ql), l1 = vld1q_u8(ql + 16), l2 = vld1q_u8(ql + 32), l3 = vld1q_u8(ql + 48);
      const uint8x16_t g0 = vld1q_u8(a[ib].qh + 32 * h), g1 = vld1q_u8(a[ib].qh + 32 * h + 16);
      const int8_t* y = b[ib].qs + 128 * h;
      auto q = [&](uint8x16_t low, uint8x16_t high) { return vsubq_s8(s8(vorrq_u8(low, high)), off); };
      typename P::Sub16 p[8];
      p[0] = P::dot16(q(vandq_u8(l0, m4), vshlq_n_u8(vandq_u8(g0, m3), 4)), vld1q_s8(y));
      p[1] = P::dot16(q(vandq_u8(l1, m4), vshlq_n_u8(vandq_u8(g1, m3), 4)), vld1q_s8(y + 16));
      p[2] = P::dot16(q(vandq_u8(l2, m4), vandq_u8(vshlq_n_u8(g0, 2), m30)), vld1q_s8(y + 32));
      p[3] = P::dot16(q(vandq_u8(l3, m4), vandq_u8(vshlq_n_u8(g1, 2), m30)), vld1q_s8(y + 48));
      p[4] = P::dot16(q(vshrq_n_u8(l0, 4), vandq_u8(g0, m30)), vld1q_s8(y + 64));
      p[5] = P::dot16(q(vshrq_n_u8(l1, 4), vandq_u8(g1, m30)), vld1q_s8(y + 80));
      p[6] = P::dot16(q(vshrq_n_u8(l2, 4), vandq_u8(vshrq_n_u8(g0, 2), m30)), vld1q_s8(y + 96));
      p[7] = P::dot16(q(vshrq_n_u8(l3, 4), vandq_u8(vshrq_n_u8(g1, 2), m30)), vld1q_s8(y + 112));
      acc = vmlaq_s32(acc, P::sums4_16(p[0], p[1], p[2], p[3]), sc[2 * h]);
      acc = vmlaq_s32(acc, P::sums4_16(p[4], p[5], p[6], p[7]), sc[2 * h + 1]);
    }
    s += b[ib].d * fp16(a[ib].d) * static_cast<float>(vaddvq_s32(acc));
  }
  return s;
}

// Sub-block j: an IQ4_NL-ordered block of 32 in qs[16j ..], its 6-bit scale minus 32.
template <class P>
float vec_dot_iq4_xs_impl(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const BlockIQ4_XS*>(w);
  const auto* b = static_cast<const BlockQ8_K*>(x);
  const int8x16_t table = iq4nl_table();
  float s = 0.0f;
  for (int64_t ib = 0; ib < n / kQKK; ++ib) {
    int32_t ls[8];
    iq4_xs_scales(a[ib], ls);
    int32x4_t acc = vdupq_n_s32(0);
    #pragma GCC unroll 2
    for (int half = 0; half < 2; ++half) {
      int32x4_t p[4];
      #pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {
        const int j = 4 * half + k;
        const Nibbles q = nibbles(a[ib].qs + 16 * j);
        const int8_t* y = b[ib].qs + 32 * j;
        p[k] = P::dot32_wide(vqtbl1q_s8(table, q.lo), vqtbl1q_s8(table, q.hi), vld1q_s8(y), vld1q_s8(y + 16));
      }
      acc = vmlaq_s32(acc, hsum4(p[0], p[1], p[2], p[3]), vld1q_s32(ls + 4 * half));
    }
    s += b[ib].d * fp16(a[ib].d) * static_cast<float>(vaddvq_s32(acc));
  }
  return s;
}

}  // namespace minfer::cpu::MINFER_ISA
