// Reference quantizers of the K-quants and IQ4 (k-quantize.cpp, iq4-quantize.cpp), checked
// through minfer's own dequantize_row: error bounds on gaussian data, exact zeros, constant
// rows, outliers, huge values, determinism and near-idempotence. Agreement with ggml's
// quantizer and with gguf-py's decoder is tests/oracle/kquant.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "quant/quant.h"

namespace minfer {
namespace {

struct TypeCase {
  DType type;
  // NMSE bound on N(0,1) data: llama.cpp's own quantizer (ggml_quantize_chunk, no imatrix)
  // on the same kind of data, as measured by bench/quant-error.py. Ours is 5-25% lower.
  double gaussian_nmse;
};

const TypeCase kCases[] = {
    {DType::Q2_K, 0.0882},   {DType::Q3_K, 0.0228},   {DType::Q4_K, 0.00511},
    {DType::Q5_K, 0.00131},  {DType::Q6_K, 0.000316}, {DType::IQ4_NL, 0.00581},
    {DType::IQ4_XS, 0.00590},
};

// Deterministic on every standard library (std::normal_distribution is not).
struct Rng {
  uint64_t s;
  explicit Rng(uint64_t seed) : s(seed * 0x9E3779B97F4A7C15ull + 1) {}
  double uniform() {  // (0, 1)
    s ^= s << 13; s ^= s >> 7; s ^= s << 17;
    return (static_cast<double>(s >> 11) + 0.5) / 9007199254740992.0;
  }
  float gaussian() {
    return static_cast<float>(std::sqrt(-2.0 * std::log(uniform())) * std::cos(6.283185307179586 * uniform()));
  }
};

std::vector<float> gaussian(int64_t n, uint64_t seed, float sigma = 1.0f) {
  Rng r(seed);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = sigma * r.gaussian();
  return x;
}

std::vector<uint8_t> quantize(DType t, const std::vector<float>& x) {
  std::vector<uint8_t> q(row_bytes(t, static_cast<int64_t>(x.size())));
  quantize_row(t, x.data(), q.data(), static_cast<int64_t>(x.size()));
  return q;
}

std::vector<float> dequantize(DType t, const std::vector<uint8_t>& q, int64_t n) {
  std::vector<float> y(static_cast<size_t>(n));
  dequantize_row(t, q.data(), y.data(), n);
  return y;
}

std::vector<float> round_trip(DType t, const std::vector<float>& x) {
  return dequantize(t, quantize(t, x), static_cast<int64_t>(x.size()));
}

double nmse(const std::vector<float>& x, const std::vector<float>& y) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < x.size(); ++i) {
    num += (static_cast<double>(y[i]) - x[i]) * (static_cast<double>(y[i]) - x[i]);
    den += static_cast<double>(x[i]) * x[i];
  }
  return num / den;
}

std::string name_of(DType t) { return std::string(dtype_name(t)); }

TEST(kquantize, gaussian_error_within_llama_cpp_bound) {
  for (const TypeCase& c : kCases) {
    const std::vector<float> x = gaussian(64 * 256, 1);
    const double e = nmse(x, round_trip(c.type, x));
    EXPECT_LT(e, c.gaussian_nmse) << name_of(c.type);
    EXPECT_GT(e, 0.0) << name_of(c.type);
  }
}

TEST(kquantize, error_scales_with_data) {
  // NMSE does not depend on the overall scale, down to tiny and up to large magnitudes
  // (fp16 super-block scales cover both).
  for (const TypeCase& c : kCases) {
    const double ref = nmse(gaussian(16 * 256, 2), round_trip(c.type, gaussian(16 * 256, 2)));
    for (float sigma : {1e-3f, 30.0f}) {
      const std::vector<float> x = gaussian(16 * 256, 2, sigma);
      EXPECT_NEAR(nmse(x, round_trip(c.type, x)), ref, 0.05 * ref) << name_of(c.type) << " sigma " << sigma;
    }
  }
}

TEST(kquantize, zero_rows_give_exact_zeros) {
  for (const TypeCase& c : kCases) {
    const std::vector<float> x(512, 0.0f);
    for (float v : round_trip(c.type, x)) ASSERT_EQ(v, 0.0f) << name_of(c.type);
  }
}

