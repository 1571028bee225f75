#version 450
#extension GL_GOOGLE_include_directive : require
// out[r] = table row ids[r], as f32 (graph/ops.h kGetRows: the embedding lookup). The table in
// its GGUF type (F32, F16, Q8_0, Q4_0). Token ids are validated by the callers (the CPU
// backend asserts them); an id out of range is clamped here so that no read leaves the table.
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer W { uint w[]; };
layout(std430, binding = 1) readonly buffer Ids { int ids[]; };
layout(std430, binding = 2) writeonly buffer D { float d[]; };
layout(push_constant) uniform P {
  uint ne0, n_rows_table, n;  // row length, table rows, output rows
  uint type, row_bytes;
  uint off_w;                 // in bytes
  uint off_ids, off_d;
} p;
#include "dequant.glsl"
void main() {
  const uint e = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 256u;
  if (e >= p.ne0 * p.n) return;
  const uint r = e / p.ne0, i = e % p.ne0;
  const uint id = uint(clamp(ids[p.off_ids + r], 0, int(p.n_rows_table) - 1));
  d[p.off_d + e] = weight(p.type, p.off_w + id * p.row_bytes, i);
}
