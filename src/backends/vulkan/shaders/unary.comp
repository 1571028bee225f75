#version 450
// Activations, f32 (graph/ops.h): silu x / (1 + e^-x); gelu, tanh approximation evaluated as
// the CPU backend does (x rounded to f16, the f32 formula, the result rounded to f16; 0 below
// -10, x above 10); softcap c * tanh(x / c). With a gate (swiglu, geglu) the result times
// src1. Offsets in elements into the bound ranges.
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
} p;
float f16(float x) { return unpackHalf2x16(packHalf2x16(vec2(x, 0.0))).x; }
void main() {
  const uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 256u;
  if (i >= p.n) return;
  const float x = a[p.off_a + i];
  float y;
  if (p.op == 0u) {
    y = x / (1.0 + exp(-x));
  } else if (p.op == 1u) {
    if (x <= -10.0) {
      y = 0.0;
    } else if (x >= 10.0) {
      y = x;
    } else {
      const float h = f16(x);
      y = f16(0.5 * h * (1.0 + tanh(0.79788456080286535587989211986876 * h * (1.0 + 0.044715 * h * h))));
    }
  } else {
    y = tanh(x / p.c) * p.c;
  }
  d[p.off_d + i] = p.gated == 1u ? y * b[p.off_b + i] : y;
}
