// Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 and the float rows: hand-built blocks with hand-derived values,
// the quantizers' rounding rules on chosen inputs, and round trips on random data. Bit-exactness
// against gguf-py is tests/oracle/quant.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/fp16.h"
#include "quant/blocks.h"
#include "quant/quant.h"

namespace minfer {
namespace {

template <typename Block>
std::vector<float> dequant(DType t, const Block& b) {
  std::vector<float> y(kQK);
  dequantize_row(t, &b, y.data(), kQK);
  return y;
}

template <typename Block>
Block quant(DType t, const std::vector<float>& x) {
  Block b;
  std::memset(&b, 0xAA, sizeof b);  // every byte must be written
  quantize_row(t, x.data(), &b, kQK);
  return b;
}

TEST(quant_legacy, dispatch_covers_the_supported_types) {
  const DType all[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q4_0,  DType::Q4_1,
                       DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::Q2_K,  DType::Q3_K,
                       DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q8_K,  DType::IQ4_NL,
                       DType::IQ4_XS};
  for (DType t : all) {
    EXPECT_TRUE(can_dequantize(t)) << dtype_name(t);
    EXPECT_TRUE(can_quantize(t)) << dtype_name(t);
  }
  for (DType t : {DType::Q8_1, DType::IQ2_XXS, DType::I32, DType::MXFP4, DType::TQ1_0}) {
    EXPECT_FALSE(can_dequantize(t)) << dtype_name(t);
    EXPECT_FALSE(can_quantize(t)) << dtype_name(t);
  }
}

// Q4_0 with d = 0.5 (0x3800): qs[j] = j | (15 - j) << 4, so element j < 16 has q = j and
// element 16 + j has q = 15 - j; x = 0.5 * (q - 8).
TEST(quant_legacy, q4_0_hand_block) {
  BlockQ4_0 b;
  b.d = 0x3800;
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | (15 - j) << 4);
  const std::vector<float> y = dequant(DType::Q4_0, b);
  EXPECT_EQ(y[0], -4.0f);
  EXPECT_EQ(y[8], 0.0f);
  EXPECT_EQ(y[15], 3.5f);
  EXPECT_EQ(y[16], 3.5f);
  EXPECT_EQ(y[31], -4.0f);
  for (int j = 0; j < 16; ++j) EXPECT_EQ(y[16 + j], 0.5f * (7 - j));
}

// x = i - 16 for i < 32: the largest magnitude is x[0] = -16, so d = -16 / -8 = 2 (0x4000),
// q = trunc(x / 2 + 8.5): x = -16 -> 0, -15 -> 1 (1.0), -14 -> 1 (1.5), 15 -> 16 clipped to 15.
TEST(quant_legacy, q4_0_quantize_rules) {
  std::vector<float> x(kQK);
  for (int i = 0; i < kQK; ++i) x[i] = static_cast<float>(i - 16);
  const auto b = quant<BlockQ4_0>(DType::Q4_0, x);
  EXPECT_EQ(b.d, 0x4000);
  EXPECT_EQ(b.qs[0] & 0x0f, 0);
  EXPECT_EQ(b.qs[1] & 0x0f, 1);
  EXPECT_EQ(b.qs[2] & 0x0f, 1);
  EXPECT_EQ(b.qs[3] & 0x0f, 2);
  EXPECT_EQ(b.qs[15] >> 4, 15);  // x[31] = 15

  // Largest magnitude negative vs positive: the sign of d follows the extreme value.
  x.assign(kQK, 0.0f);
  x[7] = 8.0f;
  const auto p = quant<BlockQ4_0>(DType::Q4_0, x);
  EXPECT_EQ(p.d, 0xbc00);          // d = 8 / -8 = -1
  EXPECT_EQ(p.qs[7] & 0x0f, 0);    // 8 / -1 + 8.5 = 0.5 -> 0
  EXPECT_EQ(p.qs[0] & 0x0f, 8);

  // A tie on magnitude keeps the first element: -3 at 4 wins over +3 at 9.
  x.assign(kQK, 1.0f);
  x[4] = -3.0f;
  x[9] = 3.0f;
  EXPECT_EQ(quant<BlockQ4_0>(DType::Q4_0, x).d, fp32_to_fp16(-3.0f / -8.0f));

  // All zeros: d = +0 / -8 = -0, stored as 0x8000; every q is 8.
  x.assign(kQK, 0.0f);
  const auto z = quant<BlockQ4_0>(DType::Q4_0, x);
  EXPECT_EQ(z.d, 0x8000);
  for (uint8_t q : z.qs) EXPECT_EQ(q, 0x88);
}

// Q4_1: d = 2 (0x4000), m = -1 (0xbc00), q[i] = i % 16: x = 2q - 1.
TEST(quant_legacy, q4_1_hand_block_and_rules) {
  BlockQ4_1 b;
  b.d = 0x4000;
  b.m = 0xbc00;
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | j << 4);
  const std::vector<float> y = dequant(DType::Q4_1, b);
  for (int i = 0; i < kQK; ++i) EXPECT_EQ(y[i], 2.0f * static_cast<float>(i % 16) - 1.0f);

