#version 450
#extension GL_GOOGLE_include_directive : require
// Activations, f32 (graph/ops.h), evaluated as the CPU backend does: silu x / (1 + e^-x) with
// e^-x by the CPU's exp_poly (cpu/kernels.cpp: the same fused multiply-adds in the same order)
// for the first ne0 / 16 * 16 elements of a row and the driver's exp for the rest (the CPU:
// libm's); gelu, tanh approximation (x rounded to f16, the f32 formula, the result rounded to
// f16; 0 below -10, x above 10); softcap c * tanh(x / c). With a gate (swiglu, geglu) the
// result times src1. Offsets in elements into the bound ranges.
// Bit-identical to the CPU where fma() is fused; lavapipe computes it as a product and a sum
// (measured: 16 of 64 values of fma(x, x, -1) differ) and takes the exact variant (exact.glsl).
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer A { float a[]; };
layout(std430, binding = 1) readonly buffer B { float b[]; };
layout(std430, binding = 2) writeonly buffer D { float d[]; };
layout(push_constant) uniform P {
  uint n;
  uint op;     // 0 silu, 1 gelu, 2 softcap
  uint gated;  // 1: times b
  float c;     // softcap's cap
  uint off_a, off_b, off_d;
  uint ne0;    // row length
} p;
#include "f16.glsl"
#include "exact.glsl"

void main() {
  const uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 256u;
  if (i >= p.n) return;
  const float x = a[p.off_a + i];
  precise float y;
  if (p.op == 0u) {
    const bool poly = i % p.ne0 < p.ne0 / 16u * 16u;
    precise float nx = 0.0 - x;
    precise float e = poly ? exp_poly(nx) : EXP(nx);
    precise float den = 1.0 + e;
    y = x / den;
  } else if (p.op == 1u) {
    if (x <= -10.0) {
      y = 0.0;
    } else if (x >= 10.0) {
      y = x;
    } else {
      const float h = round_f16(x);
      y = round_f16(0.5 * h * (1.0 + TANH(0.79788456080286535587989211986876 * h * (1.0 + 0.044715 * h * h))));
    }
  } else {
    precise float ic = 1.0 / p.c;  // the CPU's c * tanh(x * (1 / c))
    precise float xc = x * ic;
    y = TANH(xc) * p.c;
  }
  precise float g = p.gated == 1u ? y * b[p.off_b + i] : y;
  d[p.off_d + i] = g;
}
