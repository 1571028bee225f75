#version 450
#extension GL_GOOGLE_include_directive : require
// cache row rows[t] = x row t, converted to the cache type (graph/ops.h kKvStore): F32, F16,
// Q8_0, Q4_0, with the CPU backend's rounding (src/backends/cpu/ops-rows.cpp op_kv_store):
//   F16   IEEE round-to-nearest-even (core/fp16.h fp32_to_fp16);
//   Q8_0  d = max|x| / 127, q = round-half-even(x * (127 / max|x|)) (the CPU's vector kernels
//         and llama.cpp's);
//   Q4_0  d = the signed value of largest magnitude (first on ties) / -8, q = min(15,
//         trunc(x / d + 8.5)) (quant/legacy.cpp), without fused multiply-adds.
// One invocation per unit of whole 32-bit words: one f32, two f16, two quantized blocks
// (supports_op: rows of even f16 counts, of 64-element multiples when quantized), so no two
// invocations write one word.
//   x     [ne0, n] f32       rows [n] I32 (cache rows, < n_rows: clamped)     cache [ne0, n_rows]
layout(local_size_x = 64) in;
layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(std430, binding = 2) buffer D { uint d[]; };
layout(std430, binding = 3) readonly buffer R { int rows[]; };
layout(push_constant) uniform P {
  uint ne0, n, n_rows;
  uint type;       // 0 F32, 1 F16, 2 Q8_0, 3 Q4_0
  uint row_bytes;  // of one cache row (a multiple of 4)
  uint off_x, off_d /* in bytes */, off_rows;
} p;

#include "f16.glsl"

uint words[17];  // the unit's bytes, little-endian
void put_byte(uint i, uint b) { words[i >> 2] |= (b & 0xffu) << ((i & 3u) * 8u); }

// Block of 32 values at x[xb] into bytes [o, o + 34) (Q8_0) or [o, o + 18) (Q4_0).
void quantize_block(uint xb, uint o) {
  uint q[32];
  float d;
  if (p.type == 2u) {
    float amax = 0.0;
    for (uint i = 0u; i < 32u; ++i) amax = max(amax, abs(x[xb + i]));
    d = amax / 127.0;
    const float id = amax != 0.0 ? 127.0 / amax : 0.0;
    for (uint i = 0u; i < 32u; ++i) {
      precise float v = x[xb + i] * id;
      q[i] = uint(int(roundEven(v)));
    }
    for (uint i = 0u; i < 32u; ++i) put_byte(o + 2u + i, q[i]);
  } else {
    uint best = 0u;
    for (uint i = 1u; i < 32u; ++i)
      if (abs(x[xb + i]) > abs(x[xb + best])) best = i;
    d = x[xb + best] / -8.0;
    const float id = d != 0.0 ? 1.0 / d : 0.0;
    for (uint i = 0u; i < 32u; ++i) {
      precise float v = x[xb + i] * id;
      precise float s = v + 8.5;
      q[i] = min(15u, uint(max(0.0, trunc(s))));
    }
    for (uint j = 0u; j < 16u; ++j) put_byte(o + 2u + j, q[j] | (q[j + 16u] << 4));
  }
  const uint h = f16_bits(d);
  put_byte(o, h);
  put_byte(o + 1u, h >> 8);
}

void main() {
  const uint per_row = p.type == 0u ? p.ne0 : p.type == 1u ? p.ne0 / 2u : p.ne0 / 64u;  // units
  const uint u = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 64u;
  if (u >= per_row * p.n) return;
  const uint t = u / per_row, k = u % per_row;
  const uint row = uint(clamp(rows[p.off_rows + t], 0, int(p.n_rows) - 1));
  const uint xr = p.off_x + t * p.ne0;
  const uint dw = (p.off_d + row * p.row_bytes) >> 2;  // the row's first word
  if (p.type == 0u) {
    d[dw + k] = floatBitsToUint(x[xr + k]);
    return;
  }
  if (p.type == 1u) {
    d[dw + k] = f16_bits(x[xr + 2u * k]) | (f16_bits(x[xr + 2u * k + 1u]) << 16);
    return;
  }
  for (uint i = 0u; i < 17u; ++i) words[i] = 0u;
  const uint block = p.type == 2u ? 34u : 18u;
  quantize_block(xr + 64u * k, 0u);
  quantize_block(xr + 64u * k + 32u, block);
  const uint n_words = block / 2u;  // two blocks: 17 or 9 words
  const uint w0 = dw + k * n_words;
  for (uint i = 0u; i < n_words; ++i) d[w0 + i] = words[i];
}
