// Fusion rules: legality (each condition that must block a rewrite), the rewrite itself, and
// fused == unfused bit for bit on the CPU backend.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "backends/cpu/cpu-backend.h"
#include "graph/builder.h"
#include "graph/fusion.h"
#include "graph/scheduler.h"

namespace minfer {
namespace {

struct Swiglu {
  Graph g;
  int x, y, silu, mul;
};

// mul(silu(x), y) with knobs for each legality condition.
Swiglu make_swiglu(bool silu_twice = false, bool silu_output = false, bool broadcast = false, bool swap = false) {
  GraphBuilder b;
  Swiglu s;
  s.x = b.input("x", DType::F32, {8, 2});
  s.y = broadcast ? b.input("y", DType::F32, {8}) : b.input("y", DType::F32, {8, 2});
  s.silu = b.silu("blk.0.ffn_gate.silu", s.x);
  s.mul = swap ? b.mul("blk.0.ffn_swiglu", s.silu, s.x) : b.mul("blk.0.ffn_swiglu", s.silu, s.y);
  if (swap) {  // mul(y, silu(x)): y first
    s.g = Graph{};
    GraphBuilder b2;
    s.x = b2.input("x", DType::F32, {8, 2});
    s.y = b2.input("y", DType::F32, {8, 2});
    s.silu = b2.silu("blk.0.ffn_gate.silu", s.x);
    s.mul = b2.mul("blk.0.ffn_swiglu", s.y, s.silu);
    s.g = b2.finish({s.mul});
    for (Node& n : s.g.nodes) n.backend = 0;
    return s;
  }
  std::vector<int> outs{s.mul};
  if (silu_twice) outs.push_back(b.add("other", s.silu, s.x));
  if (silu_output) outs.push_back(s.silu);
  s.g = b.finish(outs);
  for (Node& n : s.g.nodes) n.backend = 0;
  return s;
}

TEST(FusionSwiglu, MatchesAndRewrites) {
  Swiglu s = make_swiglu();
  auto m = match_swiglu(s.g, use_counts(s.g), s.mul);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->rule, FusionRule::kSwiglu);
  EXPECT_EQ(m->absorbed, s.silu);
  apply_fusion(s.g, *m);
  const Node& f = s.g.nodes[static_cast<size_t>(s.mul)];
  EXPECT_EQ(f.op, Op::kSwiglu);
  EXPECT_EQ(f.src, (std::vector<int>{s.x, s.y}));
  EXPECT_EQ(f.name, "blk.0.ffn_swiglu");
  EXPECT_TRUE(f.fused);
  EXPECT_TRUE(s.g.nodes[static_cast<size_t>(s.silu)].dead);
}

TEST(FusionSwiglu, MatchesEitherOperandOrder) {
  Swiglu s = make_swiglu(false, false, false, true);
  auto m = match_swiglu(s.g, use_counts(s.g), s.mul);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->fused.src, (std::vector<int>{s.x, s.y}));
}

TEST(FusionSwiglu, BlockedWhenIllegal) {
  {
    Swiglu s = make_swiglu(/*silu_twice=*/true);
    EXPECT_FALSE(match_swiglu(s.g, use_counts(s.g), s.mul)) << "silu has another consumer";
  }
  {
    Swiglu s = make_swiglu(false, /*silu_output=*/true);
    EXPECT_FALSE(match_swiglu(s.g, use_counts(s.g), s.mul)) << "silu is a graph output";
  }
  {
    Swiglu s = make_swiglu(false, false, /*broadcast=*/true);
    EXPECT_FALSE(match_swiglu(s.g, use_counts(s.g), s.mul)) << "y broadcasts";
  }
  {
    Swiglu s = make_swiglu();
    s.g.nodes[static_cast<size_t>(s.silu)].backend = 1;
    EXPECT_FALSE(match_swiglu(s.g, use_counts(s.g), s.mul)) << "silu on another backend";
  }
  {
    Swiglu s = make_swiglu();
    EXPECT_FALSE(match_swiglu(s.g, use_counts(s.g), s.silu)) << "root is not a mul";
    EXPECT_FALSE(match_rms_norm_mul(s.g, use_counts(s.g), s.mul)) << "not a norm";
  }
}

struct NormMul {
  Graph g;
  int x, w, norm, mul;
};

NormMul make_norm_mul(int64_t w_rows = 1, bool norm_twice = false, DType w_type = DType::F32) {
  static const float wdata[16] = {};
  GraphBuilder b;
  NormMul s;
  s.x = b.input("x", DType::F32, {8, 2});
  s.w = w_rows == 1 ? b.weight("blk.0.attn_norm.weight", w_type, {8}, wdata) : b.input("w", DType::F32, {8, 2});
  s.norm = b.rms_norm("blk.0.attn_norm.rms", s.x, 1e-6f);
  if (w_type == DType::F32) {
    s.mul = b.mul("blk.0.attn_norm", s.norm, s.w);
  } else {  // the builder refuses a non-f32 operand; make it by hand
    s.mul = b.mul("blk.0.attn_norm", s.norm, s.x);
  }
  std::vector<int> outs{s.mul};
  if (norm_twice) outs.push_back(b.silu("other", s.norm));
  s.g = b.finish(outs);
  if (w_type != DType::F32) {
    s.g.nodes[static_cast<size_t>(s.mul)].src[1] = s.w;
  }
  for (Node& n : s.g.nodes) n.backend = 0;
  return s;
}

