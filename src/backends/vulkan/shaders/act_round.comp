#version 450
#extension GL_GOOGLE_include_directive : require
// The activations of a matmul as the CPU backend rounds them before its dot products
// (src/backends/cpu/kernels.h: the weight type's activation type; vec-dot-ref.cpp's quantizers):
//   mode 1  F16 weights: x rounded to f16 (nearest even), as f32
//   mode 2  BF16 weights: x rounded to bf16 (nearest even), as f32
//   mode 3  Q4_0, Q5_0, Q8_0, IQ4_NL (Q8_0): blocks of 32, d = f16(max|x| / 127),
//           q = round-half-even(x * (127 / max|x|))
//   mode 5  Q4_1, Q5_1 (Q8_1): mode 3, and each block's s = f16(d32 * sum(q)) (d32 unrounded)
//   mode 4  K-quants, IQ4_XS (Q8_K): blocks of 256, m = the signed value of largest magnitude
//           (the first), iscale = -127 / m, q = min(127, round-half-even(iscale * x)),
//           d = 1 / iscale, and the sums of q over each 16 elements
// Modes 3-5 write the integers q as floats [n], then d per block, then s per block (mode 5)
// or the 16-element sums (mode 4): matmul.comp takes the CPU's integer dot products from them.
// One invocation per element (modes 1, 2) or per block (3-5).
//   x  [n] f32 (n a multiple of the block)
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 2) writeonly buffer D { float d[]; };
layout(push_constant) uniform P {
  uint n, mode, off_x, off_d;
} p;

#include "f16.glsl"

void main() {
  const uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 64u;
  if (p.mode == 1u || p.mode == 2u) {
    if (i >= p.n) return;
    const float v = x[p.off_x + i];
    if (p.mode == 1u) {
      d[p.off_d + i] = round_f16(v);
    } else {
      uint u = floatBitsToUint(v);
      if ((u & 0x7fffffffu) > 0x7f800000u) u |= 0x400000u;  // NaN: quiet
      else u += 0x7fffu + ((u >> 16) & 1u);
      d[p.off_d + i] = uintBitsToFloat(u & 0xffff0000u);
    }
    return;
  }
  const uint bs = p.mode == 4u ? 256u : 32u;
  if (i >= p.n / bs) return;
  const uint b = p.off_x + i * bs, o = p.off_d + i * bs;
  if (p.mode != 4u) {
    float amax = 0.0;
    for (uint j = 0u; j < 32u; ++j) amax = max(amax, abs(x[b + j]));
    const float d32 = amax / 127.0;
    const float id = amax != 0.0 ? 127.0 / amax : 0.0;
    int sum = 0;
    for (uint j = 0u; j < 32u; ++j) {
      precise float v = x[b + j] * id;
      const float q = roundEven(v);
      sum += int(q);
      d[o + j] = q;
    }
    d[p.off_d + p.n + i] = round_f16(d32);
    precise float s = float(sum) * d32;
    if (p.mode == 5u) d[p.off_d + p.n + p.n / 32u + i] = round_f16(s);
    return;
  }
  float amax = 0.0, m = 0.0;
  for (uint j = 0u; j < 256u; ++j) {
    const float a = abs(x[b + j]);
    if (a > amax) {
      amax = a;
      m = x[b + j];
    }
  }
  const uint bsums = p.off_d + p.n + p.n / 256u + 16u * i;
  if (amax == 0.0) {
    for (uint j = 0u; j < 256u; ++j) d[o + j] = 0.0;
    d[p.off_d + p.n + i] = 0.0;
    for (uint k = 0u; k < 16u; ++k) d[bsums + k] = 0.0;
    return;
  }
  const float iscale = -127.0 / m;
  for (uint k = 0u; k < 16u; ++k) {
    int sum = 0;
    for (uint j = 16u * k; j < 16u * k + 16u; ++j) {
      precise float v = iscale * x[b + j];
      const float q = min(127.0, roundEven(v));
      sum += int(q);
      d[o + j] = q;
    }
    d[bsums + k] = float(sum);
  }
  d[p.off_d + p.n + i] = 1.0 / iscale;
}
