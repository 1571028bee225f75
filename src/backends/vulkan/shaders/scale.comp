#version 450
// dst = src0 * c, f32 (graph/ops.h: kScale).
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer A { float a[]; };
layout(std430, binding = 2) writeonly buffer D { float d[]; };
layout(push_constant) uniform P {
  uint n;
  float c;
  uint off_a, off_d;
} p;
void main() {
  const uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 256u;
  if (i >= p.n) return;
  d[p.off_d + i] = a[p.off_a + i] * p.c;
}