TEST(kquantize, zero_sub_blocks_stay_zero) {
  // Half the super-block zero, half gaussian: the zero half decodes to exact zeros.
  for (const TypeCase& c : kCases) {
    std::vector<float> x = gaussian(256, 3);
    std::fill(x.begin(), x.begin() + 128, 0.0f);
    const std::vector<float> y = round_trip(c.type, x);
    for (int i = 0; i < 128; ++i) ASSERT_EQ(y[i], 0.0f) << name_of(c.type) << " i=" << i;
  }
}

TEST(kquantize, constant_rows) {
  // Exact up to the fp16 rounding of the scales. At 2e-3 an IQ4_XS super-block scale is an
  // fp16 subnormal (d ~ x / (32 * 127)), whose coarser steps allow 1%.
  for (const TypeCase& c : kCases) {
    for (float v : {0.37f, -0.37f, 1234.5f, -2e-3f}) {
      const float tol = (std::fabs(v) < 0.01f ? 1e-2f : 2e-3f) * std::fabs(v);
      const std::vector<float> x(256, v);
      for (float got : round_trip(c.type, x)) ASSERT_NEAR(got, v, tol) << name_of(c.type) << " v=" << v;
    }
  }
}

TEST(kquantize, one_huge_outlier) {
  for (const TypeCase& c : kCases) {
    std::vector<float> x = gaussian(256, 4);
    x[77] = 1000.0f;
    const std::vector<float> y = round_trip(c.type, x);
    EXPECT_NEAR(y[77], 1000.0f, 5.0f) << name_of(c.type);
    for (float v : y) ASSERT_TRUE(std::isfinite(v)) << name_of(c.type);
    // The rest of the super-block keeps its sign pattern on average.
    double dot = 0.0, xx = 0.0;
    for (int i = 0; i < 256; ++i) {
      if (i == 77) continue;
      dot += static_cast<double>(x[i]) * y[i];
      xx += static_cast<double>(x[i]) * x[i];
    }
    EXPECT_GE(dot, 0.0) << name_of(c.type);
    EXPECT_LT(nmse(x, y), 0.01) << name_of(c.type);
  }
}

TEST(kquantize, values_beyond_fp16_stay_finite) {
  // Scales saturate at the largest fp16 instead of becoming inf; outputs stay finite.
  for (const TypeCase& c : kCases) {
    std::vector<float> x = gaussian(256, 5, 1e30f);
    for (float v : round_trip(c.type, x)) ASSERT_TRUE(std::isfinite(v)) << name_of(c.type);
  }
}

TEST(kquantize, deterministic_and_blockwise) {
  // Same bytes twice, and each block's bytes do not depend on the rest of the row.
  for (const TypeCase& c : kCases) {
    const std::vector<float> x = gaussian(8 * 256, 6);
    const std::vector<uint8_t> a = quantize(c.type, x), b = quantize(c.type, x);
    ASSERT_EQ(a, b) << name_of(c.type);
    const std::vector<float> tail(x.begin() + 256, x.end());
    const std::vector<uint8_t> t = quantize(c.type, tail);
    const size_t skip = row_bytes(c.type, 256);
    ASSERT_TRUE(std::equal(t.begin(), t.end(), a.begin() + static_cast<std::ptrdiff_t>(skip)))
        << name_of(c.type);
  }
}

TEST(kquantize, requantizing_is_nearly_idempotent) {
  // A decoded row lies on the type's grid, so quantizing it again should land (almost) on the
  // same values: much closer than the first round's error.
  for (const TypeCase& c : kCases) {
    const std::vector<float> x = gaussian(32 * 256, 7);
    const std::vector<float> y = round_trip(c.type, x);
    const std::vector<float> z = round_trip(c.type, y);
    EXPECT_LT(nmse(y, z), 0.02 * nmse(x, y)) << name_of(c.type);
  }
}

TEST(kquantize, known_values_on_the_grid) {
  // Elements already on a Q6_K / Q3_K grid with one scale come back exactly.
  std::vector<float> x(256);
  for (int i = 0; i < 256; ++i) x[i] = 0.25f * static_cast<float>((i * 7) % 64 - 32);
  EXPECT_EQ(round_trip(DType::Q6_K, x), x);
  for (int i = 0; i < 256; ++i) x[i] = 0.5f * static_cast<float>((i * 5) % 8 - 4);
  EXPECT_EQ(round_trip(DType::Q3_K, x), x);
}

}  // namespace
}  // namespace minfer
