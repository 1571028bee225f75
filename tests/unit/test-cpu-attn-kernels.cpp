// The attention kernels of every table (kernels.h) against the reference table's, entry by
// entry: the W64 dot products and the f16 / f32 V sums on lengths that reach their vector
// bodies and their tails (f16 subnormals, zeros, overflow to infinity and a NaN included),
// attn_wide and attn_tile on shapes that reach their register blockings, partial key blocks,
// ring wraps, soft-caps, f16 / f32 / q8_0 / q4_0 caches and tiles of up to 64 rows. Part of
// test-cpu-attn (whose op-level tests cover the same kernels through op_attn).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string_view>
#include <vector>

#include "backends/cpu/kernels.h"
#include "core/fp16.h"
#include "quant/quant.h"

namespace minfer::cpu {
namespace {

std::vector<float> normal(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = nd(rng);
  return v;
}

// f16 values of normal floats, every 7th replaced by one of the special values.
std::vector<uint16_t> f16_values(size_t n, uint32_t seed, float scale, const std::vector<uint16_t>& specials) {
  const std::vector<float> f = normal(n, seed, scale);
  std::vector<uint16_t> h(n);
  for (size_t i = 0; i < n; ++i) h[i] = fp32_to_fp16(f[i]);
  for (size_t i = 3, s = 0; i < n && !specials.empty(); i += 7, ++s) h[i] = specials[s % specials.size()];
  return h;
}

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

const std::vector<const CpuKernels*>& tables() {
  static const std::vector<const CpuKernels*> t = [] {
    const CpuKernels* a[8];
    return std::vector<const CpuKernels*>(a, a + cpu_kernel_variants(a, 8));
  }();
  return t;
}

constexpr int64_t kLengths[] = {1, 3, 4, 7, 16, 36, 63, 64, 65, 80, 128, 131, 200, 256};

// Zeros of both signs and f16 subnormals: products and sums the dot products must round as the
// reference does.
const std::vector<uint16_t> kDotSpecials = {0x0000, 0x8000, 0x0001, 0x83ff, 0x0200, 0x7bff};

TEST(CpuAttnKernels, DotW64IsBitIdenticalToTheReference) {
  const CpuKernels& ref = *tables()[0];
  for (int64_t n : kLengths) {
    const auto x16 = f16_values(static_cast<size_t>(n), 1, 2.0f, kDotSpecials);
    const auto y16 = f16_values(static_cast<size_t>(n), 2, 2.0f, kDotSpecials);
    std::vector<float> xf = normal(static_cast<size_t>(n), 3), yf = normal(static_cast<size_t>(n), 4, 5.0f);
    for (size_t i = 5; i < xf.size(); i += 11) xf[i] = 1e-39f;  // an f32 subnormal
    for (size_t i = 2; i < yf.size(); i += 13) yf[i] = -0.0f;
    const float want16 = ref.dot_w64_f16(n, x16.data(), y16.data());
    const float want32 = ref.dot_w64_f32(n, xf.data(), yf.data());
    for (const CpuKernels* t : tables()) {
      EXPECT_EQ(bits(t->dot_w64_f16(n, x16.data(), y16.data())), bits(want16)) << "n " << n << " on " << t->isa;
      EXPECT_EQ(bits(t->dot_w64_f32(n, xf.data(), yf.data())), bits(want32)) << "n " << n << " on " << t->isa;
    }
  }
  // Products that all underflow to -0: the sum is -0, with and without a tail of such products.
  for (int64_t n : {64, 80}) {
    const std::vector<float> a(static_cast<size_t>(n), 1e-30f), b(static_cast<size_t>(n), -1e-30f);
    const std::vector<uint16_t> a16(static_cast<size_t>(n), 0x0001), b16(static_cast<size_t>(n), 0x8001);
    for (const CpuKernels* t : tables()) {
      EXPECT_EQ(bits(t->dot_w64_f32(n, a.data(), b.data())), bits(ref.dot_w64_f32(n, a.data(), b.data()))) << n << " " << t->isa;
      EXPECT_EQ(bits(t->dot_w64_f16(n, a16.data(), b16.data())), bits(ref.dot_w64_f16(n, a16.data(), b16.data()))) << n << " " << t->isa;
    }
  }
}

// Query rows (f32 holding f16 values, stride n + 3) against one cache row; the V sums of several
// rows in f16 (overflow to infinity, a quiet NaN, subnormal results) and f32.
TEST(CpuAttnKernels, RowKernelsAreBitIdenticalToTheReference) {
  const CpuKernels& ref = *tables()[0];
  constexpr int64_t kRows = 6;
  const float p[kRows] = {0.5f, -3.0f, 1e-6f, 0.0f, 70000.0f, 0.03125f};
  for (int64_t n : kLengths) {
    const int64_t stride = n + 3;
    const auto k16 = f16_values(static_cast<size_t>(n), 5, 1.0f, kDotSpecials);
    const auto v16 = f16_values(static_cast<size_t>(n), 6, 3.0f, {0x0001, 0x8000, 0x7c00, 0x7e01, 0x7bff});
    const auto acc16 = f16_values(static_cast<size_t>(kRows * stride), 7, 1.0f, {0x0000, 0xfbff, 0x03ff, 0xfc00});
    std::vector<float> q = normal(static_cast<size_t>(kRows * stride), 8, 2.0f);
    for (float& e : q) e = fp16_to_fp32(fp32_to_fp16(e));
    std::vector<float> v32 = normal(static_cast<size_t>(n), 9, 3.0f), acc32 = normal(q.size(), 10);
    float want_s[kRows];
    ref.dot_w64_rows_f16(n, k16.data(), q.data(), stride, kRows, want_s);
    std::vector<uint16_t> want_one = acc16, want_rows = acc16;
    ref.mad_f16(n, want_one.data(), v16.data(), p[0]);
    ref.mad_rows_f16(n, want_rows.data(), stride, v16.data(), p, kRows);
    std::vector<float> want32 = acc32;
    ref.mad_rows_f32(n, want32.data(), stride, v32.data(), p, kRows);
    for (const CpuKernels* t : tables()) {
      float s[kRows];
      t->dot_w64_rows_f16(n, k16.data(), q.data(), stride, kRows, s);
      for (int64_t r = 0; r < kRows; ++r) EXPECT_EQ(bits(s[r]), bits(want_s[r])) << "row " << r << " n " << n << " on " << t->isa;
      std::vector<uint16_t> one = acc16, rows = acc16;
      t->mad_f16(n, one.data(), v16.data(), p[0]);
      t->mad_rows_f16(n, rows.data(), stride, v16.data(), p, kRows);
      EXPECT_EQ(one, want_one) << "mad_f16 n " << n << " on " << t->isa;
      EXPECT_EQ(rows, want_rows) << "mad_rows_f16 n " << n << " on " << t->isa;
      std::vector<float> got32 = acc32;
      t->mad_rows_f32(n, got32.data(), stride, v32.data(), p, kRows);
      for (size_t i = 0; i < got32.size(); ++i)
        ASSERT_EQ(bits(got32[i]), bits(want32[i])) << "mad_rows_f32 n " << n << " i " << i << " on " << t->isa;
    }
  }
}

// A cache of one KV head's rows, [rows][2 heads][hd], head 0 read; cache type f16, f32, q8_0, q4_0.
struct Cache {
  std::vector<uint8_t> k, v;
  size_t k_row = 0, v_row = 0;
};

Cache make_cache(DType type, int64_t rows, int64_t hd, int64_t hd_v, uint32_t seed) {
  Cache c;
  c.k_row = row_bytes(type, 2 * hd);
  c.v_row = row_bytes(type, 2 * hd_v);
  c.k.resize(c.k_row * static_cast<size_t>(rows));
  c.v.resize(c.v_row * static_cast<size_t>(rows));
  const std::vector<float> kf = normal(static_cast<size_t>(rows * 2 * hd), seed);
  const std::vector<float> vf = normal(static_cast<size_t>(rows * 2 * hd_v), seed + 1, 2.0f);
  for (int64_t r = 0; r < rows; ++r) {
    quantize_row(type, kf.data() + r * 2 * hd, c.k.data() + static_cast<size_t>(r) * c.k_row, 2 * hd);
    quantize_row(type, vf.data() + r * 2 * hd_v, c.v.data() + static_cast<size_t>(r) * c.v_row, 2 * hd_v);
  }
  return c;
}

// The tables whose attn_wide takes the reference's float steps exactly (kernels.h leaves its
// order free: the x86 tables add a score's products in 8 or 16 lanes, within float rounding).
bool wide_is_exact(std::string_view isa) { return isa == "ref" || isa == "neon" || isa == "dotprod" || isa == "i8mm"; }

TEST(CpuAttnKernels, WideKernelFollowsTheReference) {
  struct Case {
    int64_t hd, hd_v, G, n_kv;
    bool f16;
    float softcap;
    int64_t n_first;  // ring wrap: keys from n_first on at the cache's first row
  };
  const Case cases[] = {
      {64, 64, 1, 1, true, 0.0f, INT64_MAX},  {64, 64, 3, 13, true, 0.0f, INT64_MAX},
      {128, 128, 4, 37, false, 0.0f, INT64_MAX}, {36, 36, 5, 20, true, 0.0f, 7},
      {72, 40, 8, 8, false, 5.0f, 3},        {256, 256, 2, 9, true, 0.0f, INT64_MAX},
      {64, 64, 7, 21, true, 30.0f, 16},      {128, 64, 9, 16, false, 0.0f, 8},
  };
  for (const Case& c : cases) {
    const DType type = c.f16 ? DType::F16 : DType::F32;
    const Cache cache = make_cache(type, c.n_kv + 8, c.hd, c.hd_v, 11);
    const int64_t q_stride = c.hd + 4, y_stride = c.hd_v + 2;
    const std::vector<float> q = normal(static_cast<size_t>(c.G * q_stride), 12, 3.0f);
    AttnWideArgs a;
    a.q = q.data();
    a.q_stride = q_stride;
    a.G = c.G;
    a.hd = c.hd;
    a.hd_v = c.hd_v;
    const bool ring = c.n_first < c.n_kv;
    a.k = cache.k.data() + (ring ? 8 * cache.k_row : 0);  // a ring's keys from n_first on at row 0
    a.v = cache.v.data() + (ring ? 8 * cache.v_row : 0);
    a.k_row = cache.k_row;
    a.v_row = cache.v_row;
    a.f16 = c.f16;
    a.n_kv = c.n_kv;
    a.n_first = c.n_first;
    a.k_wrap = cache.k.data();
    a.v_wrap = cache.v.data();
    a.scale = 1.0f / std::sqrt(static_cast<float>(c.hd)) / (c.softcap > 0.0f ? c.softcap : 1.0f);
    a.softcap = c.softcap;
    a.y_stride = y_stride;
    std::vector<float> want(static_cast<size_t>(c.G * y_stride), -7.0f);
    for (const CpuKernels* t : tables()) {
      std::vector<float> y(static_cast<size_t>(c.G * y_stride) + 16, -7.0f);
      std::vector<float> scratch(static_cast<size_t>(c.G * c.hd_v + 16 * 256));
      a.y = y.data();
      a.scratch = scratch.data();
      t->attn_wide(a);
      for (size_t i = y.size() - 16; i < y.size(); ++i) ASSERT_EQ(y[i], -7.0f) << "overrun on " << t->isa;
      if (t == tables()[0]) std::copy(y.begin(), y.end() - 16, want.begin());
      for (int64_t r = 0; r < c.G; ++r)
        for (int64_t i = 0; i < y_stride; ++i) {
          const size_t e = static_cast<size_t>(r * y_stride + i);
          if (i >= c.hd_v) {
            ASSERT_EQ(y[e], -7.0f) << "row gap written on " << t->isa;
          } else if (wide_is_exact(t->isa)) {
            ASSERT_EQ(bits(y[e]), bits(want[e])) << "hd " << c.hd << " G " << c.G << " n_kv " << c.n_kv << " row " << r
                                                 << " i " << i << " on " << t->isa;
          } else {
            ASSERT_NEAR(y[e], want[e], 1e-5 * std::max(1.0f, std::fabs(want[e]))) << "on " << t->isa;
          }
        }
    }
  }
}

// attn_tile on every table, bit for bit (kernels.h fixes each row's float steps), for tiles of
// up to the table's attn_tile_rows rows: 1 or 2 rows (keys in lanes on some tables) with key
// counts that differ per token, few rows (decode), a whole 32-row tile, 64 rows split by tokens
// and by heads, head sizes whose V sums take 4-dimension blocks, quantized caches.
TEST(CpuAttnKernels, TileKernelIsBitIdenticalToTheReference) {
  struct Case {
    int64_t T, G, hd, hd_v;
    DType cache;
    float softcap;
    std::vector<int32_t> n_kv;  // [T]
  };
  std::vector<int32_t> rising(64);
  for (int32_t t = 0; t < 64; ++t) rising[static_cast<size_t>(t)] = 30 + t;
  const Case cases[] = {
      {1, 1, 64, 64, DType::F16, 0.0f, {1}},
      {1, 2, 128, 128, DType::F16, 0.0f, {77}},
      {2, 1, 64, 64, DType::F32, 5.0f, {40, 70}},
      {1, 2, 64, 96, DType::Q8_0, 0.0f, {33}},
      {1, 1, 36, 20, DType::F16, 0.0f, {100}},
      {1, 3, 36, 36, DType::F32, 0.0f, {40}},
      {2, 5, 64, 64, DType::F16, 5.0f, {33, 64}},
      {16, 2, 64, 64, DType::F32, 0.0f, std::vector<int32_t>(rising.begin(), rising.begin() + 16)},
      {4, 6, 72, 72, DType::F16, 0.0f, {100, 3, 64, 65}},
      {2, 3, 64, 40, DType::F32, 0.0f, {20, 21}},
      {1, 7, 64, 44, DType::F16, 0.0f, {50}},
      {64, 1, 64, 64, DType::F16, 0.0f, rising},
      {3, 12, 64, 64, DType::Q8_0, 0.0f, {50, 51, 52}},
      {1, 40, 64, 64, DType::F16, 0.0f, {45}},
      {1, 64, 128, 128, DType::Q4_0, 0.0f, {70}},
      {8, 8, 128, 128, DType::F16, 30.0f, {90, 91, 92, 93, 94, 95, 96, 97}},
  };
  for (const Case& c : cases) {
    const int64_t R = c.T * c.G, n_max = *std::max_element(c.n_kv.begin(), c.n_kv.end());
    const bool quant = c.cache == DType::Q8_0 || c.cache == DType::Q4_0;
    const Cache cache = make_cache(c.cache, n_max + 32, c.hd, c.hd_v, 21);  // + the next block, prefetched
    const int64_t q_tok = c.G * c.hd + 5, y_tok = c.G * c.hd_v + 3;
    const std::vector<float> q = normal(static_cast<size_t>(c.T * q_tok), 22, 2.0f);
    AttnTileArgs a;
    a.q = q.data();
    a.q_tok = q_tok;
    a.T = c.T;
    a.G = c.G;
    a.hd = c.hd;
    a.hd_v = c.hd_v;
    a.n_kv = c.n_kv.data();
    a.k = cache.k.data();
    a.v = cache.v.data();
    a.k_row = cache.k_row;
    a.v_row = cache.v_row;
    a.k_bytes = row_bytes(c.cache, c.hd);
    a.v_bytes = row_bytes(c.cache, c.hd_v);
    a.f16 = c.cache == DType::F16;
    a.scale = 1.0f / std::sqrt(static_cast<float>(c.hd)) / (c.softcap > 0.0f ? c.softcap : 1.0f);
    a.softcap = c.softcap;
    a.y_tok = y_tok;
    std::vector<float> want;
    for (const CpuKernels* t : tables()) {
      if (R > t->attn_tile_rows) continue;  // ops-attn.cpp never gives it such a tile
      std::vector<float> y(static_cast<size_t>(c.T * y_tok) + 16, -7.0f);
      std::vector<float> scratch(static_cast<size_t>(attn_tile_scratch(c.hd, c.hd_v)) + 16);
      a.scratch = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(scratch.data()) + 63) & ~uintptr_t{63});
      a.to_f32 = quant ? t->row_to_f32[type_slot(c.cache)] : nullptr;
      a.y = y.data();
      t->attn_tile(a);
      if (t == tables()[0]) want = y;
      for (size_t i = 0; i < y.size(); ++i)
        ASSERT_EQ(bits(y[i]), bits(want[i])) << "T " << c.T << " G " << c.G << " hd " << c.hd << "/" << c.hd_v << " "
                                             << dtype_name(c.cache) << " element " << i << " on " << t->isa;
    }
  }
}

}  // namespace
}  // namespace minfer::cpu
