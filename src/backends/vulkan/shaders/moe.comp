#version 450
#extension GL_GOOGLE_include_directive : require
// The routing ops of a mixture of experts (graph/ops.h), as the CPU backend computes them
// (cpu/ops-moe.cpp):
//   mode 0  top_k       x [n, T] -> I32 [k, T]: the k largest, largest first, ties to the lower
//                       index, NaN below everything (one invocation per row)
//   mode 1  moe_weights logits [n, T], ids [k, T] -> [k, T]: softmax of the row (its max
//                       subtracted, the exps summed in double) at the ids; normalized: divided by
//                       max(their sum, 2^-14) (one invocation per row)
//   mode 2  moe_sum     e [n, k, T], w [k, T] -> [n, T]: e_0 w_0 + e_1 w_1 + ... in order (one
//                       invocation per output)
// I32 values travel as float bits through the float buffers.
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer A { float a[]; };
layout(std430, binding = 1) readonly buffer B { float b[]; };
layout(std430, binding = 2) writeonly buffer D { float d[]; };
layout(push_constant) uniform P {
  uint mode, n, k, n_rows;  // n: row length (experts, or e's ne0); n_rows: rows (T)
  uint norm;
  uint off_a, off_b, off_d;
} p;
#include "exact.glsl"

float rank(uint row, uint i) {
  const float v = a[p.off_a + row * p.n + i];
  return isnan(v) ? -1.0 / 0.0 : v;
}

void main() {
  const uint g = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 64u;
  if (p.mode == 2u) {
    if (g >= p.n * p.n_rows) return;
    const uint t = g / p.n, i = g % p.n;
    const uint e = p.off_a + t * p.k * p.n + i, w = p.off_b + t * p.k;
    precise float y = a[e] * b[w];
    for (uint j = 1u; j < p.k; ++j) {
      precise float pr = a[e + j * p.n] * b[w + j];
      precise float s = y + pr;
      y = s;
    }
    d[p.off_d + g] = y;
    return;
  }
  if (g >= p.n_rows) return;
  const uint row = g;
  if (p.mode == 0u) {
    uint taken[8] = uint[8](0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u);  // bitmask of chosen indices (n <= 256)
    for (uint j = 0u; j < p.k; ++j) {
      uint best = 0xffffffffu;
      for (uint i = 0u; i < p.n; ++i) {
        if ((taken[i >> 5] & (1u << (i & 31u))) != 0u) continue;
        if (best == 0xffffffffu || rank(row, i) > rank(row, best)) best = i;
      }
      taken[best >> 5] |= 1u << (best & 31u);
      d[p.off_d + row * p.k + j] = intBitsToFloat(int(best));
    }
    return;
  }
  const uint base = p.off_a + row * p.n;
  float mx = a[base];
  for (uint i = 1u; i < p.n; ++i) mx = max(mx, a[base + i]);
#ifdef MINFER_EXACT
  double sum = 0.0LF;
  for (uint i = 0u; i < p.n; ++i) sum += double(EXP(a[base + i] - mx));
  const float inv = float(1.0LF / sum);
#else
  float sum = 0.0;
  for (uint i = 0u; i < p.n; ++i) sum += EXP(a[base + i] - mx);
  const float inv = 1.0 / sum;
#endif
  float sel = 0.0;
  float y[8];
  for (uint j = 0u; j < p.k; ++j) {
    const uint e = uint(floatBitsToInt(b[p.off_b + row * p.k + j]));
    precise float v = EXP(a[base + min(e, p.n - 1u)] - mx) * inv;
    y[j] = v;
    precise float s = sel + v;
    sel = s;
  }
  const float dn = max(sel, 6.103515625e-5);
  for (uint j = 0u; j < p.k; ++j) d[p.off_d + row * p.k + j] = p.norm == 1u ? y[j] / dn : y[j];
}
