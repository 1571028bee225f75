// ARMv8.0 Advanced SIMD forms of the narrow attention's row kernels (kernels.h: the W64 dot
// products, the f16 and f32 V sums) and of the q8_0 / q4_0 cache rows widened to f32. Each
// is its reference's (vec-dot-ref.cpp) float steps exactly: the W64 lane l of group g is the
// fma chain of elements 64 i + 16 g + l (neon-float.h, w64_dot), the f16 values
// are rounded by FCVTN (nearest even, fp32_to_fp16's bits), the tail adds in double in element
// order. A NEON region (isa-begin.h); kernels-neon.cpp hands the table out.
#include <cmath>
#include <cstdint>

#include "backends/cpu/kernels-neon.h"
#include "backends/cpu/kernels-ref.h"
#include "core/fp16.h"
#include "quant/blocks.h"

#define MINFER_ISA neon
#include "backends/cpu/isa-begin.h"
#include "backends/cpu/neon-float.h"

namespace minfer::cpu::neon {
namespace {

// The cache row of the several-row kernels, widened once to f32 on the stack; longer rows
// (beyond any head size) go to the reference.
constexpr int64_t kMaxRowElems = 512;

// The W64 chains over the first n / 64 * 64 elements, load(e, v) giving elements e .. e + 3 of
// the two operands, then the tail added in double: the reference's sum = a0, sum += x * y.
template <class Load, class Tail>
inline float dot_w64(int64_t n, Load load, Tail tail) {
  const int64_t np = n / 64 * 64;
  double sum = w64_dot(np, load);
  for (int64_t i = np; i < n; ++i) sum += static_cast<double>(tail(i));
  return static_cast<float>(sum);
}

}  // namespace

float dot_w64_f16(int64_t n, const uint16_t* x, const uint16_t* y) {
  return dot_w64(
      n,
      [&](int64_t e, float32x4_t& a, float32x4_t& b) {
        a = load_f16x4(x + e);
        b = load_f16x4(y + e);
      },
      [&](int64_t i) { return fp16_to_fp32(x[i]) * fp16_to_fp32(y[i]); });
}

float dot_w64_f32(int64_t n, const float* x, const float* y) {
  return dot_w64(
      n,
      [&](int64_t e, float32x4_t& a, float32x4_t& b) {
        a = vld1q_f32(x + e);
        b = vld1q_f32(y + e);
      },
      [&](int64_t i) { return x[i] * y[i]; });
}

void mad_f16(int64_t n, uint16_t* y, const uint16_t* x, float v) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    float32x4_t x0, x1, y0, y1;
    load_f16x8(x + i, x0, x1);
    load_f16x8(y + i, y0, y1);
    store_f16x8(y + i, vfmaq_n_f32(y0, x0, v), vfmaq_n_f32(y1, x1, v));  // fma(x, v, y)
  }
  for (; i + 4 <= n; i += 4) store_f16x4(y + i, vfmaq_n_f32(load_f16x4(y + i), load_f16x4(x + i), v));
  for (; i < n; ++i) y[i] = fp32_to_fp16(std::fma(fp16_to_fp32(x[i]), v, fp16_to_fp32(y[i])));
}

// s[r] = the W64 dot of the cache row k (widened once) and query row r, whose f32 values are
// already f16 values: the products and sums of dot_w64_f16 of the rounded row.
void dot_w64_rows_f16(int64_t n, const uint16_t* k, const float* q, int64_t q_stride, int64_t n_rows, float* s) {
  if (n > kMaxRowElems) return ref::dot_w64_rows_f16(n, k, q, q_stride, n_rows, s);
  alignas(16) float kf[kMaxRowElems];  // [n] the cache row in f32
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) vst1q_f32(kf + i, load_f16x4(k + i));
  for (; i < n; ++i) kf[i] = fp16_to_fp32(k[i]);
  for (int64_t r = 0; r < n_rows; ++r) {
    const float* qr = q + r * q_stride;
    s[r] = dot_w64(
        n,
        [&](int64_t e, float32x4_t& a, float32x4_t& b) {
          a = vld1q_f32(kf + e);
          b = vld1q_f32(qr + e);
        },
        [&](int64_t e) { return kf[e] * qr[e]; });
  }
}

