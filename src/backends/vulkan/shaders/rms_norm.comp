#version 450
#extension GL_GOOGLE_include_directive : require
// dst row = x / sqrt(mean(x^2) + eps), times w when fused (graph/ops.h: kRmsNorm, kRmsNormMul).
// One workgroup per row: each invocation sums a strided part of the squares, then a tree in
// shared memory; f32 sums (the CPU sums in double, llama.cpp's order): compared by NMSE. The
// exact variant (MINFER_EXACT, exact.glsl) takes the CPU's sum: the f32 squares added in double
// in element order by one invocation, mean = f32(sum / n), 1 / sqrt(mean + eps).
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer A { float a[]; };
layout(std430, binding = 1) readonly buffer W { float w[]; };
layout(std430, binding = 2) writeonly buffer D { float d[]; };
layout(push_constant) uniform P {
  uint ne0;
  uint n_rows;
  float eps;
  uint with_w;  // 1: multiply by w (one row)
  uint off_a, off_w, off_d;
} p;
shared float part[256];
#include "exact.glsl"
void main() {
  const uint row = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
  if (row >= p.n_rows) return;
  const uint t = gl_LocalInvocationID.x;
  const uint base = p.off_a + row * p.ne0;
#ifdef MINFER_EXACT
  if (t == 0u) {
    double sum = 0.0;
    for (uint i = 0u; i < p.ne0; ++i) {
      precise float sq = a[base + i] * a[base + i];
      sum += double(sq);
    }
    part[0] = float(sum / double(p.ne0));
  }
  barrier();
  precise float me = part[0] + p.eps;
  const float scale = 1.0 / sqrt(me);
#else
  float s = 0.0;
  for (uint i = t; i < p.ne0; i += 256u) {
    const float x = a[base + i];
    s += x * x;
  }
  part[t] = s;
  barrier();
  for (uint k = 128u; k > 0u; k >>= 1) {
    if (t < k) part[t] += part[t + k];
    barrier();
  }
  const float scale = 1.0 / sqrt(part[0] / float(p.ne0) + p.eps);
#endif
  for (uint i = t; i < p.ne0; i += 256u) {
    const float y = a[base + i] * scale;
    d[p.off_d + row * p.ne0 + i] = p.with_w == 1u ? y * w[p.off_w + i] : y;
  }
}
