#version 450
// Runs of n values (n a power of two <= 256) times the n x n Walsh-Hadamard rotation (graph/ops.h
// kHadamard: a quantized KV cache's rotation), as the CPU backend computes it
// (cpu/ops-elementwise.cpp op_hadamard): x / sqrt(n), then the butterflies (u + v, u - v) from
// length 1 up: the same float operations in the same order. One invocation per run (safe in
// place: it reads its run before writing it).
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 2) writeonly buffer D { float d[]; };
layout(push_constant) uniform P {
  uint n, runs, off_x, off_d;
  float s;  // 1 / sqrt(n), from the host
} p;
void main() {
  const uint r = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 64u;
  if (r >= p.runs) return;
  float y[256];
  for (uint i = 0u; i < p.n; ++i) {
    precise float v = x[p.off_x + r * p.n + i] * p.s;
    y[i] = v;
  }
  for (uint len = 1u; len < p.n; len *= 2u)
    for (uint i = 0u; i < p.n; i += 2u * len)
      for (uint j = i; j < i + len; ++j) {
        const float u = y[j], v = y[j + len];
        precise float a = u + v;
        precise float b = u - v;
        y[j] = a;
        y[j + len] = b;
      }
  for (uint i = 0u; i < p.n; ++i) d[p.off_d + r * p.n + i] = y[i];
}
