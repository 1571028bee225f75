// 128-bit float helpers shared by the NEON float kernels (float-neon.cpp, silu-neon.cpp, the
// attn-*-neon.cpp files): f16 <-> f32 by FCVTL / FCVTN (round to nearest even, subnormals,
// infinities and NaN payloads as core/fp16.h's fp32_to_fp16; an f16 signalling NaN comes out
// quiet, which no float step after it can tell apart), exp_poly on 4 lanes, the W64 sum of
// kernels.h. An ISA header: its functions are compiled into the including region's namespace
// (isa-begin.h). Internal.
#pragma once
#ifndef MINFER_ISA_REGION
#error "neon-float.h: include it inside an ISA region (isa-begin.h), after every other header"
#endif

#include <arm_neon.h>

#include <cstdint>

#include "backends/cpu/kernels.h"

namespace minfer::cpu::MINFER_ISA {

inline float32x4_t load_f16x4(const uint16_t* p) { return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p))); }

// 8 f16 values -> lanes 0-3 in lo, 4-7 in hi.
inline void load_f16x8(const uint16_t* p, float32x4_t& lo, float32x4_t& hi) {
  const float16x8_t h = vreinterpretq_f16_u16(vld1q_u16(p));
  lo = vcvt_f32_f16(vget_low_f16(h));
  hi = vcvt_high_f32_f16(h);
}

inline void store_f16x4(uint16_t* p, float32x4_t v) { vst1_u16(p, vreinterpret_u16_f16(vcvt_f16_f32(v))); }

inline void store_f16x8(uint16_t* p, float32x4_t lo, float32x4_t hi) {
  vst1q_u16(p, vreinterpretq_u16_f16(vcvt_high_f16_f32(vcvt_f16_f32(lo), hi)));
}

// x rounded to f16 and back (an f16 accumulator's value, kept in f32).
inline float32x4_t round_f16(float32x4_t x) { return vcvt_f32_f16(vcvt_f16_f32(x)); }

// A cache row of n values (n % 4 == 0), f16 or f32, widened to f32.
inline void widen_row4(const uint8_t* row, int64_t n, bool f16, float* out) {
  if (f16) {
    const auto* h = reinterpret_cast<const uint16_t*>(row);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
      float32x4_t lo, hi;
      load_f16x8(h + i, lo, hi);
      vst1q_f32(out + i, lo);
      vst1q_f32(out + i + 4, hi);
    }
    if (i < n) vst1q_f32(out + i, load_f16x4(h + i));
  } else {
    const auto* f = reinterpret_cast<const float*>(row);
    for (int64_t i = 0; i < n; i += 4) vst1q_f32(out + i, vld1q_f32(f + i));
  }
}

// exp_poly (kernels.h): n = round(x / ln 2) on 4 lanes, and the result from x and that n where
// |n| <= 126 (2^n a normal number, so p * 2^n rounds once, as ldexp does).
inline float32x4_t exp_poly4_n(float32x4_t x) {
  const float32x4_t shift = vdupq_n_f32(0x1.8p23f);
  return vsubq_f32(vfmaq_f32(shift, x, vdupq_n_f32(0x1.715476p+0f)), shift);
}
inline float32x4_t exp_poly4_normal(float32x4_t x, float32x4_t n) {
  // r = fma(-n, ln2_lo, fma(-n, ln2_hi, x)): FMLS is a - b * c with one rounding
  const float32x4_t r = vfmsq_f32(vfmsq_f32(x, n, vdupq_n_f32(0x1.62e4p-1f)), n, vdupq_n_f32(0x1.7f7d1cp-20f));
  const float32x4_t u = vmulq_f32(r, r);
  const float32x4_t c0r1 = vfmaq_f32(vdupq_n_f32(0x1.573e2ep-5f), vdupq_n_f32(0x1.0e4020p-7f), r);
  const float32x4_t c2r3 = vfmaq_f32(vdupq_n_f32(0x1.fffdb6p-2f), vdupq_n_f32(0x1.555e66p-3f), r);
  const float32x4_t c4r1 = vfmaq_f32(vdupq_n_f32(1.0f), vdupq_n_f32(0x1.ffffecp-1f), r);
  const float32x4_t p = vfmaq_f32(c4r1, vfmaq_f32(c2r3, c0r1, u), u);
  const int32x4_t e = vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(n), vdupq_n_s32(127)), 23);
  return vmulq_f32(p, vreinterpretq_f32_s32(e));  // p * 2^n, exact scaling
}