// acc row r [i] = f16(fma(v[i], p[r], acc row r [i])), the V row widened once.
void mad_rows_f16(int64_t n, uint16_t* acc, int64_t acc_stride, const uint16_t* v, const float* p, int64_t n_rows) {
  if (n > kMaxRowElems) return ref::mad_rows_f16(n, acc, acc_stride, v, p, n_rows);
  alignas(16) float vf[kMaxRowElems];  // [n] the cache row in f32
  const int64_t n4 = n / 4 * 4;
  for (int64_t i = 0; i < n4; i += 4) vst1q_f32(vf + i, load_f16x4(v + i));
  for (int64_t r = 0; r < n_rows; ++r) {
    uint16_t* y = acc + r * acc_stride;
    const float pr = p[r];
    int64_t i = 0;
    for (; i + 8 <= n4; i += 8) {
      float32x4_t y0, y1;
      load_f16x8(y + i, y0, y1);
      store_f16x8(y + i, vfmaq_n_f32(y0, vld1q_f32(vf + i), pr), vfmaq_n_f32(y1, vld1q_f32(vf + i + 4), pr));
    }
    if (i < n4) store_f16x4(y + i, vfmaq_n_f32(load_f16x4(y + i), vld1q_f32(vf + i), pr));
    for (i = n4; i < n; ++i) y[i] = fp32_to_fp16(std::fma(fp16_to_fp32(v[i]), pr, fp16_to_fp32(y[i])));
  }
}

// acc row r [i] = fma(v[i], p[r], acc row r [i]).
void mad_rows_f32(int64_t n, float* acc, int64_t acc_stride, const float* v, const float* p, int64_t n_rows) {
  for (int64_t r = 0; r < n_rows; ++r) {
    float* y = acc + r * acc_stride;
    const float pr = p[r];
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
      for (int j = 0; j < 16; j += 4) vst1q_f32(y + i + j, vfmaq_n_f32(vld1q_f32(y + i + j), vld1q_f32(v + i + j), pr));
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vfmaq_n_f32(vld1q_f32(y + i), vld1q_f32(v + i), pr));
    for (; i < n; ++i) y[i] = std::fma(v[i], pr, y[i]);
  }
}

namespace {

// 16 signed bytes -> 16 floats d * q in out[0 .. 15] (one exact conversion, one product each).
inline void scale_i8x16(int8x16_t q, float32x4_t d, float* out) {
  const int16x8_t lo = vmovl_s8(vget_low_s8(q)), hi = vmovl_high_s8(q);
  vst1q_f32(out, vmulq_f32(vcvtq_f32_s32(vmovl_s16(vget_low_s16(lo))), d));
  vst1q_f32(out + 4, vmulq_f32(vcvtq_f32_s32(vmovl_high_s16(lo)), d));
  vst1q_f32(out + 8, vmulq_f32(vcvtq_f32_s32(vmovl_s16(vget_low_s16(hi))), d));
  vst1q_f32(out + 12, vmulq_f32(vcvtq_f32_s32(vmovl_high_s16(hi)), d));
}

}  // namespace

// Cache rows to f32 (kernels.h RowToF32Fn): 32 values per block, d * q as one product each.
void row_to_f32_q8_0(int64_t n, const void* x, float* y) {
  const auto* b = static_cast<const BlockQ8_0*>(x);
  for (int64_t ib = 0; ib < n / kQK; ++ib, y += kQK) {
    const float32x4_t d = vdupq_n_f32(fp16_to_fp32(b[ib].d));
    scale_i8x16(vld1q_s8(b[ib].qs), d, y);
    scale_i8x16(vld1q_s8(b[ib].qs + 16), d, y + 16);
  }
}

// Q4_0: elements 0..15 are the low nibbles, 16..31 the high ones, each minus 8.
void row_to_f32_q4_0(int64_t n, const void* x, float* y) {
  const auto* b = static_cast<const BlockQ4_0*>(x);
  const int8x16_t eight = vdupq_n_s8(8);
  for (int64_t ib = 0; ib < n / kQK; ++ib, y += kQK) {
    const float32x4_t d = vdupq_n_f32(fp16_to_fp32(b[ib].d));
    const uint8x16_t qs = vld1q_u8(b[ib].qs);
    scale_i8x16(vsubq_s8(vreinterpretq_s8_u8(vandq_u8(qs, vdupq_n_u8(0x0f))), eight), d, y);
    scale_i8x16(vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(qs, 4)), eight), d, y + 16);
  }
}

}  // namespace minfer::cpu::neon

#include "backends/cpu/isa-end.h"
