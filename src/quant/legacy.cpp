// Q4_0, Q4_1, Q5_0, Q5_1, Q8_0: blocks of 32 weights with one fp16 scale (and an fp16 minimum
// for the _1 types). Layouts and bit diagrams: blocks.h and docs/formats.md.
//
// The quantizers reproduce gguf-py (gguf.quants.quantize) bit for bit, which also matches
// ggml's *_ref quantizers on every block with a non-zero element. The rules that matter:
//   - scale from the signed value of largest magnitude (first one on ties) for Q4_0/Q5_0,
//     from max - min for Q4_1/Q5_1, from max |x| for Q8_0; d and 1/d stay in fp32, only the
//     stored scale is rounded to fp16, and a zero scale gives 1/d = 0;
//   - Q4_*/Q5_* round with truncation of (x * id + offset + 0.5), not round-to-nearest-even;
//     Q8_0 rounds half away from zero (roundf);
//   - an all-zero Q4_0/Q5_0 block stores d = -0.0 / -8 = -0 (0x8000) when x[0] is +0, as
//     gguf-py does (ggml starts from max = +0 and always gets -0);
//   - 1/d overflows to inf when d is subnormal (block maximum below ~2^-125): x * id is then
//     inf or NaN and the integer conversion yields 0, as numpy's (and x86's) float-to-int
//     conversion does for out-of-range values.
#include <cmath>
#include <cstring>

#include "core/fp16.h"
#include "quant/blocks.h"
#include "quant/internal.h"

