#version 450
#extension GL_GOOGLE_include_directive : require
// Causal grouped-query attention over the KV cache in one pass, online softmax (graph/ops.h
// kAttn; the CPU's is src/backends/cpu/ops-attn.cpp):
//   q     [hd, n_head, n_tokens] f32 (roped)
//   K, V  cache rows [n_head_kv * hd] of type F32, F16, Q8_0 or Q4_0; element (row, kv head, i)
//   pos   [n_tokens] I32: token t reads cache rows 0 .. pos[t]; or, with ranges, [3, n_tokens]:
//         (first row of its sequence, positions it reads, -) and, with a ring of R rows,
//         position j at row first + j mod R
//   out   [hd_v * n_head, n_tokens] f32
// Query head h reads KV head h / (n_head / n_head_kv); a sliding window keeps the last `window`
// positions; soft-capping makes a score c * tanh(score / c) before the softmax.
//
// One workgroup of 64 invocations per (token, query head): the query in shared memory; keys in
// chunks of 64, one key's score per invocation (its dot product in f32); then every invocation
// walks the chunk's keys in order with the CPU's per-key online softmax (cpu/attn-online.h: a
// new maximum rescales the sum so far), adding each key's weighted V values to the output
// dimensions it owns (d = tid + 64 k). The rounding follows the CPU backend's arithmetic (and
// llama.cpp's CPU flash attention), so the two agree to ~1e-10 instead of ~1e-5:
//   f16 cache, a sequence's batch rows < 64 and keys < 512 (the CPU's narrow path): q rounded
//     to f16, the V sum kept in f16 (y = f16(fma(v, p, y)));
//   q8_0 / q4_0 cache: q rounded through q8_0 blocks (the CPU's integer dot partner);
//   otherwise: f32.
// f32 and f16 caches with heads of 64-multiples score in the CPU's W64 order (dot_w64), so only
// exp/tanh (the driver's against libm's) and a quantized cache's integer sums differ (fused
// multiply-adds by exact.glsl's FMA: exact also on lavapipe).
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Q { float q[]; };
layout(std430, binding = 1) readonly buffer K { uint kc[]; };
layout(std430, binding = 2) writeonly buffer D { float d[]; };
layout(std430, binding = 3) readonly buffer V { uint vc[]; };
layout(std430, binding = 4) readonly buffer Pos { int pos[]; };
layout(push_constant) uniform P {
  uint hd, n_head, n_tokens, n_head_kv, hd_v;
  uint type;              // 0 F32, 1 F16, 2 Q8_0, 3 Q4_0 (K and V alike)
  uint k_row, v_row;      // bytes of one cache row
  float scale, softcap;   // scale already divided by softcap when capping
  uint window, ring, ranges;
  uint off_q, off_k, off_v;  // off_k, off_v in bytes
  uint off_pos, off_d;
} p;

shared float qs[256];
shared float sc[64];  // the chunk's scores
shared float qmax[8];  // q8_0 rounding: each block's max |q|

#include "f16.glsl"
#include "exact.glsl"

uint kbyte(uint a) { return (kc[a >> 2] >> ((a & 3u) * 8u)) & 0xffu; }
uint vbyte(uint a) { return (vc[a >> 2] >> ((a & 3u) * 8u)) & 0xffu; }
float kf16(uint a) { return unpackHalf2x16(kbyte(a) | (kbyte(a + 1u) << 8)).x; }
float vf16(uint a) { return unpackHalf2x16(vbyte(a) | (vbyte(a + 1u) << 8)).x; }

// Element i of the head row at byte a (a row of whole blocks: a head of hd elements starts a block).
float k_at(uint a, uint i) {
  if (p.type == 0u) return uintBitsToFloat(kc[(a >> 2) + i]);
  if (p.type == 1u) return kf16(a + 2u * i);
  const uint j = i & 31u;
  if (p.type == 2u) {
    const uint b = a + (i >> 5) * 34u;
    return kf16(b) * float(int(kbyte(b + 2u + j) << 24) >> 24);
  }
  const uint b = a + (i >> 5) * 18u;
  const uint n = kbyte(b + 2u + (j & 15u));
  return kf16(b) * (float(j < 16u ? n & 15u : n >> 4) - 8.0);
}
float v_at(uint a, uint i) {
  if (p.type == 0u) return uintBitsToFloat(vc[(a >> 2) + i]);
  if (p.type == 1u) return vf16(a + 2u * i);
  const uint j = i & 31u;
  if (p.type == 2u) {
    const uint b = a + (i >> 5) * 34u;
    return vf16(b) * float(int(vbyte(b + 2u + j) << 24) >> 24);
  }
  const uint b = a + (i >> 5) * 18u;
  const uint n = vbyte(b + 2u + (j & 15u));
  return vf16(b) * (float(j < 16u ? n & 15u : n >> 4) - 8.0);
}
uint head_bytes(uint n) { return p.type == 0u ? 4u * n : p.type == 1u ? 2u * n : p.type == 2u ? n / 32u * 34u : n / 32u * 18u; }


