#version 450
#extension GL_GOOGLE_include_directive : require
// out[t][o] = sum_i w[o][i] * x[t][i] (graph/ops.h kMatmul): w in its GGUF type (raw bytes; the
// type is a specialization constant, so each pipeline holds one type's code), out f32.
// The CPU backend's dot products, in its float order (cpu/vec-dot-ref.cpp, the spec of its ISA
// kernels), on activations act_round.comp prepared as the CPU quantizes them:
//   F32, F16, BF16: products of the (rounded) values into 8 partial sums (element i to sum
//     i % 8), added pairwise at the end (dot_f32_order);
//   Q4_0, Q5_0, Q8_0, IQ4_NL, Q5_1 (Seq): per block the exact integer sum of weight x Q8 ints,
//     s = fma(d_w * d_x, isum, s) in block order (Q5_1: then s = fma(m_w, s_x, s));
//   Q4_1 (Lanes8): lane l of a block sums elements 4l..4l+3, acc_l = fma(d_w * d_x, lane, acc_l),
//     the mins m_w * s_x summed apart, ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7)) + mins;
//   K-quants, IQ4_XS (Q8_K): per super-block the integer sums by sub-block scales, then
//     s += d_x * (d * sum_q - dmin * sum_m), or s += (d_x * d) * sum.
// Integer sums are exact; with exact.glsl's FMA the result is the CPU reference's bit for bit.
// One invocation per output row and tile of up to 8 tokens: it walks its row once, reading each
// weight once for the tile's tokens; a workgroup is 64 consecutive rows of one token tile.
// matmul_id (MoE): W [n_in, n_out, n_expert], x [n_in, 1 or k, T], ids [k, T] -> [n_out, k, T]:
// a tile is one slot (j, t), its weight rows those of expert ids[j, t], its x row t (or slot).
//   scratch (act_round, modes 3-5): q [n_tok][n_in] (integers as floats), then d per block,
//   then (Q8_1) s per block or (Q8_K) the 16-element sums
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
  uint id_mode;     // 1: matmul_id: each output row is a slot (j, t) of ids [k, T] (one per tile)
  uint k;           // matmul_id: slots per token
  uint x_per_slot;  // matmul_id: x has a row per slot (else one per token)
  uint off_ids;
  uint n_slots;     // matmul_id: k * T
} p;
layout(std430, binding = 3) readonly buffer Ids { int ids[]; };
#include "dequant.glsl"
#include "exact.glsl"
const uint TT = 8u;

uint n_x() { return p.n_tok * p.n_in; }  // n_tok: the x rows
int qx(uint t, uint i) { return int(x[p.off_x + t * p.n_in + i]); }  // token t's Q8 integer i
float xd(uint t, uint b, uint bs) { return x[p.off_x + n_x() + (t * p.n_in) / bs + b]; }  // its block d
float xs(uint t, uint b) { return x[p.off_x + n_x() + n_x() / 32u + t * (p.n_in / 32u) + b]; }  // Q8_1 s
int xbsum(uint t, uint k) { return int(x[p.off_x + n_x() + n_x() / 256u + t * (p.n_in / 16u) + k]); }  // Q8_K

// Element j (< 32) of a 32-element block at byte bo as the integer its dot product takes.
int q32(uint bo, uint j) {
  if (TYPE == 2u) return i8_at(bo + 2u + j);
  if (TYPE == 3u) return int(nibble32(bo + 2u, j)) - 8;
  if (TYPE == 5u) return int(nibble32(bo + 4u, j));
  if (TYPE == 6u) return int(nibble32(bo + 6u, j) | (((byte_at(bo + 2u + (j >> 3)) >> (j & 7u)) & 1u) << 4)) - 16;
  if (TYPE == 7u) return int(nibble32(bo + 8u, j) | (((byte_at(bo + 4u + (j >> 3)) >> (j & 7u)) & 1u) << 4));
  return int(kIq4nl[nibble32(bo + 2u, j)]);  // 8: IQ4_NL
}

