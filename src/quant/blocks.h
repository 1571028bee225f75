// Block layouts of the GGML quantized types, byte-compatible with GGUF files.
// Bit-level diagrams of each layout are in docs/formats.md; the element order within a
// block is given here next to each struct. `half` is an IEEE fp16 bit pattern.
//
//   const BlockQ4_0* b = static_cast<const BlockQ4_0*>(row);   // row of n/32 blocks
#pragma once

#include <cstdint>

namespace minfer {

using half = uint16_t;

constexpr int kQK = 32;    // elements per block of the legacy types (Q4_0 ... Q8_1, IQ4_NL)
constexpr int kQKK = 256;  // elements per super-block of the K-quants and IQ4_XS
constexpr int kKScaleBytes = 12;  // packed 6-bit scales + mins of Q4_K / Q5_K

// Q4_K / Q5_K: 8 sub-blocks, each with a 6-bit scale and a 6-bit min, packed in 12 bytes:
//   bytes 0-3 : scale j (j = 0..3) in bits 0-5; bits 6-7 are bits 4-5 of scale j+4
//   bytes 4-7 : min j   (j = 0..3) in bits 0-5; bits 6-7 are bits 4-5 of min j+4
//   bytes 8-11: low nibble = bits 0-3 of scale j+4, high nibble = bits 0-3 of min j+4
inline void unpack_scale_min_k4(const uint8_t* s, int j, int* scale, int* min) {
  if (j < 4) {
    *scale = s[j] & 63;
    *min = s[j + 4] & 63;
  } else {
    *scale = (s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4);
    *min = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// x[i] = d * (q[i] - 8); q[i] = qs[i] & 0xF for i < 16, qs[i-16] >> 4 for i >= 16.
struct BlockQ4_0 {
  half d;
  uint8_t qs[kQK / 2];
};
// x[i] = d * q[i] + m; q as in Q4_0.
struct BlockQ4_1 {
  half d;
  half m;
  uint8_t qs[kQK / 2];
};
// x[i] = d * (q[i] - 16); q[i] = low nibble as in Q4_0 | bit i of qh (little-endian u32) << 4.
struct BlockQ5_0 {
  half d;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
// x[i] = d * q[i] + m; q as in Q5_0.
struct BlockQ5_1 {
  half d;
  half m;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
// x[i] = d * qs[i].
struct BlockQ8_0 {
  half d;
  int8_t qs[kQK];
};
// x[i] = d * qs[i]; s = d * sum(qs) (used by dot products with Q4_1/Q5_1).
struct BlockQ8_1 {
  half d;
  half s;
  int8_t qs[kQK];
};

// 16 sub-blocks of 16. scales[j]: low nibble = scale, high nibble = min of sub-block j.
// x = (d * scale) * q - (dmin * min), q 2 bits: element 128h + 32s + l is bits 2s+1..2s of
// qs[32h + l] (h < 2, s < 4, l < 32).
struct BlockQ2_K {
  uint8_t scales[kQKK / 16];
  uint8_t qs[kQKK / 4];
  half d;
  half dmin;
};
// 16 sub-blocks of 16. q 3 bits: 2 low bits in qs (as Q2_K), high bit of element 32b + l in
// bit b of hmask[l] (set = no -4 offset). 16 scales of 6 bits packed in 12 bytes (low nibbles
// in bytes 0-7, top 2 bits in bytes 8-11), stored with +32 offset.
// x = (d * (scale - 32)) * q.
struct BlockQ3_K {
  uint8_t hmask[kQKK / 8];
  uint8_t qs[kQKK / 4];
  uint8_t scales[12];
  half d;
};
// 8 sub-blocks of 32. 6-bit scale and min per sub-block, packed in 12 bytes (j < 4: scale =
// scales[j] & 63, min = scales[j+4] & 63; j >= 4: low 4 bits from scales[j+4], top 2 bits from
// bits 7-6 of scales[j-4] (scale) / scales[j] (min)). x = (d * scale) * q - (dmin * min),
// q 4 bits: element 64c + l is the low nibble of qs[32c + l], element 64c + 32 + l the high.
struct BlockQ4_K {
  half d;
  half dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qs[kQKK / 2];
};
// As Q4_K with a fifth bit per element: bit 4 of element 32j + l is bit j of qh[l].
struct BlockQ5_K {
  half d;
  half dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qh[kQKK / 8];
  uint8_t qs[kQKK / 2];
};
// 16 sub-blocks of 16, int8 scales. q 6 bits; per half h of 128 elements: low 4 bits of
// element 128h + l (l < 64) = low nibble of ql[64h + l], of 128h + 64 + l = its high nibble;
// top 2 bits of element 128h + 32s + l (l < 32) = bits 2s+1..2s of qh[32h + l].
// x = (d * scale) * (q - 32).
struct BlockQ6_K {
  uint8_t ql[kQKK / 2];
  uint8_t qh[kQKK / 4];
  int8_t scales[kQKK / 16];
  half d;
};
// Activation type of the K-quant dot products. x = d * qs; bsums[j] = sum of qs[16j .. 16j+15].
struct BlockQ8_K {
  float d;
  int8_t qs[kQKK];
  int16_t bsums[kQKK / 16];
};
// x[i] = d * kIq4nlValues[q[i]]; q nibbles ordered as in Q4_0.
struct BlockIQ4_NL {
  half d;
  uint8_t qs[kQK / 2];
};
// 8 sub-blocks of 32, 6-bit scales: low 4 bits in scales_l (nibble j%2 of byte j/2), high 2
// bits in scales_h (bits 2j+1..2j). Sub-block j's quants are qs[16j .. 16j+15], ordered as in
// IQ4_NL. x = (d * (scale - 32)) * kIq4nlValues[q].
struct BlockIQ4_XS {
  half d;
  uint16_t scales_h;
  uint8_t scales_l[kQKK / 64];
  uint8_t qs[kQKK / 2];
};

// The 16 non-linear levels of IQ4_NL / IQ4_XS.
constexpr int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                     1,    13,   25,  38,  53,  69,  89,  113};

static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ8_1) == 36);
static_assert(sizeof(BlockQ2_K) == 84);
static_assert(sizeof(BlockQ3_K) == 110);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210);
static_assert(sizeof(BlockQ8_K) == 292);
static_assert(sizeof(BlockIQ4_NL) == 18);
static_assert(sizeof(BlockIQ4_XS) == 136);

}  // namespace minfer
