#version 450
#extension GL_GOOGLE_include_directive : require
// out[t][o] = sum_i w[o][i] * x[t][i] (graph/ops.h kMatmul): w in its GGUF type (F32, F16,
// Q8_0, Q4_0; raw bytes, dequantized here), x and out f32. One workgroup per output row o: its
// 64 invocations stride over the row's blocks of 32, each dequantizing a block once per token
// and summing in f32, then a tree in shared memory. A first, simple kernel: correctness first;
// the decode mat-vec and the tiled prefill kernels of issue 40 replace it.
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer W { uint w[]; };
layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(std430, binding = 2) writeonly buffer D { float d[]; };
layout(push_constant) uniform P {
  uint n_in, n_out, n_tok;
  uint type;       // 0 F32, 1 F16, 2 Q8_0, 3 Q4_0
  uint row_bytes;  // bytes of one weight row
  uint off_w;      // in bytes
  uint off_x, off_d;
} p;
shared float part[64];
#include "dequant.glsl"
void main() {
  const uint o = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
  if (o >= p.n_out) return;
  const uint tid = gl_LocalInvocationID.x;
  const uint r = p.off_w + o * p.row_bytes;
  for (uint t = 0u; t < p.n_tok; ++t) {
    const uint xb = p.off_x + t * p.n_in;
    float s = 0.0;
    for (uint b = tid; b * 32u < p.n_in; b += 64u) {
      const uint end = min(b * 32u + 32u, p.n_in);
      for (uint i = b * 32u; i < end; ++i) s += weight(p.type, r, i) * x[xb + i];
    }
    part[tid] = s;
    barrier();
    for (uint k = 32u; k > 0u; k >>= 1) {
      if (tid < k) part[tid] += part[tid + k];
      barrier();
    }
    if (tid == 0u) d[p.off_d + t * p.n_out + o] = part[0];
    barrier();
  }
}
