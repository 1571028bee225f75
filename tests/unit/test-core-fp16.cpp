// core/fp16.h against independent oracles:
//   fp16: gcc's _Float16 conversions (libgcc soft-float, IEEE 754 round-to-nearest-even) on every
//         half and on ~40 million floats chosen to hit every rounding boundary (on AArch64,
//         where gcc 12's C++ has no _Float16, ARM's __fp16: the FCVT instructions, same rounding);
//   bf16: a rounding reference computed in double (distance to the two neighbours) on the
//         same floats, and every bf16 pattern exhaustively.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/fp16.h"

namespace minfer {
namespace {

#if defined(__aarch64__)
using GccHalf = __fp16;
#else
using GccHalf = _Float16;
#endif

uint16_t gcc_fp32_to_fp16(float f) {
  const GccHalf h = static_cast<GccHalf>(f);
  uint16_t u;
  std::memcpy(&u, &h, 2);
  return u;
}

float gcc_fp16_to_fp32(uint16_t u) {
  GccHalf h;
  std::memcpy(&h, &u, 2);
  return static_cast<float>(h);
}

bool is_nan_half(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0; }
bool is_nan_bits(uint32_t u) { return (u & 0x7fffffffu) > 0x7f800000u; }

uint64_t splitmix64(uint64_t& s) {
  uint64_t z = (s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// fp32 bit patterns that exercise every rounding decision of fp16 and bf16:
//  - each (sign, exponent, top 10 mantissa bits) with the 13 dropped bits at 0, 1, just below
//    half, half, just above half and all ones (every normal-range fp16 tie);
//  - for exponents whose fp16 result is subnormal (or the bf16 boundary at bit 16), the same
//    around every split position 13..24;
//  - every 97th pattern of the whole 32-bit space, and 8M random patterns.
std::vector<uint32_t> boundary_patterns() {
  std::vector<uint32_t> v;
  v.reserve(44u << 20);
  const uint32_t low13[] = {0, 1, 0xfff, 0x1000, 0x1001, 0x1fff};
  for (uint32_t top = 0; top < (1u << 19); ++top)
    for (uint32_t low : low13) v.push_back((top << 13) | low);
  for (uint32_t sign = 0; sign < 2; ++sign)
    for (uint32_t exp = 98; exp <= 114; ++exp)
      for (uint32_t p = 13; p <= 24; ++p) {
        const uint32_t half = 1u << (p - 1);
        const uint32_t lows[] = {0, 1, half - 1, half, half + 1, (1u << p) - 1};
        const uint32_t n_top = p >= 23 ? 1 : 1u << (23 - p);
        for (uint32_t t = 0; t < n_top; ++t)
          for (uint32_t low : lows) {
            const uint32_t mant = ((t << p) | (low & ((1u << p) - 1))) & 0x7fffffu;
            v.push_back((sign << 31) | (exp << 23) | mant);
          }
      }
  for (uint64_t u = 0; u < (1ull << 32); u += 97) v.push_back(static_cast<uint32_t>(u));
  uint64_t s = 42;
  for (int i = 0; i < (8 << 20); ++i) v.push_back(static_cast<uint32_t>(splitmix64(s)));
  return v;
}

const std::vector<uint32_t>& patterns() {
  static const std::vector<uint32_t> v = boundary_patterns();
  return v;
}

// Independent bf16 rounding: of the two bf16 neighbours of x (truncated and next magnitude),
// take the nearer in exact double arithmetic, the even one on a tie. The pattern after the
// largest finite bf16 is inf, which stands for 2^128 in the distance.
uint16_t reference_bf16(uint32_t x) {
  if (is_nan_bits(x)) return static_cast<uint16_t>((x >> 16) | 0x40);
  const uint32_t mag = x & 0x7fffffffu;
  const uint32_t lo = mag & 0xffff0000u;
  if (lo == mag) return static_cast<uint16_t>(x >> 16);
  const uint32_t hi = lo + 0x10000u;
  auto value = [](uint32_t u) {
    return u == 0x7f800000u ? std::ldexp(1.0, 128) : static_cast<double>(bits_f32(u));
  };
  const double v = value(mag), dlo = v - value(lo), dhi = value(hi) - v;
  uint32_t r = dlo < dhi ? lo : dhi < dlo ? hi : ((lo >> 16) & 1 ? hi : lo);
  return static_cast<uint16_t>(((x & 0x80000000u) | r) >> 16);
}

TEST(fp16, spot_values) {
  EXPECT_EQ(fp32_to_fp16(1.5f), 0x3e00);
  EXPECT_EQ(fp32_to_fp16(65504.0f), 0x7bff);           // largest finite
  EXPECT_EQ(fp32_to_fp16(65519.996f), 0x7bff);         // just below the tie with 65536
  EXPECT_EQ(fp32_to_fp16(65520.0f), 0x7c00);           // tie -> even -> inf
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.0f, -25)), 0x0000);  // tie -> even -> 0
  EXPECT_EQ(fp32_to_fp16(std::ldexp(3.0f, -25)), 0x0002);  // 1.5 ulp -> 2
  EXPECT_EQ(fp32_to_fp16(-0.0f), 0x8000);
  EXPECT_EQ(fp32_to_fp16(bits_f32(0x7f800001u)), 0x7e00);  // sNaN -> quiet
  EXPECT_EQ(fp16_to_fp32(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(f32_bits(fp16_to_fp32(0x7c01)), 0x7f802000u);  // payload kept, not quieted
  EXPECT_EQ(fp32_to_bf16(1.00390625f), 0x3f80);           // tie -> even (down)
  EXPECT_EQ(fp32_to_bf16(bits_f32(0x3f818000u)), 0x3f82);  // tie -> even (up)
  EXPECT_EQ(fp32_to_bf16(bits_f32(0x7f7fffffu)), 0x7f80);  // FLT_MAX rounds to inf
  EXPECT_EQ(fp32_to_bf16(bits_f32(0x7f800001u)), 0x7fc0);  // sNaN -> quiet
}

// Every half: fp16 -> fp32 agrees with gcc except that gcc quiets signalling NaNs.
TEST(fp16, half_to_float_exhaustive) {
  int mismatches = 0, snans = 0;
  for (uint32_t i = 0; i < 65536; ++i) {
    const auto h = static_cast<uint16_t>(i);
    const uint32_t ours = f32_bits(fp16_to_fp32(h));
    const uint32_t gcc = f32_bits(gcc_fp16_to_fp32(h));
    if (is_nan_half(h) && !(h & 0x200)) {
      ++snans;
      if ((ours | 0x00400000u) != gcc || !is_nan_bits(ours)) ++mismatches;
    } else if (ours != gcc) {
      ++mismatches;
    }
  }
  EXPECT_EQ(mismatches, 0);
  EXPECT_EQ(snans, 2 * 511);
}

// Every half survives fp16 -> fp32 -> fp16 (a signalling NaN comes back quieted).
TEST(fp16, half_round_trip_exhaustive) {
  int mismatches = 0;
  for (uint32_t i = 0; i < 65536; ++i) {
    const auto h = static_cast<uint16_t>(i);
    const uint16_t want = is_nan_half(h) ? static_cast<uint16_t>(h | 0x200) : h;
    if (fp32_to_fp16(fp16_to_fp32(h)) != want) ++mismatches;
  }
  EXPECT_EQ(mismatches, 0);
}

TEST(fp16, float_to_half_vs_gcc) {
  const std::vector<uint32_t>& v = patterns();
  ASSERT_GT(v.size(), 40u << 20);
  size_t mismatches = 0;
  for (uint32_t u : v) {
    const float f = bits_f32(u);
    if (fp32_to_fp16(f) != gcc_fp32_to_fp16(f) && ++mismatches <= 5)
      ADD_FAILURE() << std::hex << "fp32 0x" << u << ": ours 0x" << fp32_to_fp16(f) << ", gcc 0x"
                    << gcc_fp32_to_fp16(f);
  }
  EXPECT_EQ(mismatches, 0u) << "of " << v.size() << " patterns";
}

TEST(fp16, bf16_to_float_and_round_trip_exhaustive) {
  int mismatches = 0;
  for (uint32_t i = 0; i < 65536; ++i) {
    const auto h = static_cast<uint16_t>(i);
    const uint32_t f = f32_bits(bf16_to_fp32(h));
    if (f != i << 16) ++mismatches;
    const uint16_t want = is_nan_bits(f) ? static_cast<uint16_t>(h | 0x40) : h;
    if (fp32_to_bf16(bf16_to_fp32(h)) != want) ++mismatches;
  }
  EXPECT_EQ(mismatches, 0);
}

TEST(fp16, float_to_bf16_vs_reference) {
  size_t mismatches = 0;
  for (uint32_t u : patterns()) {
    const uint16_t ours = fp32_to_bf16(bits_f32(u)), ref = reference_bf16(u);
    if (ours != ref && ++mismatches <= 5)
      ADD_FAILURE() << std::hex << "fp32 0x" << u << ": ours 0x" << ours << ", ref 0x" << ref;
  }
  EXPECT_EQ(mismatches, 0u);
}

}  // namespace
}  // namespace minfer
