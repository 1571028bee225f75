// The per-tensor type choices of the quantize mixes.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "quantize/mix.h"

namespace minfer {
namespace {

TEST(QuantizeMix, FileTypeNames) {
  EXPECT_EQ(file_type_from_name("Q4_K"), FileType::Q4_K_M);
  EXPECT_EQ(file_type_from_name("Q3_K_L"), FileType::Q3_K_L);
  EXPECT_EQ(file_type_from_name("IQ4_NL"), FileType::IQ4_NL);
  EXPECT_FALSE(file_type_from_name("Q9_0"));
  EXPECT_EQ(file_type_base(FileType::Q5_K_S), DType::Q5_K);
  EXPECT_EQ(static_cast<uint32_t>(FileType::Q4_K_M), 15u);  // llama_ftype value
}

TEST(QuantizeMix, OneDimensionalAndNonWeightsStayF32) {
  MixPlanner p(FileType::Q4_0, {.n_layer = 4});
  EXPECT_EQ(p.choose("blk.0.attn_norm.weight", {896}), DType::F32);
  EXPECT_EQ(p.choose("blk.0.attn_q.bias", {896}), DType::F32);
  EXPECT_EQ(p.choose("blk.0.attn_q.weight", {896, 896}), DType::Q4_0);
}

TEST(QuantizeMix, OutputGetsQ6K) {
  MixPlanner p(FileType::Q4_K_M, {.n_layer = 24, .has_output = true});
  EXPECT_EQ(p.choose("output.weight", {1024, 32000}), DType::Q6_K);
  EXPECT_EQ(p.choose("token_embd.weight", {1024, 32000}), DType::Q4_K);
  MixPlanner tied(FileType::Q4_0, {.n_layer = 24, .has_output = false});
  EXPECT_EQ(tied.choose("token_embd.weight", {1024, 32000}), DType::Q6_K);
  MixPlanner q8(FileType::Q8_0, {.n_layer = 24, .has_output = false});
  EXPECT_EQ(q8.choose("token_embd.weight", {1024, 32000}), DType::Q8_0);
}

TEST(QuantizeMix, Q4KMUsesMoreBitsOnSensitiveLayers) {
  const int n = 24;
  MixPlanner p(FileType::Q4_K_M, {.n_layer = n});
  std::vector<DType> v, d;
  for (int i = 0; i < n; ++i) {
    v.push_back(p.choose(fmt::format("blk.{}.attn_v.weight", i), {1024, 256}));
    d.push_back(p.choose(fmt::format("blk.{}.ffn_down.weight", i), {4096, 1024}));
  }
  // First eighth (0..2), last eighth (21..23), and every third layer between (5, 8, ...).
  for (int i = 0; i < n; ++i) {
    const bool more = i < 3 || i >= 21 || (i - 3) % 3 == 2;
    EXPECT_EQ(v[i], more ? DType::Q6_K : DType::Q4_K) << i;
    EXPECT_EQ(d[i], more ? DType::Q6_K : DType::Q4_K) << i;
  }
}

TEST(QuantizeMix, SmallTypesRaiseAttentionAndFfn) {
  MixPlanner q2(FileType::Q2_K, {.n_layer = 8, .n_head = 8, .n_head_kv = 2});
  EXPECT_EQ(q2.choose("blk.0.attn_v.weight", {1024, 256}), DType::Q4_K);  // GQA >= 4
  EXPECT_EQ(q2.choose("blk.0.ffn_down.weight", {4096, 1024}), DType::Q3_K);
  EXPECT_EQ(q2.choose("blk.0.attn_output.weight", {1024, 1024}), DType::Q3_K);
  EXPECT_EQ(q2.choose("blk.0.ffn_up.weight", {1024, 4096}), DType::Q2_K);
  MixPlanner l(FileType::Q3_K_L, {.n_layer = 8});
  EXPECT_EQ(l.choose("blk.0.attn_v.weight", {1024, 256}), DType::Q5_K);
  EXPECT_EQ(l.choose("blk.0.attn_output.weight", {1024, 1024}), DType::Q5_K);
  MixPlanner s(FileType::Q3_K_S, {.n_layer = 8});
  EXPECT_EQ(s.choose("blk.0.attn_v.weight", {1024, 256}), DType::Q3_K);
}

TEST(QuantizeMix, RowsNotMultipleOf256FallBack) {
  MixPlanner p(FileType::Q4_K_S, {.n_layer = 24});
  EXPECT_EQ(p.choose("blk.9.ffn_up.weight", {896, 4864}), DType::Q5_0);  // 896 % 256 != 0
  MixPlanner q6(FileType::Q6_K, {.n_layer = 24});
  EXPECT_EQ(q6.choose("blk.9.ffn_up.weight", {896, 4864}), DType::Q8_0);
  MixPlanner q2(FileType::Q2_K, {.n_layer = 24});
  EXPECT_EQ(q2.choose("blk.9.ffn_up.weight", {896, 4864}), DType::IQ4_NL);
  MixPlanner odd(FileType::Q4_0, {.n_layer = 24});
  EXPECT_EQ(odd.choose("blk.9.ffn_up.weight", {100, 10}), DType::F16);
}

TEST(QuantizeMix, PureKeepsBaseType) {
  MixPlanner p(FileType::Q4_K_M, {.n_layer = 24}, /*pure=*/true);
  EXPECT_EQ(p.choose("output.weight", {1024, 32000}), DType::Q4_K);
  EXPECT_EQ(p.choose("blk.0.attn_v.weight", {1024, 256}), DType::Q4_K);
}

}  // namespace
}  // namespace minfer