  // Constant block: d = 0, m = the constant, q = 0.
  std::vector<float> x(kQK, -2.5f);
  const auto c = quant<BlockQ4_1>(DType::Q4_1, x);
  EXPECT_EQ(c.d, 0x0000);
  EXPECT_EQ(c.m, fp32_to_fp16(-2.5f));
  for (uint8_t q : c.qs) EXPECT_EQ(q, 0);

  // min = 0, max = 15: d = 1, q = trunc(x + 0.5): 0.5 -> 1 (half rounds up), 1.49 -> 1.
  for (int i = 0; i < kQK; ++i) x[i] = static_cast<float>(i % 16);
  x[3] = 0.5f;
  x[4] = 1.49f;
  const auto r = quant<BlockQ4_1>(DType::Q4_1, x);
  EXPECT_EQ(r.d, 0x3c00);
  EXPECT_EQ(r.m, 0x0000);
  EXPECT_EQ(r.qs[3] & 0x0f, 1);
  EXPECT_EQ(r.qs[4] & 0x0f, 1);
  EXPECT_EQ(r.qs[5] & 0x0f, 5);
}

// Q5_0: d = 1, low nibbles all 0, qh = 0x80000001: element 0 and 31 have q = 16 (x = 0), all
// others q = 0 (x = -16).
TEST(quant_legacy, q5_0_hand_block) {
  BlockQ5_0 b;
  b.d = 0x3c00;
  const uint8_t qh[4] = {0x01, 0x00, 0x00, 0x80};
  std::memcpy(b.qh, qh, 4);
  std::memset(b.qs, 0, sizeof b.qs);
  const std::vector<float> y = dequant(DType::Q5_0, b);
  for (int i = 0; i < kQK; ++i) EXPECT_EQ(y[i], (i == 0 || i == 31) ? 0.0f : -16.0f) << i;

  // Quantize x = i - 16: max |x| = 16 at i = 0 (x = -16), d = 1, q = trunc(x + 16.5) = i.
  std::vector<float> x(kQK);
  for (int i = 0; i < kQK; ++i) x[i] = static_cast<float>(i - 16);
  const auto q = quant<BlockQ5_0>(DType::Q5_0, x);
  EXPECT_EQ(q.d, 0x3c00);
  const uint8_t want_qh[4] = {0x00, 0x00, 0xff, 0xff};  // q >= 16 for i >= 16
  EXPECT_EQ(std::memcmp(q.qh, want_qh, 4), 0);
  for (int j = 0; j < 16; ++j) EXPECT_EQ(q.qs[j], j | (j << 4)) << j;  // (i & 15) both halves
}

// Q5_1: d = 0.5, m = 1, qh = 0xffffffff and qs = 0xff: q = 31 everywhere, x = 16.5.
TEST(quant_legacy, q5_1_hand_block) {
  BlockQ5_1 b;
  b.d = 0x3800;
  b.m = 0x3c00;
  std::memset(b.qh, 0xff, 4);
  std::memset(b.qs, 0xff, sizeof b.qs);
  for (float v : dequant(DType::Q5_1, b)) EXPECT_EQ(v, 16.5f);
}

