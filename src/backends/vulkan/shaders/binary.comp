#version 450
// dst = src0 (+|*) src1, f32; src1 is either as many rows as src0 or one row broadcast over
// them (graph/ops.h: kAdd, kMul). Offsets are in elements into the bound buffers.
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer A { float a[]; };
layout(std430, binding = 1) readonly buffer B { float b[]; };
layout(std430, binding = 2) writeonly buffer D { float d[]; };
layout(push_constant) uniform P {
  uint n;        // elements of dst
  uint ne0;      // row length
  uint b_rows;   // rows of src1: 1 (broadcast) or n / ne0
  uint op;       // 0 add, 1 mul
  uint off_a, off_b, off_d;
} p;
void main() {
  const uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 256u;
  if (i >= p.n) return;
  const uint col = i % p.ne0;
  const uint bi = p.b_rows == 1u ? col : i;
  const float x = a[p.off_a + i], y = b[p.off_b + bi];
  d[p.off_d + i] = p.op == 0u ? x + y : x * y;
}
