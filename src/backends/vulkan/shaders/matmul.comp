#version 450
#extension GL_GOOGLE_include_directive : require
// out[t][o] = sum_i w[o][i] * x[t][i] (graph/ops.h kMatmul): w in its GGUF type (raw bytes,
// dequantized here by dequant.glsl; the type is a specialization constant, so each pipeline
// holds one type's code), x and out f32.
// One invocation per output row and tile of up to 8 tokens: it walks its row once, dequantizing
// each weight once for the tile's tokens, and keeps the 8 sums in registers (f32, in row order:
// no reduction tree, no barrier). A workgroup is 64 consecutive rows of one token tile; the x
// values are the same for all its invocations. Decode (one token) and prefill share it; the
// activations stay f32 (the CPU rounds them to Q8_0 / Q8_K, llama.cpp's CPU and Vulkan prefill
// paths too).
layout(local_size_x = 64) in;
layout(constant_id = 0) const uint TYPE = 0;  // dequant.glsl's type numbers
layout(std430, binding = 0) readonly buffer W { uint w[]; };
layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(std430, binding = 2) writeonly buffer D { float d[]; };
layout(push_constant) uniform P {
  uint n_in, n_out, n_tok;
  uint type_unused;
  uint row_bytes;  // bytes of one weight row
  uint off_w;      // in bytes
  uint off_x, off_d;
  uint row_groups;  // workgroups along the rows (the grid's x, unrolled over y past 65535)
  uint out_stride;  // floats between two tokens' output rows (n_out, or more for a row range)
} p;
#include "dequant.glsl"
const uint TT = 8u;
void main() {
  const uint wg = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
  const uint o = (wg % p.row_groups) * 64u + gl_LocalInvocationID.x;
  const uint t0 = (wg / p.row_groups) * TT;
  if (o >= p.n_out || t0 >= p.n_tok) return;
  const uint nt = min(TT, p.n_tok - t0);
  const uint r = p.off_w + o * p.row_bytes;
  float acc[TT];
  for (uint t = 0u; t < TT; ++t) acc[t] = 0.0;
  const uint xb = p.off_x + t0 * p.n_in;
  if (TYPE == 5u || TYPE == 7u) {
    // Q4_1, Q5_1: per block d * sum(q * x') + m * s, s = the block's f16(d_x * sum(q_x)) after
    // the x values (act_round mode 5), as the CPU's Q8_1 dot product takes the minimums.
    const uint bytes = TYPE == 5u ? 20u : 24u;
    const uint sb = p.off_x + p.n_tok * p.n_in;  // the blocks' sums, [n_tok][n_in / 32]
    for (uint b = 0u; b < p.n_in / 32u; ++b) {
      const uint bo = r + b * bytes;
      float part[TT];
      for (uint t = 0u; t < TT; ++t) part[t] = 0.0;
      for (uint j = 0u; j < 32u; ++j) {
        uint q;
        if (TYPE == 5u) q = nibble32(bo + 4u, j);
        else q = nibble32(bo + 8u, j) | (((byte_at(bo + 4u + (j >> 3)) >> (j & 7u)) & 1u) << 4);
        for (uint t = 0u; t < nt; ++t) part[t] += float(q) * x[xb + t * p.n_in + 32u * b + j];
      }
      const float dw = f16_at(bo), mw = f16_at(bo + 2u);
      for (uint t = 0u; t < nt; ++t) {
        precise float a = dw * part[t];
        precise float c = mw * x[sb + (t0 + t) * (p.n_in / 32u) + b];
        precise float e = acc[t] + a;
        acc[t] = e + c;
      }
    }
  } else {
    for (uint i = 0u; i < p.n_in; ++i) {
      const float v = weight(TYPE, r, i);
      for (uint t = 0u; t < nt; ++t) acc[t] += v * x[xb + t * p.n_in + i];
    }
  }
  for (uint t = 0u; t < nt; ++t) d[p.off_d + (t0 + t) * p.out_stride + o] = acc[t];
}