// W64's tail: the lanes' sum, plus the products of elements np .. hd - 1 (rounded to f32)
// added in double (exact variant; the driver's float sum otherwise).
float TAIL_SUM(float sum0, uint a, uint np) {
#ifdef MINFER_EXACT
  double sum = double(sum0);
  for (uint i = np; i < p.hd; ++i) {
    precise float pr = qs[i] * k_at(a, i);
    sum += double(pr);
  }
  return float(sum);
#else
  float sum = sum0;
  for (uint i = np; i < p.hd; ++i) sum += qs[i] * k_at(a, i);
  return sum;
#endif
}

// How the CPU backend computes a token's attention (cpu/ops-attn.cpp op_attn), by the token's
// batch rows of its sequence, the keys it sees and the layer: its narrow arithmetic (per-key
// online softmax, W64 or integer scores), its tiles (blocks of 32 keys, exp_poly clamped,
// cpu/attn-tile-ref.cpp) or its wide kernel (blocks of 8 keys, exp_poly, attn-wide-ref.cpp).
const uint kNarrow = 0u, kTile = 1u, kWide = 2u;
const uint kTileRows = 64u;  // the CPU's attn_tile_rows (AVX-512 and the reference)

void main() {
  const uint wg = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
  if (wg >= p.n_head * p.n_tokens) return;
  const uint t = wg / p.n_head, h = wg % p.n_head;
  const uint group = p.n_head / p.n_head_kv;
  const uint kvh = h / group;
  const uint tid = gl_LocalInvocationID.x;
  uint first = 0u, n_kv, rows = p.n_tokens;
  if (p.ranges != 0u) {
    first = uint(pos[p.off_pos + 3u * t]);
    n_kv = uint(pos[p.off_pos + 3u * t + 1u]);
    rows = uint(pos[p.off_pos + 3u * t + 2u]);
  } else {
    n_kv = uint(pos[p.off_pos + t]) + 1u;
  }
  const uint lo = p.window > 0u && n_kv > p.window ? n_kv - p.window : 0u;
  const bool quant = p.type >= 2u;
  const bool tiles = p.window == 0u && p.ring == 0u && group <= kTileRows;
  const bool long_keys = n_kv >= 512u && (!quant || group >= 4u);
  const uint mode = tiles ? (rows >= 64u || long_keys ? kTile : kNarrow) : (!quant && rows >= 64u ? kWide : kNarrow);
  const bool f16_sums = mode == kNarrow && p.type == 1u;
  for (uint i = tid; i < p.hd; i += 64u) qs[i] = q[p.off_q + (t * p.n_head + h) * p.hd + i];
  barrier();
  if (quant) {  // q through q8_0 blocks: d = f16(max / 127), q = round-half-even(x * 127 / max)
    if (tid < p.hd / 32u) {
      float amax = 0.0;
      for (uint i = 0u; i < 32u; ++i) amax = max(amax, abs(qs[32u * tid + i]));
      qmax[tid] = amax;
    }
    barrier();
    for (uint i = tid; i < p.hd; i += 64u) {
      const float amax = qmax[i / 32u];
      const float id = amax != 0.0 ? 127.0 / amax : 0.0;
      precise float v = qs[i] * id;
      qs[i] = roundEven(v);  // the integer; its block's d in qmax below
    }
    barrier();
    if (tid < p.hd / 32u) qmax[tid] = round_f16(qmax[tid] / 127.0);
    barrier();
    if (mode != kNarrow) {  // the tiles widen q: d * q
      for (uint i = tid; i < p.hd; i += 64u) {
        precise float w = qmax[i / 32u] * qs[i];
        qs[i] = w;
      }
      barrier();
    }
  } else if (f16_sums) {
    for (uint i = tid; i < p.hd; i += 64u) qs[i] = round_f16(qs[i]);
    barrier();
  }
  const uint k_head = kvh * head_bytes(p.hd), v_head = kvh * head_bytes(p.hd_v);
  float acc[4] = float[4](0.0, 0.0, 0.0, 0.0);  // dims tid + 64 k
  float m = -1.0 / 0.0, l = 0.0;  // the running max and sum, the same in every invocation
  for (uint c = lo; c < n_kv; c += 64u) {
    const uint j = c + tid;
    if (j < n_kv) {
      const uint row = p.ring > 0u ? first + j % p.ring : first + j;
      const uint a = p.off_k + row * p.k_row + k_head;
      float dot = 0.0;
      if (mode != kNarrow) {  // a fused multiply-add chain over the widened values
        for (uint i = 0u; i < p.hd; ++i) dot = FMA(qs[i], k_at(a, i), dot);
      } else if (quant) {  // the K type's integer dot product with q's q8_0 blocks (Seq order)
        for (uint b = 0u; b < p.hd / 32u; ++b) {
          const uint bo = a + b * (p.type == 2u ? 34u : 18u);
          int isum = 0;
          for (uint i = 0u; i < 32u; ++i) {
            const uint nb = kbyte(bo + 2u + (p.type == 2u ? i : (i & 15u)));
            const int kq = p.type == 2u ? int(nb << 24) >> 24 : int(i < 16u ? nb & 15u : nb >> 4) - 8;
            isum += kq * int(qs[32u * b + i]);
          }
          precise float dd = kf16(bo) * qmax[b];
          dot = FMA(dd, float(isum), dot);
        }
      } else {
        // The CPU's W64 order (cpu/kernels.h dot_w64): 64 lanes of fused multiply-add chains
        // over the head in steps of 64, a fixed tree over the lanes, the n % 64 tail in double.
        const uint np = p.hd / 64u * 64u;
        float lane[64];
        for (uint e = 0u; e < 64u; ++e) lane[e] = 0.0;
        for (uint i0 = 0u; i0 < np; i0 += 64u)
          for (uint e = 0u; e < 64u; ++e) lane[e] = FMA(qs[i0 + e], k_at(a, i0 + e), lane[e]);
        for (uint e = 0u; e < 16u; ++e) {
          precise float x = lane[e] + lane[32u + e];
          precise float y = lane[16u + e] + lane[48u + e];
          precise float z = x + y;
          lane[e] = z;
        }
        for (uint w = 8u; w >= 1u; w >>= 1)
          for (uint e = 0u; e < w; ++e) {
            precise float z = lane[e] + lane[e + w];
            lane[e] = z;
          }
        dot = TAIL_SUM(lane[0], a, np);
      }
      precise float s = dot * p.scale;
      sc[tid] = p.softcap > 0.0 ? p.softcap * TANH(s) : s;
    }
    barrier();
    const uint n = min(64u, n_kv - c);
    if (mode == kNarrow) {
      for (uint jj = 0u; jj < n; ++jj) {
        const float s = sc[jj];
        float ms = 1.0, pj = 1.0;
        if (s > m) {
          ms = EXP(m - s);  // 0 on the first key
          m = s;
        } else {
          pj = EXP(s - m);
        }
        precise float lm = l * ms;
        precise float ln = lm + pj;
        l = ln;
        const uint jr = c + jj;
        const uint row = p.ring > 0u ? first + jr % p.ring : first + jr;
        const uint va = p.off_v + row * p.v_row + v_head;
        for (uint k = 0u; k < 4u; ++k) {
          const uint dim = tid + 64u * k;
          if (dim >= p.hd_v) break;
          float y = acc[k];
          if (ms != 1.0) {
            precise float r = y * ms;
            y = f16_sums ? round_f16(r) : r;
          }
          const float f = FMA(v_at(va, dim), pj, y);
          acc[k] = f16_sums ? round_f16(f) : f;
        }
      }
    } else {
      const uint B = mode == kTile ? 32u : 8u;  // keys per block, from the first key
      for (uint b0 = 0u; b0 < n; b0 += B) {
        const uint nb = min(B, n - b0);
        float bm = -1.0 / 0.0;
        for (uint k = 0u; k < nb; ++k) bm = max(bm, sc[b0 + k]);
        const float nm = max(m, bm);
        const float cr = mode == kTile ? exp_poly(clamp(m - nm, -87.0, 0.0)) : exp_poly(m - nm);
        float pw[32];
        float sum = 0.0;
        for (uint k = 0u; k < nb; ++k) {
          const float x = sc[b0 + k] - nm;
          pw[k] = mode == kTile ? exp_poly(clamp(x, -87.0, 0.0)) : exp_poly(x);
          precise float ns = sum + pw[k];
          sum = ns;
        }
        if (mode == kTile) {
          l = FMA(l, cr, sum);
        } else {
          precise float lc = l * cr;
          precise float ln = lc + sum;
          l = ln;
        }
        m = nm;
        for (uint k = 0u; k < 4u; ++k) {
          const uint dim = tid + 64u * k;
          if (dim >= p.hd_v) break;
          precise float o = acc[k] * cr;
          float y = o;
          for (uint kk = 0u; kk < nb; ++kk) {
            const uint jr = c + b0 + kk;
            const uint row = p.ring > 0u ? first + jr % p.ring : first + jr;
            y = FMA(pw[kk], v_at(p.off_v + row * p.v_row + v_head, dim), y);
          }
          acc[k] = y;
        }
      }
    }
    barrier();
  }
  const float inv = l == 0.0 ? 0.0 : 1.0 / l;
  for (uint k = 0u; k < 4u; ++k) {
    const uint dim = tid + 64u * k;
    if (dim < p.hd_v) d[p.off_d + (t * p.n_head + h) * p.hd_v + dim] = acc[k] * inv;
  }
}