namespace minfer::quant_detail {
namespace {

// Index of the element of largest magnitude, the first one on ties (numpy's argmax of |x|).
// A NaN wins at once, as argmax returns the first NaN.
int argmax_abs(const float* x, int n) {
  int best = 0;
  if (std::isnan(x[0])) return 0;
  for (int i = 1; i < n; ++i) {
    if (std::isnan(x[i])) return i;
    if (std::fabs(x[i]) > std::fabs(x[best])) best = i;
  }
  return best;
}

struct MinMax {
  float min, max;
};

// Smallest and largest element (first one on ties); a NaN anywhere makes both NaN.
MinMax min_max(const float* x, int n) {
  MinMax r{x[0], x[0]};
  for (int i = 0; i < n; ++i) {
    if (std::isnan(x[i])) return {x[i], x[i]};
    if (x[i] < r.min) r.min = x[i];
    if (x[i] > r.max) r.max = x[i];
  }
  return r;
}

// Float to integer as numpy's astype does on x86: truncate toward zero and keep the low bits;
// NaN, inf and values beyond int32 give 0 (cvttss2si returns 0x80000000, whose low byte is 0).
int32_t to_int_wrapping(float t) {
  if (!(std::fabs(t) < 2147483648.0f)) return 0;
  return static_cast<int32_t>(t);
}

// trunc(v) converted to uint8 as numpy's astype(np.uint8), then clipped to [0, qmax].
uint8_t trunc_to_level(float v, int qmax) {
  const auto u = static_cast<uint8_t>(to_int_wrapping(std::trunc(v)) & 0xff);
  return u > qmax ? static_cast<uint8_t>(qmax) : u;
}

float inverse_or_zero(float d) { return d == 0.0f ? 0.0f : 1.0f / d; }

// q[32] 4-bit levels -> qs[16]: low nibble element j, high nibble element j + 16.
void pack_nibbles(const uint8_t* q, uint8_t* qs) {
  for (int j = 0; j < kQK / 2; ++j)
    qs[j] = static_cast<uint8_t>((q[j] & 0x0f) | ((q[j + kQK / 2] & 0x0f) << 4));
}

// q[32] 5-bit levels -> bit 4 of element i at bit i of qh (little-endian u32).
void pack_high_bits(const uint8_t* q, uint8_t* qh) {
  uint32_t bits = 0;
  for (int i = 0; i < kQK; ++i) bits |= static_cast<uint32_t>((q[i] >> 4) & 1) << i;
  std::memcpy(qh, &bits, 4);
}

// Element i of a 32-element block from qs[16]: low nibbles first, then high nibbles.
int nibble(const uint8_t* qs, int i) {
  return i < kQK / 2 ? (qs[i] & 0x0f) : (qs[i - kQK / 2] >> 4);
}

int high_bit(const uint8_t* qh, int i) {
  uint32_t bits;
  std::memcpy(&bits, qh, 4);
  return static_cast<int>((bits >> i) & 1);
}

// Symmetric 4/5-bit block (Q4_0: nmax = 8, Q5_0: nmax = 16): d = x_absmax_signed / -nmax,
// q = trunc(x / d + nmax + 0.5) clipped to 2 * nmax - 1.
float quantize_symmetric(const float* x, int nmax, uint8_t* q) {
  const float max = x[argmax_abs(x, kQK)];
  const float d = max / static_cast<float>(-nmax);
  const float id = inverse_or_zero(d);
  const float offset = static_cast<float>(nmax) + 0.5f;
  for (int i = 0; i < kQK; ++i) q[i] = trunc_to_level(x[i] * id + offset, 2 * nmax - 1);
  return d;
}

// Asymmetric block (Q4_1: levels 15, Q5_1: 31): d = (max - min) / levels,
// q = trunc((x - min) / d + 0.5) clipped to levels.
float quantize_affine(const float* x, int levels, uint8_t* q, float* min_out) {
  const MinMax mm = min_max(x, kQK);
  const float d = (mm.max - mm.min) / static_cast<float>(levels);
  const float id = inverse_or_zero(d);
  for (int i = 0; i < kQK; ++i) q[i] = trunc_to_level((x[i] - mm.min) * id + 0.5f, levels);
  *min_out = mm.min;
  return d;
}

}  // namespace

// ---- Q4_0 -------------------------------------------------------------------------------

void dequantize_q4_0(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ4_0*>(src);
  for (int64_t ib = 0; ib < n / kQK; ++ib, dst += kQK) {
    const float d = fp16_to_fp32(b[ib].d);
    for (int i = 0; i < kQK; ++i) dst[i] = d * static_cast<float>(nibble(b[ib].qs, i) - 8);
  }
}

void quantize_q4_0(const float* src, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ4_0*>(dst);
  uint8_t q[kQK];
  for (int64_t ib = 0; ib < n / kQK; ++ib, src += kQK) {
    b[ib].d = fp32_to_fp16(quantize_symmetric(src, 8, q));
    pack_nibbles(q, b[ib].qs);
  }
}

// ---- Q4_1 -------------------------------------------------------------------------------

void dequantize_q4_1(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ4_1*>(src);
  for (int64_t ib = 0; ib < n / kQK; ++ib, dst += kQK) {
    const float d = fp16_to_fp32(b[ib].d);
    const float m = fp16_to_fp32(b[ib].m);
    for (int i = 0; i < kQK; ++i) dst[i] = d * static_cast<float>(nibble(b[ib].qs, i)) + m;
  }
}

void quantize_q4_1(const float* src, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ4_1*>(dst);
  uint8_t q[kQK];
  for (int64_t ib = 0; ib < n / kQK; ++ib, src += kQK) {
    float min;
    b[ib].d = fp32_to_fp16(quantize_affine(src, 15, q, &min));
    b[ib].m = fp32_to_fp16(min);
    pack_nibbles(q, b[ib].qs);
  }
}

// ---- Q5_0 -------------------------------------------------------------------------------

void dequantize_q5_0(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ5_0*>(src);
  for (int64_t ib = 0; ib < n / kQK; ++ib, dst += kQK) {
    const float d = fp16_to_fp32(b[ib].d);
    for (int i = 0; i < kQK; ++i) {
      const int q = nibble(b[ib].qs, i) | (high_bit(b[ib].qh, i) << 4);
      dst[i] = d * static_cast<float>(q - 16);
    }
  }
}

void quantize_q5_0(const float* src, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ5_0*>(dst);
  uint8_t q[kQK];
  for (int64_t ib = 0; ib < n / kQK; ++ib, src += kQK) {
    b[ib].d = fp32_to_fp16(quantize_symmetric(src, 16, q));
    pack_high_bits(q, b[ib].qh);
    pack_nibbles(q, b[ib].qs);
  }
}

// ---- Q5_1 -------------------------------------------------------------------------------

void dequantize_q5_1(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ5_1*>(src);
  for (int64_t ib = 0; ib < n / kQK; ++ib, dst += kQK) {
    const float d = fp16_to_fp32(b[ib].d);
    const float m = fp16_to_fp32(b[ib].m);
    for (int i = 0; i < kQK; ++i) {
      const int q = nibble(b[ib].qs, i) | (high_bit(b[ib].qh, i) << 4);
      dst[i] = d * static_cast<float>(q) + m;
    }
  }
}

void quantize_q5_1(const float* src, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ5_1*>(dst);
  uint8_t q[kQK];
  for (int64_t ib = 0; ib < n / kQK; ++ib, src += kQK) {
    float min;
    b[ib].d = fp32_to_fp16(quantize_affine(src, 31, q, &min));
    b[ib].m = fp32_to_fp16(min);
    pack_high_bits(q, b[ib].qh);
    pack_nibbles(q, b[ib].qs);
  }
}

// ---- Q8_0 -------------------------------------------------------------------------------

void dequantize_q8_0(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ8_0*>(src);
  for (int64_t ib = 0; ib < n / kQK; ++ib, dst += kQK) {
    const float d = fp16_to_fp32(b[ib].d);
    for (int i = 0; i < kQK; ++i) dst[i] = static_cast<float>(b[ib].qs[i]) * d;
  }
}

// d = max|x| / 127, q = round-half-away(x / d): |q| <= 127 by construction.
void quantize_q8_0(const float* src, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ8_0*>(dst);
  for (int64_t ib = 0; ib < n / kQK; ++ib, src += kQK) {
    float amax = std::fabs(src[0]);
    for (int i = 1; i < kQK; ++i) {
      const float a = std::fabs(src[i]);
      if (std::isnan(amax)) break;
      if (std::isnan(a) || a > amax) amax = a;
    }
    const float d = amax / 127.0f;
    const float id = inverse_or_zero(d);
    b[ib].d = fp32_to_fp16(d);
    for (int i = 0; i < kQK; ++i)
      b[ib].qs[i] = static_cast<int8_t>(to_int_wrapping(std::round(src[i] * id)) & 0xff);
  }
}

}  // namespace minfer::quant_detail
