// K-quant, Q8_K and IQ4 dequantization on hand-built super-blocks. Each test packs the scales
// and quants by hand (the expected values below were derived on paper from the format
// description in docs/formats.md, not from the decoder), and most tests also set single bits
// and check that exactly the expected element moves. Random-byte bit-exactness against
// gguf-py is tests/oracle/quant.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "quant/blocks.h"
#include "quant/quant.h"

namespace minfer {
namespace {

template <typename Block>
std::vector<float> dequant(DType t, const Block& b) {
  std::vector<float> y(kQKK);
  dequantize_row(t, &b, y.data(), kQKK);
  return y;
}

// Q2_K: d = 1, dmin = 0.25, scales[j] = j | (15 - j) << 4 so sub-block j has scale j and min
// 15 - j; a zero quant gives x = -0.25 * (15 - j).
// qs[20] = 0b11'10'01'00: element 20 + 32s has q = s (s = 0..3), sub-blocks 1, 3, 5, 7.
// qs[37] = 3: element 128 + 5 = 133, sub-block 8, q = 3.
TEST(quant_kdequant, q2_k_hand_block) {
  BlockQ2_K b{};
  b.d = 0x3c00;
  b.dmin = 0x3400;
  for (int j = 0; j < 16; ++j) b.scales[j] = static_cast<uint8_t>(j | (15 - j) << 4);
  b.qs[20] = 0xe4;
  b.qs[37] = 0x03;
  const std::vector<float> y = dequant(DType::Q2_K, b);
  for (int e = 0; e < kQKK; ++e) {
    float want = -0.25f * static_cast<float>(15 - e / 16);
    if (e == 20) want = -3.5f;   // 1*0 - 0.25*14
    if (e == 52) want = 0.0f;    // 3*1 - 0.25*12
    if (e == 84) want = 7.5f;    // 5*2 - 0.25*10
    if (e == 116) want = 19.0f;  // 7*3 - 0.25*8
    if (e == 133) want = 22.25f; // 8*3 - 0.25*7
    EXPECT_EQ(y[e], want) << "element " << e;
  }
}

// Q3_K scales: bytes 0..7 = 21 43 65 87 a9 cb ed 0f, bytes 8..11 = e4 1b 00 ff. Low nibbles:
// j < 8 from the low nibble of byte j, j >= 8 from the high nibble of byte j-8; high 2 bits
// from byte 8 + j%4 at bit 2*(j/4). Worked out: 6-bit scales 1 51 5 55 25 43 13 63 34 20 6 56
// 58 12 14 48, minus 32:
constexpr int kQ3Scales[16] = {-31, 19, -27, 23, -7, 11, -19, 31, 2, -12, -26, 24, 26, -20, -18, 16};

// d = 0.5. With qs = 0 and hmask = 0 every q is 0 - 4, x = 0.5 * s * -4 = -2s.
// hmask[7] bit 5 -> element 32*5 + 7 = 167 loses its -4; qs[39] = 0b1000 gives it low bits 2
// (element 128 + 32*1 + 7 = 167 reads bits 2-3 of qs[32 + 7]): q = 2, sub-block 10,
// x = 0.5 * -26 * 2 = -26.
TEST(quant_kdequant, q3_k_hand_block) {
  BlockQ3_K b{};
  b.d = 0x3800;
  const uint8_t scales[12] = {0x21, 0x43, 0x65, 0x87, 0xa9, 0xcb, 0xed, 0x0f, 0xe4, 0x1b, 0x00, 0xff};
  std::memcpy(b.scales, scales, 12);
  b.hmask[7] = 0x20;
  b.qs[39] = 0x08;
  const std::vector<float> y = dequant(DType::Q3_K, b);
  for (int e = 0; e < kQKK; ++e) {
    const float want = e == 167 ? -26.0f : -2.0f * static_cast<float>(kQ3Scales[e / 16]);
    EXPECT_EQ(y[e], want) << "element " << e;
  }
}

// Q4_K / Q5_K scales and mins: sc = 1 2 3 4 17 33 63 48, m = 5 6 7 8 36 0 50 17 (the top two
// bits of sc[4..7] and m[4..7] differ, so mixing up their source bytes shows), packed:
//   bytes 0-3: sc[j] | (sc[j+4] >> 4) << 6          = 41 82 c3 c4
//   bytes 4-7: m[j]  | (m[j+4]  >> 4) << 6          = 85 06 c7 48
//   bytes 8-11: (sc[j+4] & 15) | (m[j+4] & 15) << 4 = 41 01 2f 10
constexpr uint8_t kK4Scales[12] = {0x41, 0x82, 0xc3, 0xc4, 0x85, 0x06,
                                   0xc7, 0x48, 0x41, 0x01, 0x2f, 0x10};
constexpr int kK4Sc[8] = {1, 2, 3, 4, 17, 33, 63, 48};
constexpr int kK4Min[8] = {5, 6, 7, 8, 36, 0, 50, 17};

// d = 1, dmin = 0.5. qs[32c + l] = (l % 16) | (15 - l % 16) << 4: sub-block 2c reads the low
// nibbles (q = l % 16), sub-block 2c + 1 the high ones (q = 15 - l % 16).
TEST(quant_kdequant, q4_k_hand_block) {
  BlockQ4_K b{};
  b.d = 0x3c00;
  b.dmin = 0x3800;
  std::memcpy(b.scales, kK4Scales, 12);
  for (int i = 0; i < 128; ++i) b.qs[i] = static_cast<uint8_t>((i % 16) | (15 - i % 16) << 4);
  const std::vector<float> y = dequant(DType::Q4_K, b);
  for (int j = 0; j < 8; ++j)
    for (int l = 0; l < 32; ++l) {
      const int q = j % 2 == 0 ? l % 16 : 15 - l % 16;
      const float want = static_cast<float>(kK4Sc[j] * q) - 0.5f * static_cast<float>(kK4Min[j]);
      EXPECT_EQ(y[32 * j + l], want) << "sub-block " << j << " element " << l;
    }
}

// As Q4_K with qs = 0 and qh[l] = 1 << (l % 8): element 32j + l has q = 16 iff j == l % 8.
TEST(quant_kdequant, q5_k_hand_block) {
  BlockQ5_K b{};
  b.d = 0x3c00;
  b.dmin = 0x3800;
  std::memcpy(b.scales, kK4Scales, 12);
  for (int l = 0; l < 32; ++l) b.qh[l] = static_cast<uint8_t>(1 << (l % 8));
  b.qs[100] = 0x70;  // element 64*3 + 32 + 4 = 228 (sub-block 7, l = 4): low bits 7
  const std::vector<float> y = dequant(DType::Q5_K, b);
  for (int j = 0; j < 8; ++j)
    for (int l = 0; l < 32; ++l) {
      int q = j == l % 8 ? 16 : 0;
      if (32 * j + l == 228) q = 7;  // l % 8 = 4 != 7: no high bit
      const float want = static_cast<float>(kK4Sc[j] * q) - 0.5f * static_cast<float>(kK4Min[j]);
      EXPECT_EQ(y[32 * j + l], want) << "sub-block " << j << " element " << l;
    }
}

// Q6_K: d = 0.25, scales 1 -2 3 -4 ... 15 -128. With ql = qh = 0 every q is -32, x = -8 * s.
//   ql[72] = 0x50, qh[40] = 0x30: element 128 + 72 = 200 (high nibble of ql[64 + 8], bits 4-5
//     of qh[32 + 8]): q = 5 | 3 << 4 = 53 - 32 = 21, sub-block 12 (s = 13): 0.25*13*21 = 68.25.
//   qh[3] = 0x01: element 3 gets q = 16 - 32 = -16, sub-block 0: -4.
//   ql[0] = 0x0f: element 0 gets q = 15 - 32 = -17: -4.25.
TEST(quant_kdequant, q6_k_hand_block) {
  BlockQ6_K b{};
  b.d = 0x3400;
  const int8_t scales[16] = {1, -2, 3, -4, 5, -6, 7, -8, 9, -10, 11, -12, 13, -14, 15, -128};
  std::memcpy(b.scales, scales, 16);
  b.ql[72] = 0x50;
  b.qh[40] = 0x30;
  b.qh[3] = 0x01;
  b.ql[0] = 0x0f;
  const std::vector<float> y = dequant(DType::Q6_K, b);
  for (int e = 0; e < kQKK; ++e) {
    float want = -8.0f * static_cast<float>(scales[e / 16]);
    if (e == 200) want = 68.25f;
    if (e == 3) want = -4.0f;
    if (e == 0) want = -4.25f;
    EXPECT_EQ(y[e], want) << "element " << e;
  }
}

TEST(quant_kdequant, q8_k_hand_block) {
  BlockQ8_K b{};
  b.d = 0.5f;
  for (int i = 0; i < kQKK; ++i) b.qs[i] = static_cast<int8_t>(i - 128);
  const std::vector<float> y = dequant(DType::Q8_K, b);
  for (int i = 0; i < kQKK; ++i) EXPECT_EQ(y[i], 0.5f * static_cast<float>(i - 128));
}

// Q8_K quantizer (ggml semantics): the value of largest magnitude maps to -127.
TEST(quant_kdequant, q8_k_quantize) {
  std::vector<float> x(kQKK, 0.0f);
  // max = -127 -> iscale = 1, d = 1; ties round to even: 0.5 -> 0, 1.5 -> 2, 2.5 -> 2.
  x[0] = 0.5f;
  x[1] = 1.5f;
  x[2] = 2.5f;
  x[3] = -0.5f;
  x[4] = 100.4f;
  x[17] = -127.0f;
  BlockQ8_K b;
  std::memset(&b, 0xAA, sizeof b);
  quantize_row(DType::Q8_K, x.data(), &b, kQKK);
  EXPECT_EQ(b.d, 1.0f);
  EXPECT_EQ(b.qs[0], 0);
  EXPECT_EQ(b.qs[1], 2);
  EXPECT_EQ(b.qs[2], 2);
  EXPECT_EQ(b.qs[3], 0);
  EXPECT_EQ(b.qs[4], 100);
  EXPECT_EQ(b.qs[17], -127);
  EXPECT_EQ(b.bsums[0], 0 + 2 + 2 + 0 + 100);
  EXPECT_EQ(b.bsums[1], -127);
  for (int j = 2; j < 16; ++j) EXPECT_EQ(b.bsums[j], 0);

  // Positive extreme: max = 254 -> iscale = -0.5, d = -2, every q = -x / 2.
  for (int i = 0; i < kQKK; ++i) x[i] = static_cast<float>(2 * (i % 128));
  quantize_row(DType::Q8_K, x.data(), &b, kQKK);
  EXPECT_EQ(b.d, -2.0f);
  for (int i = 0; i < kQKK; ++i) ASSERT_EQ(b.qs[i], -(i % 128)) << i;
  EXPECT_EQ(b.bsums[0], -120);  // -(0 + 1 + ... + 15)
  std::vector<float> y(kQKK);
  dequantize_row(DType::Q8_K, &b, y.data(), kQKK);
  for (int i = 0; i < kQKK; ++i) ASSERT_EQ(y[i], x[i]);

  // Zeros: d = 0, q = 0, sums 0.
  x.assign(kQKK, 0.0f);
  std::memset(&b, 0xAA, sizeof b);
  quantize_row(DType::Q8_K, x.data(), &b, kQKK);
  EXPECT_EQ(b.d, 0.0f);
  for (int8_t q : b.qs) EXPECT_EQ(q, 0);
  for (int16_t s : b.bsums) EXPECT_EQ(s, 0);
}

// IQ4_NL: d = 2, qs[i] = i | (15 - i) << 4: element i < 16 is level i, element 16 + i is
// level 15 - i; x = 2 * kIq4nlValues[...].
TEST(quant_kdequant, iq4_nl_hand_block) {
  BlockIQ4_NL b;
  b.d = 0x4000;
  for (int i = 0; i < 16; ++i) b.qs[i] = static_cast<uint8_t>(i | (15 - i) << 4);
  std::vector<float> y(kQK);
  dequantize_row(DType::IQ4_NL, &b, y.data(), kQK);
  EXPECT_EQ(y[0], -254.0f);
  EXPECT_EQ(y[15], 226.0f);
  EXPECT_EQ(y[16], 226.0f);
  EXPECT_EQ(y[31], -254.0f);
  EXPECT_EQ(y[8], 2.0f);
}

// IQ4_XS: d = 1, scales_l = 21 43 65 87, scales_h = 0xe4e4. Sub-block j: low 4 bits are
// nibble j%2 of scales_l[j/2], high 2 bits are bits 2j..2j+1 of scales_h:
//   j:     0   1   2   3   4   5   6   7
//   ls:    1  18  35  52   5  22  39  56
//   ls-32: -31 -14 3  20 -27 -10   7  24
// qs[16j + i] = i | (15 - i) << 4 as in the IQ4_NL test.
TEST(quant_kdequant, iq4_xs_hand_block) {
  BlockIQ4_XS b;
  b.d = 0x3c00;
  b.scales_h = 0xe4e4;
  const uint8_t scales_l[4] = {0x21, 0x43, 0x65, 0x87};
  std::memcpy(b.scales_l, scales_l, 4);
  for (int j = 0; j < 8; ++j)
    for (int i = 0; i < 16; ++i) b.qs[16 * j + i] = static_cast<uint8_t>(i | (15 - i) << 4);
  const int scale[8] = {-31, -14, 3, 20, -27, -10, 7, 24};
  const std::vector<float> y = dequant(DType::IQ4_XS, b);
  for (int j = 0; j < 8; ++j)
    for (int i = 0; i < 16; ++i) {
      const auto s = static_cast<float>(scale[j]);
      EXPECT_EQ(y[32 * j + i], s * static_cast<float>(kIq4nlValues[i])) << j << " " << i;
      EXPECT_EQ(y[32 * j + 16 + i], s * static_cast<float>(kIq4nlValues[15 - i])) << j << " " << i;
    }
}

}  // namespace
}  // namespace minfer