TEST(FusionGeglu, MatchesAndRewritesOnlyGelu) {
  GraphBuilder b;
  const int x = b.input("x", DType::F32, {8, 2});
  const int y = b.input("y", DType::F32, {8, 2});
  const int g = b.gelu("blk.0.ffn_gate.gelu", x);
  const int m = b.mul("blk.0.ffn_geglu", g, y);
  Graph gr = b.finish({m});
  for (Node& n : gr.nodes) n.backend = 0;
  EXPECT_FALSE(match_swiglu(gr, use_counts(gr), m)) << "gelu is not silu";
  auto r = match_geglu(gr, use_counts(gr), m);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->rule, FusionRule::kGeglu);
  apply_fusion(gr, *r);
  EXPECT_EQ(gr.nodes[static_cast<size_t>(m)].op, Op::kGeglu);
  EXPECT_EQ(gr.nodes[static_cast<size_t>(m)].src, (std::vector<int>{x, y}));
  EXPECT_TRUE(gr.nodes[static_cast<size_t>(g)].dead);
  Swiglu s = make_swiglu();
  EXPECT_FALSE(match_geglu(s.g, use_counts(s.g), s.mul)) << "silu is not gelu";
}

TEST(FusionRmsNormMul, MatchesAndRewrites) {
  NormMul s = make_norm_mul();
  auto m = match_rms_norm_mul(s.g, use_counts(s.g), s.mul);
  ASSERT_TRUE(m.has_value());
  apply_fusion(s.g, *m);
  const Node& f = s.g.nodes[static_cast<size_t>(s.mul)];
  EXPECT_EQ(f.op, Op::kRmsNormMul);
  EXPECT_EQ(f.src, (std::vector<int>{s.x, s.w}));
  EXPECT_FLOAT_EQ(f.params.eps, 1e-6f);
  EXPECT_TRUE(s.g.nodes[static_cast<size_t>(s.norm)].dead);
}

TEST(FusionRmsNormMul, BlockedWhenIllegal) {
  {
    NormMul s = make_norm_mul(/*w_rows=*/2);
    EXPECT_FALSE(match_rms_norm_mul(s.g, use_counts(s.g), s.mul)) << "w is not a single row";
  }
  {
    NormMul s = make_norm_mul(1, /*norm_twice=*/true);
    EXPECT_FALSE(match_rms_norm_mul(s.g, use_counts(s.g), s.mul)) << "norm has another consumer";
  }
  {
    NormMul s = make_norm_mul(1, false, DType::F16);
    EXPECT_FALSE(match_rms_norm_mul(s.g, use_counts(s.g), s.mul)) << "w is not f32";
  }
  {
    NormMul s = make_norm_mul();
    s.g.nodes[static_cast<size_t>(s.norm)].backend = 1;
    EXPECT_FALSE(match_rms_norm_mul(s.g, use_counts(s.g), s.mul)) << "norm on another backend";
  }
}

TEST(FusionPass, GatedByTheBackendAndCounts) {
  NormMul s = make_norm_mul();
  Graph g = s.g;
  EXPECT_EQ(fuse_graph(g, [](const Node&) { return false; }), 0);
  EXPECT_TRUE(g.same_structure(s.g));
  EXPECT_EQ(fuse_graph(g, [](const Node& n) { return n.op == Op::kRmsNormMul; }), 1);
}

// A block using both patterns, run on the CPU backend with and without the pass: every output
// bit must agree (the fused kernels evaluate the unfused expressions).
TEST(FusionPass, FusedEqualsUnfusedBitForBit) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> w(64), xin(64 * 5);
  for (float& v : w) v = 1.0f + 0.1f * nd(rng);
  for (float& v : xin) v = nd(rng);
  auto build = [&] {
    GraphBuilder b;
    const int x = b.input("x", DType::F32, {64, 5});
    const int wn = b.weight("norm.weight", DType::F32, {64}, w.data());
    const int h = b.mul("norm", b.rms_norm("norm.rms", x, 1e-5f), wn);
    const int a = b.mul("swiglu", b.silu("gate.silu", h), x);
    const int g = b.mul("geglu", x, b.gelu("gate.gelu", a));  // y first: either order fuses
    return b.finish({g});
  };
  std::vector<float> out[2];
  for (int fuse = 0; fuse < 2; ++fuse) {
    cpu::CpuBackend cpu(2);
    Scheduler sched({&cpu});
    auto pg = sched.prepare(build(), {.fuse = fuse == 1});
    ASSERT_TRUE(pg) << pg.error().message;
    EXPECT_EQ((*pg)->n_fused, fuse ? 3 : 0);
    ASSERT_TRUE(sched.set_input(**pg, 0, xin.data(), xin.size() * 4));
    ASSERT_TRUE(sched.compute(**pg));
    out[fuse].resize(xin.size());
    ASSERT_TRUE(sched.get_output(**pg, (*pg)->graph.outputs[0], out[fuse].data(), xin.size() * 4));
  }
  EXPECT_EQ(std::memcmp(out[0].data(), out[1].data(), out[0].size() * 4), 0);
}

}  // namespace
}  // namespace minfer