// exp_poly on 4 lanes of x in [-87, 0].
inline float32x4_t exp_poly4_nonpositive(float32x4_t x) { return exp_poly4_normal(x, exp_poly4_n(x)); }

// exp_poly on 4 lanes; a vector with some |n| > 126 (|x| > ~87) or a NaN goes lane by lane
// through the scalar form, whose 2^n may leave the normal range.
inline float32x4_t exp_poly4(float32x4_t x) {
  const float32x4_t n = exp_poly4_n(x);
  if (vminvq_u32(vcaleq_f32(n, vdupq_n_f32(126.0f))) == 0) {  // |n| <= 126 false somewhere
    alignas(16) float v[4];
    vst1q_f32(v, x);
    for (float& e : v) e = exp_poly(e);
    return vld1q_f32(v);
  }
  return exp_poly4_normal(x, n);
}

// A scheduling fence (no instruction): memory operations stay on their side. GCC 12's pre-RA
// scheduler hoists every load of an unrolled step above the fmas and then spills the
// accumulators it crowds out (w64_dot: 30 stack accesses a step without it, none with it).
inline void sched_fence() { asm volatile("" ::: "memory"); }

// The W64 sum of kernels.h over the first np elements (np % 64 == 0), load(e, x, y) giving
// elements e .. e + 3 of the two operands: vector a_v holds lanes 4 (v % 4) .. + 3 of group
// v / 4, the chain acc = fma(x, y, acc) of elements 64 i + 4 v .. + 3; then (g0 + g2) + (g1 + g3)
// per lane and the 16 lanes halved 16 -> 8 -> 4 -> 2 -> 1. Sixteen named accumulators: GCC
// keeps an array of sixteen vectors in memory.
template <class Load>
[[gnu::always_inline]] inline float w64_dot(int64_t np, Load load) {
  const float32x4_t z = vdupq_n_f32(0.0f);
  float32x4_t a0 = z, a1 = z, a2 = z, a3 = z, a4 = z, a5 = z, a6 = z, a7 = z;
  float32x4_t a8 = z, a9 = z, a10 = z, a11 = z, a12 = z, a13 = z, a14 = z, a15 = z;
  auto group = [&](int64_t e, float32x4_t& c0, float32x4_t& c1, float32x4_t& c2, float32x4_t& c3) {
    float32x4_t x, y;
    load(e, x, y);
    c0 = vfmaq_f32(c0, x, y);
    load(e + 4, x, y);
    c1 = vfmaq_f32(c1, x, y);
    load(e + 8, x, y);
    c2 = vfmaq_f32(c2, x, y);
    load(e + 12, x, y);
    c3 = vfmaq_f32(c3, x, y);
    sched_fence();
  };
  for (int64_t i = 0; i < np; i += 64) {
    group(i, a0, a1, a2, a3);
    group(i + 16, a4, a5, a6, a7);
    group(i + 32, a8, a9, a10, a11);
    group(i + 48, a12, a13, a14, a15);
  }
  const float32x4_t t0 = vaddq_f32(vaddq_f32(a0, a8), vaddq_f32(a4, a12));  // lanes 0-3
  const float32x4_t t1 = vaddq_f32(vaddq_f32(a1, a9), vaddq_f32(a5, a13));  // 4-7
  const float32x4_t t2 = vaddq_f32(vaddq_f32(a2, a10), vaddq_f32(a6, a14)); // 8-11
  const float32x4_t t3 = vaddq_f32(vaddq_f32(a3, a11), vaddq_f32(a7, a15)); // 12-15
  const float32x4_t t4 = vaddq_f32(vaddq_f32(t0, t2), vaddq_f32(t1, t3));   // 16 -> 8 -> 4
  return vpadds_f32(vadd_f32(vget_low_f32(t4), vget_high_f32(t4)));         // 4 -> 2 -> 1
}

}  // namespace minfer::cpu::MINFER_ISA
