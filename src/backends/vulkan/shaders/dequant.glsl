// Weight elements from the raw GGUF bytes in a uint buffer `w` (declared by the including
// shader): F32, F16, Q8_0 and Q4_0 (docs/formats.md has the block layouts).
uint byte_at(uint a) { return (w[a >> 2] >> ((a & 3u) * 8u)) & 0xffu; }
float f16_at(uint a) { return unpackHalf2x16(byte_at(a) | (byte_at(a + 1u) << 8)).x; }
// Element i of the row that starts at byte r; type 0 F32, 1 F16, 2 Q8_0, 3 Q4_0.
float weight(uint type, uint r, uint i) {
  if (type == 0u) return uintBitsToFloat(w[(r >> 2) + i]);
  if (type == 1u) return f16_at(r + 2u * i);
  const uint b = i >> 5, j = i & 31u;
  if (type == 2u) {
    const uint bo = r + b * 34u;
    return f16_at(bo) * float(int(byte_at(bo + 2u + j) << 24) >> 24);
  }
  const uint bo = r + b * 18u;
  const uint q = byte_at(bo + 2u + (j & 15u));
  return f16_at(bo) * (float(j < 16u ? q & 15u : q >> 4) - 8.0);
}
