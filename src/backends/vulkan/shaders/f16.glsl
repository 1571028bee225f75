// fp32 -> fp16 conversion with core/fp16.h's rules (round to nearest even, overflow to inf, NaN
// kept quiet with its top mantissa bits), for shaders that must round as the CPU does: glslc's
// packHalf2x16 leaves the rounding to the driver.
uint f16_bits(float f) {
  const uint u = floatBitsToUint(f);
  const uint sign = (u >> 16) & 0x8000u;
  const uint ax = u & 0x7fffffffu;
  if (ax >= 0x7f800000u) return sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u | ((ax >> 13) & 0x3ffu) : 0u);
  if (ax >= 0x477ff000u) return sign | 0x7c00u;
  if (ax < 0x38800000u) {
    if (ax < 0x33000000u) return sign;
    const uint e = ax >> 23, m = (ax & 0x7fffffu) | 0x800000u, shift = 126u - e;
    uint q = m >> shift;
    const uint rem = m & ((1u << shift) - 1u), hw = 1u << (shift - 1u);
    if (rem > hw || (rem == hw && (q & 1u) != 0u)) q++;
    return sign | q;
  }
  uint r = ax - 0x38000000u;
  r += 0xfffu + ((r >> 13) & 1u);
  return sign | (r >> 13);
}
// f rounded to the nearest f16, as f32.
float round_f16(float f) { return unpackHalf2x16(f16_bits(f)).x; }
