// Scalar half-precision conversions.
//   fp16_to_fp32: exact; NaN payloads are kept as they are (a signalling NaN stays signalling),
//                 as numpy's float16 -> float32 cast does (gcc's _Float16 quiets them instead).
//   fp32_to_fp16: IEEE 754 round-to-nearest-even, overflow to inf; a NaN becomes a quiet NaN
//                 keeping the top 10 mantissa bits, exactly as gcc's _Float16 conversion. numpy
//                 agrees on every input but signalling NaNs (it keeps them signalling); ggml's
//                 scalar path returns 0x7e00 for every NaN.
//   bf16_to_fp32: exact (the bf16 bits are the top half of the fp32 bits).
//   fp32_to_bf16: round-to-nearest-even on the top 16 bits, NaN forced quiet (| 0x40), as ggml
//                 and gguf-py.
// All four are checked in tests/unit/test-core-fp16.cpp.
//
//   uint16_t h = fp32_to_fp16(1.5f);   // 0x3e00
//   float f = fp16_to_fp32(h);
#pragma once

#include <cstdint>
#include <cstring>

namespace minfer {

inline uint32_t f32_bits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
inline float bits_f32(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }

inline float fp16_to_fp32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    if (mant == 0) return bits_f32(sign);
    // Subnormal: value = mant * 2^-24.
    float v = static_cast<float>(mant) * 5.9604644775390625e-8f;
    return sign ? -v : v;
  }
  if (exp == 31) return bits_f32(sign | 0x7f800000u | (mant << 13));
  return bits_f32(sign | ((exp + 112) << 23) | (mant << 13));
}

inline uint16_t fp32_to_fp16(float f) {
  const uint32_t x = f32_bits(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) {  // inf or nan
    return static_cast<uint16_t>(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u | ((ax >> 13) & 0x3ffu) : 0));
  }
  if (ax >= 0x477ff000u) return sign | 0x7c00u;  // rounds to >= 65520 -> inf
  if (ax < 0x38800000u) {
    // Result is subnormal or zero: value / 2^-24 rounded to nearest even.
    if (ax < 0x33000000u) return sign;  // < 2^-25 -> 0
    const uint32_t e = ax >> 23;
    const uint32_t m = (ax & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - e;  // 14..24+
    uint32_t q = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (q & 1))) q++;
    return static_cast<uint16_t>(sign | q);
  }
  // Normal: rebias the exponent, round the mantissa to 10 bits (nearest even).
  uint32_t r = ax - 0x38000000u;  // exponent 127 -> 15
  const uint32_t lsb = (r >> 13) & 1u;
  r += 0xfffu + lsb;
  return static_cast<uint16_t>(sign | (r >> 13));
}

inline float bf16_to_fp32(uint16_t h) { return bits_f32(static_cast<uint32_t>(h) << 16); }

inline uint16_t fp32_to_bf16(float f) {
  uint32_t x = f32_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 64);  // quiet NaN
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

}  // namespace minfer