void main() {
  const uint wg = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
  const uint o = (wg % p.row_groups) * 64u + gl_LocalInvocationID.x;
  if (o >= p.n_out) return;
  uint t0, nt, r, orow;  // the tile's first x row, its rows, the weight row's byte, its output row
  if (p.id_mode == 1u) {
    const uint slot = wg / p.row_groups;
    if (slot >= p.n_slots) return;
    t0 = p.x_per_slot == 1u ? slot : slot / p.k;
    nt = 1u;
    r = p.off_w + (uint(ids[p.off_ids + slot]) * p.n_out + o) * p.row_bytes;
    orow = slot;
  } else {
    t0 = (wg / p.row_groups) * TT;
    if (t0 >= p.n_tok) return;
    nt = min(TT, p.n_tok - t0);
    r = p.off_w + o * p.row_bytes;
    orow = t0;
  }
  float res[TT];
  if (TYPE == 0u || TYPE == 1u || TYPE == 4u) {  // dot_f32_order
    float acc[TT][8];
    for (uint t = 0u; t < TT; ++t)
      for (uint k = 0u; k < 8u; ++k) acc[t][k] = 0.0;
    for (uint i = 0u; i < p.n_in; ++i) {
      const float v = weight(TYPE, r, i);
      for (uint t = 0u; t < nt; ++t) {
        precise float pr = v * x[p.off_x + (t0 + t) * p.n_in + i];
        precise float sm = acc[t][i & 7u] + pr;
        acc[t][i & 7u] = sm;
      }
    }
    for (uint t = 0u; t < nt; ++t) {
      precise float a = (acc[t][0] + acc[t][4]) + (acc[t][1] + acc[t][5]);
      precise float b = (acc[t][2] + acc[t][6]) + (acc[t][3] + acc[t][7]);
      precise float c = a + b;
      res[t] = c;
    }
  } else if (TYPE == 5u) {  // Q4_1: Lanes8
    float acc[TT][8], mins[TT];
    for (uint t = 0u; t < TT; ++t) {
      mins[t] = 0.0;
      for (uint k = 0u; k < 8u; ++k) acc[t][k] = 0.0;
    }
    for (uint b = 0u; b < p.n_in / 32u; ++b) {
      const uint bo = r + b * 20u;
      const float dw = f16_at(bo), mw = f16_at(bo + 2u);
      int q[32];
      for (uint j = 0u; j < 32u; ++j) q[j] = q32(bo, j);
      for (uint t = 0u; t < nt; ++t) {
        const uint tt = t0 + t;
        precise float dd = dw * xd(tt, b, 32u);
        for (uint l = 0u; l < 8u; ++l) {
          int lane = 0;
          for (uint e = 4u * l; e < 4u * l + 4u; ++e) lane += q[e] * qx(tt, 32u * b + e);
          acc[t][l] = FMA(dd, float(lane), acc[t][l]);
        }
        precise float mp = mw * xs(tt, b);
        precise float ms = mins[t] + mp;
        mins[t] = ms;
      }
    }
    for (uint t = 0u; t < nt; ++t) {
      precise float a = (acc[t][0] + acc[t][4]) + (acc[t][2] + acc[t][6]);
      precise float b = (acc[t][1] + acc[t][5]) + (acc[t][3] + acc[t][7]);
      precise float c = (a + b) + mins[t];
      res[t] = c;
    }
  } else if (TYPE <= 8u) {  // Q8_0, Q4_0, Q5_0, Q5_1, IQ4_NL: Seq
    float s[TT];
    for (uint t = 0u; t < TT; ++t) s[t] = 0.0;
    const uint bytes = TYPE == 2u ? 34u : TYPE == 3u || TYPE == 8u ? 18u : TYPE == 6u ? 22u : 24u;
    for (uint b = 0u; b < p.n_in / 32u; ++b) {
      const uint bo = r + b * bytes;
      const float dw = f16_at(bo);
      int q[32];
      for (uint j = 0u; j < 32u; ++j) q[j] = q32(bo, j);
      for (uint t = 0u; t < nt; ++t) {
        const uint tt = t0 + t;
        int isum = 0;
        for (uint j = 0u; j < 32u; ++j) isum += q[j] * qx(tt, 32u * b + j);
        precise float dd = dw * xd(tt, b, 32u);
        s[t] = FMA(dd, float(isum), s[t]);
        if (TYPE == 7u) s[t] = FMA(f16_at(bo + 2u), xs(tt, b), s[t]);
      }
    }
    for (uint t = 0u; t < nt; ++t) res[t] = s[t];
  } else {  // Q2_K .. Q6_K, IQ4_XS with Q8_K
    float s[TT];
    for (uint t = 0u; t < TT; ++t) s[t] = 0.0;
    const uint bytes = TYPE == 9u ? 84u : TYPE == 10u ? 110u : TYPE == 11u ? 144u : TYPE == 12u ? 176u : TYPE == 13u ? 210u : 136u;
    for (uint b = 0u; b < p.n_in / 256u; ++b) {
      const uint bo = r + b * bytes;
      int sum_q[TT], sum_m[TT];
      for (uint t = 0u; t < TT; ++t) sum_q[t] = sum_m[t] = 0;
      const uint xb = 256u * b;
      if (TYPE == 9u || TYPE == 10u || TYPE == 13u) {  // 16 sub-blocks of 16
        for (uint j = 0u; j < 16u; ++j) {
          int q[16];
          for (uint i = 0u; i < 16u; ++i) {
            const uint e = 16u * j + i;
            if (TYPE == 13u) {
              const uint h = e >> 7, rr = e & 127u;
              const uint low = (byte_at(bo + 64u * h + (rr & 63u)) >> (4u * (rr >> 6))) & 15u;
              const uint high = (byte_at(bo + 128u + 32u * h + (rr & 31u)) >> (2u * (rr >> 5))) & 3u;
              q[i] = int(low | (high << 4)) - 32;
            } else {
              const uint qo = TYPE == 9u ? 16u : 32u;
              const int low = int((byte_at(bo + qo + 32u * (e >> 7) + (e & 31u)) >> (2u * ((e >> 5) & 3u))) & 3u);
              if (TYPE == 9u) q[i] = low;
              else q[i] = low - (((byte_at(bo + (e & 31u)) >> (e >> 5)) & 1u) != 0u ? 0 : 4);
            }
          }
          int sc, mn = 0;
          if (TYPE == 9u) {
            sc = int(byte_at(bo + j) & 15u);
            mn = int(byte_at(bo + j) >> 4);
          } else if (TYPE == 10u) {
            const uint low = j < 8u ? byte_at(bo + 96u + j) & 15u : byte_at(bo + 96u + j - 8u) >> 4;
            const uint high = (byte_at(bo + 104u + (j & 3u)) >> (2u * (j >> 2))) & 3u;
            sc = int(low | (high << 4)) - 32;
          } else {
            sc = i8_at(bo + 192u + j);
          }
          for (uint t = 0u; t < nt; ++t) {
            int isum = 0;
            for (uint i = 0u; i < 16u; ++i) isum += q[i] * qx(t0 + t, xb + 16u * j + i);
            sum_q[t] += sc * isum;
            if (TYPE == 9u) sum_m[t] += mn * xbsum(t0 + t, 16u * b + j);
          }
        }
      } else {  // 8 sub-blocks of 32: Q4_K, Q5_K, IQ4_XS
        for (uint j = 0u; j < 8u; ++j) {
          int q[32];
          uint sc = 0u, mn = 0u;
          if (TYPE == 14u) {
            for (uint i = 0u; i < 16u; ++i) {
              const uint qb = byte_at(bo + 8u + 16u * j + i);
              q[i] = int(kIq4nl[qb & 15u]);
              q[i + 16u] = int(kIq4nl[qb >> 4]);
            }
          } else {
            scale_min_k4(bo + 4u, j, sc, mn);
            const uint qs = TYPE == 11u ? bo + 16u : bo + 48u;
            for (uint l = 0u; l < 32u; ++l) {
              uint v = (byte_at(qs + 32u * (j >> 1) + l) >> (4u * (j & 1u))) & 15u;
              if (TYPE == 12u) v |= ((byte_at(bo + 16u + l) >> j) & 1u) << 4;
              q[l] = int(v);
            }
          }
          const int ls = TYPE == 14u ? int(((byte_at(bo + 4u + (j >> 1)) >> (4u * (j & 1u))) & 15u) |
                                           (((u16_at(bo + 2u) >> (2u * j)) & 3u) << 4)) - 32
                                     : int(sc);
          for (uint t = 0u; t < nt; ++t) {
            int isum = 0;
            for (uint l = 0u; l < 32u; ++l) isum += q[l] * qx(t0 + t, xb + 32u * j + l);
            sum_q[t] += ls * isum;
            if (TYPE != 14u) sum_m[t] += int(mn) * (xbsum(t0 + t, 16u * b + 2u * j) + xbsum(t0 + t, 16u * b + 2u * j + 1u));
          }
        }
      }
      const float dw = TYPE == 9u ? f16_at(bo + 80u) : TYPE == 10u ? f16_at(bo + 108u) : TYPE == 13u ? f16_at(bo + 208u) : f16_at(bo);
      const float dmin = TYPE == 9u ? f16_at(bo + 82u) : f16_at(bo + 2u);
      for (uint t = 0u; t < nt; ++t) {
        const float dx = xd(t0 + t, b, 256u);
        if (TYPE == 9u || TYPE == 11u || TYPE == 12u) {
          precise float a = dw * float(sum_q[t]);
          precise float c = dmin * float(sum_m[t]);
          precise float e = a - c;
          precise float f = dx * e;
          precise float g = s[t] + f;
          s[t] = g;
        } else {
          precise float a = dx * dw;
          precise float f = a * float(sum_q[t]);
          precise float g = s[t] + f;
          s[t] = g;
        }
      }
    }
    for (uint t = 0u; t < nt; ++t) res[t] = s[t];
  }
  for (uint t = 0u; t < nt; ++t) d[p.off_d + (orow + t) * p.out_stride + o] = res[t];
}
