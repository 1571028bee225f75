#version 450
#extension GL_GOOGLE_include_directive : require
// Rotary position embedding (graph/ops.h kRope), f32 x [hd, n_head, n_tokens], I32 positions,
// optional f32 frequency factors [n_rot/2]. Pair i < n_rot/2 of a head at position p:
// theta_i = freq_scale * p * base^(-2i/n_rot) / factor_i, the power built by repeated f32
// multiplication as the CPU backend and llama.cpp do. NORM pairs (2i, 2i+1), NEOX (i, i + n_rot/2).
// The cos and sin of the angles come from a table the backend fills on the host before each
// submission with the CPU backend's own computation (libm's cosf and sinf: the driver's differ
// in the last bits), [n_tokens][2][n_rot/2]; the rotation is the CPU's, y0 = fma(a, c, -(b s)),
// y1 = fma(a, s, b c). Without a table (use_table 0) the angles are computed here.
// One invocation per pair (it reads both elements before writing: safe in place), and one per
// element past n_rot (copied).
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Pos { int pos[]; };
layout(std430, binding = 2) writeonly buffer D { float d[]; };
layout(std430, binding = 3) readonly buffer F { float factors[]; };
layout(std430, binding = 4) readonly buffer T { float tab[]; };
layout(push_constant) uniform P {
  uint hd, n_head, n_tokens, n_rot;
  uint neox;
  float theta_scale, freq_scale;
  uint has_factors;
  uint off_x, off_pos, off_d, off_f;
  uint off_tab, use_table;
} p;
#include "exact.glsl"
void main() {
  const uint j = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 256u;
  const uint half_rot = p.n_rot / 2u;
  const uint per_head = half_rot + (p.hd - p.n_rot);
  if (j >= per_head * p.n_head * p.n_tokens) return;
  const uint row = j / per_head;  // token * n_head + head
  const uint k = j % per_head;
  const uint t = row / p.n_head;
  const uint base = row * p.hd;
  if (k >= half_rot) {
    const uint e = p.n_rot + (k - half_rot);
    d[p.off_d + base + e] = x[p.off_x + base + e];
    return;
  }
  float c, s;
  if (p.use_table == 1u) {
    c = tab[p.off_tab + t * 2u * half_rot + k];
    s = tab[p.off_tab + t * 2u * half_rot + half_rot + k];
  } else {
    float theta = float(pos[p.off_pos + t]);
    for (uint i = 0u; i < k; ++i) theta *= p.theta_scale;
    const float th = p.freq_scale * (p.has_factors == 1u ? theta / factors[p.off_f + k] : theta);
    c = cos(th);
    s = sin(th);
  }
  const uint ia = p.neox == 1u ? k : 2u * k;
  const uint ib = p.neox == 1u ? k + half_rot : 2u * k + 1u;
  const float a = x[p.off_x + base + ia], b = x[p.off_x + base + ib];
  precise float bs = b * s;
  precise float bc = b * c;
  const float y0 = FMA(a, c, -bs);
  const float y1 = FMA(a, s, bc);
  d[p.off_d + base + ia] = y0;
  d[p.off_d + base + ib] = y1;
}
