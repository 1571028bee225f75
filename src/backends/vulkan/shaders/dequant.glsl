// Weight elements from the raw GGUF bytes in a uint buffer `w` (declared by the including
// shader), for every weight type minfer loads. The block layouts are src/quant/blocks.h's (and
// docs/formats.md's); each value is computed with the CPU reference's float operations in its
// order (src/quant/*-dequant.cpp), `precise` where a product is followed by a sum so that no
// fused multiply-add changes the low bits: a row read here is bit-identical to the CPU's.
//
// Type numbers (vulkan-backend.cpp dequant_type): 0 F32, 1 F16, 2 Q8_0, 3 Q4_0, 4 BF16, 5 Q4_1,
// 6 Q5_0, 7 Q5_1, 8 IQ4_NL, 9 Q2_K, 10 Q3_K, 11 Q4_K, 12 Q5_K, 13 Q6_K, 14 IQ4_XS.
uint byte_at(uint a) { return (w[a >> 2] >> ((a & 3u) * 8u)) & 0xffu; }
uint u16_at(uint a) { return byte_at(a) | (byte_at(a + 1u) << 8); }
int i8_at(uint a) { return int(byte_at(a) << 24) >> 24; }
float f16_at(uint a) { return unpackHalf2x16(u16_at(a)).x; }
// Nibble j (< 32) of a 32-element block whose 16 bytes start at a: low nibbles first.
uint nibble32(uint a, uint j) {
  const uint q = byte_at(a + (j & 15u));
  return j < 16u ? q & 15u : q >> 4;
}
const float kIq4nl[16] = float[16](-127.0, -104.0, -83.0, -65.0, -49.0, -35.0, -22.0, -10.0,
                                   1.0, 13.0, 25.0, 38.0, 53.0, 69.0, 89.0, 113.0);

// d * q + m, without contraction (Q4_1, Q5_1); dl * q - ml (the K-quants with a min).
float affine(float d, float q, float m) {
  precise float p = d * q;
  precise float r = p + m;
  return r;
}

// The 6-bit scale and min j (< 8) of a Q4_K / Q5_K super-block, packed in the 12 bytes at s.
void scale_min_k4(uint s, uint j, out uint sc, out uint mn) {
  if (j < 4u) {
    sc = byte_at(s + j) & 63u;
    mn = byte_at(s + j + 4u) & 63u;
  } else {
    sc = (byte_at(s + j + 4u) & 15u) | ((byte_at(s + j - 4u) >> 6) << 4);
    mn = (byte_at(s + j + 4u) >> 4) | ((byte_at(s + j) >> 6) << 4);
  }
}

// Blocks of 32: element j of the block at byte bo.
float weight32(uint type, uint bo, uint j) {
  if (type == 2u) return f16_at(bo) * float(i8_at(bo + 2u + j));
  if (type == 3u) return f16_at(bo) * (float(nibble32(bo + 2u, j)) - 8.0);
  if (type == 5u) return affine(f16_at(bo), float(nibble32(bo + 4u, j)), f16_at(bo + 2u));
  if (type == 6u) {
    const uint q = nibble32(bo + 6u, j) | (((byte_at(bo + 2u + (j >> 3)) >> (j & 7u)) & 1u) << 4);
    return f16_at(bo) * float(int(q) - 16);
  }
  if (type == 7u) {
    const uint q = nibble32(bo + 8u, j) | (((byte_at(bo + 4u + (j >> 3)) >> (j & 7u)) & 1u) << 4);
    return affine(f16_at(bo), float(q), f16_at(bo + 2u));
  }
  return f16_at(bo) * kIq4nl[nibble32(bo + 2u, j)];  // 8: IQ4_NL
}

// Super-blocks of 256: element e of the block at byte bo.
float weight256(uint type, uint bo, uint e) {
  const uint h = e >> 7, s = (e >> 5) & 3u, l = e & 31u, j = e >> 5;
  if (type == 9u) {  // Q2_K: scales[16] qs[64] d dmin
    const uint q = (byte_at(bo + 16u + 32u * h + l) >> (2u * s)) & 3u;
    const uint sc = byte_at(bo + (e >> 4));
    const float dl = f16_at(bo + 80u) * float(sc & 15u);
    const float ml = f16_at(bo + 82u) * float(sc >> 4);
    return affine(dl, float(q), -ml);
  }
  if (type == 10u) {  // Q3_K: hmask[32] qs[64] scales[12] d
    const int low = int((byte_at(bo + 32u + 32u * h + l) >> (2u * s)) & 3u);
    const uint high = (byte_at(bo + l) >> j) & 1u;
    const uint k = e >> 4;  // the 16-element sub-block
    const uint sl = k < 8u ? byte_at(bo + 96u + k) & 15u : byte_at(bo + 96u + k - 8u) >> 4;
    const uint sh = (byte_at(bo + 104u + (k & 3u)) >> (2u * (k >> 2))) & 3u;
    const float dl = f16_at(bo + 108u) * float(int(sl | (sh << 4)) - 32);
    return dl * float(low - (high != 0u ? 0 : 4));
  }
  if (type == 11u || type == 12u) {  // Q4_K: d dmin scales[12] qs[128]; Q5_K: ... qh[32] qs[128]
    uint sc, mn;
    scale_min_k4(bo + 4u, j, sc, mn);
    const float dl = f16_at(bo) * float(sc);
    const float ml = f16_at(bo + 2u) * float(mn);
    const uint qs = type == 11u ? bo + 16u : bo + 48u;
    uint q = (byte_at(qs + 32u * (j >> 1) + l) >> (4u * (j & 1u))) & 15u;
    if (type == 12u) q |= ((byte_at(bo + 16u + l) >> j) & 1u) << 4;
    return affine(dl, float(q), -ml);
  }
  if (type == 13u) {  // Q6_K: ql[128] qh[64] scales[16] d
    const uint r = e & 127u;
    const uint low = (byte_at(bo + 64u * h + (r & 63u)) >> (4u * (r >> 6))) & 15u;
    const uint high = (byte_at(bo + 128u + 32u * h + (r & 31u)) >> (2u * (r >> 5))) & 3u;
    const float dl = f16_at(bo + 208u) * float(i8_at(bo + 192u + (e >> 4)));
    return dl * float(int(low | (high << 4)) - 32);
  }
  // 14: IQ4_XS: d scales_h scales_l[4] qs[128]
  const uint ls = ((byte_at(bo + 4u + (j >> 1)) >> (4u * (j & 1u))) & 15u) | (((u16_at(bo + 2u) >> (2u * j)) & 3u) << 4);
  const float dl = f16_at(bo) * float(int(ls) - 32);
  return dl * kIq4nl[nibble32(bo + 8u + 16u * j, l)];
}

// Element i of the row that starts at byte r.
float weight(uint type, uint r, uint i) {
  if (type == 0u) return uintBitsToFloat(w[(r >> 2) + i]);
  if (type == 1u) return f16_at(r + 2u * i);
  if (type == 4u) return uintBitsToFloat(u16_at(r + 2u * i) << 16);
  if (type <= 8u) {
    const uint bytes = type == 2u ? 34u : type == 3u || type == 8u ? 18u : type == 5u ? 20u : type == 6u ? 22u : 24u;
    return weight32(type, r + (i >> 5) * bytes, i & 31u);
  }
  const uint bytes = type == 9u ? 84u : type == 10u ? 110u : type == 11u ? 144u : type == 12u ? 176u : type == 13u ? 210u : 136u;
  return weight256(type, r + (i >> 8) * bytes, i & 255u);
}