// Q8_0 rounds half away from zero: with max |x| = 127, d = 1 and 2.5 -> 3, -2.5 -> -3,
// 0.5 -> 1 (round-to-even would give 2, -2, 0).
TEST(quant_legacy, q8_0_rounding) {
  std::vector<float> x(kQK, 0.0f);
  x[0] = 127.0f;
  x[1] = 2.5f;
  x[2] = -2.5f;
  x[3] = 0.5f;
  x[4] = -127.0f;
  const auto b = quant<BlockQ8_0>(DType::Q8_0, x);
  EXPECT_EQ(b.d, 0x3c00);
  EXPECT_EQ(b.qs[0], 127);
  EXPECT_EQ(b.qs[1], 3);
  EXPECT_EQ(b.qs[2], -3);
  EXPECT_EQ(b.qs[3], 1);
  EXPECT_EQ(b.qs[4], -127);
  EXPECT_EQ(b.qs[5], 0);
  const std::vector<float> y = dequant(DType::Q8_0, b);
  EXPECT_EQ(y[1], 3.0f);
  EXPECT_EQ(y[4], -127.0f);
}

// quantize then dequantize: every element within half a step of the input (the scale's own
// fp16 rounding adds at most |x| * 2^-11 per unit of q).
TEST(quant_legacy, round_trip_error_bound) {
  std::mt19937 rng(7);
  std::normal_distribution<float> g(0.0f, 1.0f);
  const int n = 32 * 64;
  std::vector<float> x(n), y(n);
  for (float& v : x) v = g(rng);
  struct Case {
    DType t;
    float steps;  // quantization steps over the block's range
  };
  for (const Case c : {Case{DType::Q4_0, 8}, Case{DType::Q4_1, 15}, Case{DType::Q5_0, 16},
                       Case{DType::Q5_1, 31}, Case{DType::Q8_0, 127}}) {
    std::vector<uint8_t> q(row_bytes(c.t, n));
    quantize_row(c.t, x.data(), q.data(), n);
    dequantize_row(c.t, q.data(), y.data(), n);
    for (int ib = 0; ib < n / kQK; ++ib) {
      float lo = x[ib * kQK], hi = lo, amax = 0.0f;
      for (int i = 0; i < kQK; ++i) {
        const float v = x[ib * kQK + i];
        lo = std::min(lo, v);
        hi = std::max(hi, v);
        amax = std::max(amax, std::fabs(v));
      }
      const bool affine = c.t == DType::Q4_1 || c.t == DType::Q5_1;
      const float step = affine ? (hi - lo) / c.steps : amax / c.steps;
      // Q4_0/Q5_0 clip the positive extreme to one step less: allow a whole step there.
      const float tol = (affine || c.t == DType::Q8_0 ? 0.5f : 1.0f) * step + amax * 2e-3f;
      for (int i = 0; i < kQK; ++i)
        ASSERT_LE(std::fabs(y[ib * kQK + i] - x[ib * kQK + i]), tol)
            << dtype_name(c.t) << " block " << ib << " element " << i;
    }
  }
}

TEST(quant_legacy, float_rows) {
  const std::vector<float> x = {1.5f, -2.0f, 65504.0f, 1e-8f, 3.0e38f, -0.0f};
  const int n = static_cast<int>(x.size());
  std::vector<float> y(n);
  std::vector<uint8_t> h(2 * n);
  quantize_row(DType::F16, x.data(), h.data(), n);
  EXPECT_EQ(h[0], 0x00);
  EXPECT_EQ(h[1], 0x3e);  // 1.5 = 0x3e00, little-endian
  dequantize_row(DType::F16, h.data(), y.data(), n);
  EXPECT_EQ(y[0], 1.5f);
  EXPECT_EQ(y[2], 65504.0f);
  EXPECT_TRUE(std::isinf(y[4]));
  EXPECT_TRUE(std::signbit(y[5]));
  quantize_row(DType::BF16, x.data(), h.data(), n);
  dequantize_row(DType::BF16, h.data(), y.data(), n);
  EXPECT_EQ(y[0], 1.5f);
  EXPECT_EQ(y[1], -2.0f);
  EXPECT_EQ(y[2], 65536.0f);  // 65504 needs 11 significant bits; bf16 has 8
  std::vector<uint8_t> f(4 * n);
  quantize_row(DType::F32, x.data(), f.data(), n);
  dequantize_row(DType::F32, f.data(), y.data(), n);
  EXPECT_EQ(std::memcmp(x.data(), y.data(), 4 * n), 0);
}

}  // namespace
}  // namespace minfer
