// Fusion rules: legality (each condition that must block a rewrite), the rewrite itself, and
// fused == unfused bit for bit on the CPU backend.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "backends/cpu/cpu-backend.h"
#include "graph/builder.h"
#include "graph/fusion.h"
#include "graph/scheduler.h"
#include "quant/quant.h"

namespace minfer {
namespace {

// The finished graph with every node on backend 0.
Graph on_one_backend(GraphBuilder& b, const std::vector<int>& outs) {
  Graph g = b.finish(outs);
  for (Node& n : g.nodes) n.backend = 0;
  return g;
}

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
  s.g = on_one_backend(b, outs);
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

struct GateUp {
  Graph g;
  int x, wg, wu, gate, up, swiglu;
};

// swiglu(matmul(Wg, x), matmul(Wu, x)) with knobs for each legality condition.
GateUp make_gate_up(bool gate_twice = false, bool other_x = false, DType up_type = DType::Q8_0, bool up_output = false) {
  static const uint8_t wdata[34 * 16] = {};
  GraphBuilder b;
  GateUp s;
  s.x = b.input("x", DType::F32, {32, 3});
  const int x2 = other_x ? b.input("x2", DType::F32, {32, 3}) : s.x;
  s.wg = b.weight("blk.0.ffn_gate.weight", DType::Q8_0, {32, 16}, wdata);
  s.wu = b.weight("blk.0.ffn_up.weight", up_type, {32, 16}, wdata);
  s.gate = b.matmul("blk.0.ffn_gate", s.wg, s.x);
  s.up = b.matmul("blk.0.ffn_up", s.wu, x2);
  s.swiglu = b.swiglu("blk.0.ffn_swiglu", s.gate, s.up);
  std::vector<int> outs{s.swiglu};
  if (gate_twice) outs.push_back(b.silu("other", s.gate));
  if (up_output) outs.push_back(s.up);
  s.g = on_one_backend(b, outs);
  return s;
}

TEST(FusionMatmulSwiglu, MatchesAndRewrites) {
  GateUp s = make_gate_up();
  auto m = match_matmul_swiglu(s.g, use_counts(s.g), s.swiglu);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->fused.op, Op::kMatmulSwiglu);
  EXPECT_EQ(m->fused.src, (std::vector<int>{s.wg, s.wu, s.x}));
  apply_fusion(s.g, *m);
  EXPECT_TRUE(s.g.nodes[static_cast<size_t>(s.gate)].dead);
  EXPECT_TRUE(s.g.nodes[static_cast<size_t>(s.up)].dead);
  EXPECT_EQ(s.g.nodes[static_cast<size_t>(s.swiglu)].op, Op::kMatmulSwiglu);
}

TEST(FusionMatmulSwiglu, BlockedWhenIllegal) {
  {
    GateUp s = make_gate_up(/*gate_twice=*/true);
    EXPECT_FALSE(match_matmul_swiglu(s.g, use_counts(s.g), s.swiglu)) << "gate has another consumer";
  }
  {
    GateUp s = make_gate_up(false, /*other_x=*/true);
    EXPECT_FALSE(match_matmul_swiglu(s.g, use_counts(s.g), s.swiglu)) << "gate and up read different inputs";
  }
  {
    GateUp s = make_gate_up(false, false, /*up_type=*/DType::Q4_0);
    EXPECT_FALSE(match_matmul_swiglu(s.g, use_counts(s.g), s.swiglu)) << "weights of two types";
  }
  {
    GateUp s = make_gate_up(false, false, DType::Q8_0, /*up_output=*/true);
    EXPECT_FALSE(match_matmul_swiglu(s.g, use_counts(s.g), s.swiglu)) << "up is a graph output";
  }
  {
    GateUp s = make_gate_up();
    s.g.nodes[static_cast<size_t>(s.up)].backend = 1;
    EXPECT_FALSE(match_matmul_swiglu(s.g, use_counts(s.g), s.swiglu)) << "up on another backend";
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

// An FFN's gate and up projections (real quantized weights, repacked by the CPU backend) with
// and without matmul_swiglu: the same bits for a decode row, whole 16-token tiles with a tail,
// weight rows past the last 16-row group, and every weight type family.
TEST(FusionPass, MatmulSwigluEqualsUnfusedBitForBit) {
  std::mt19937 rng(9);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (DType type : {DType::Q4_0, DType::Q4_K, DType::Q6_K, DType::F16}) {
    const int64_t n_in = type == DType::Q4_0 || type == DType::F16 ? 320 : 512;
    for (int64_t n_out : {int64_t{16 * 40}, int64_t{16 * 3 + 5}}) {
      std::vector<float> wf(static_cast<size_t>(n_in * n_out));
      std::vector<uint8_t> wq[2];
      for (auto& q : wq) {
        for (float& v : wf) v = 0.1f * nd(rng);
        q.resize(row_bytes(type, n_in) * static_cast<size_t>(n_out));
        for (int64_t o = 0; o < n_out; ++o) quantize_row(type, wf.data() + o * n_in, q.data() + o * row_bytes(type, n_in), n_in);
      }
      for (int64_t n_rows : {int64_t{1}, int64_t{37}}) {
        std::vector<float> xin(static_cast<size_t>(n_in * n_rows));
        for (float& v : xin) v = nd(rng);
        auto build = [&] {
          GraphBuilder b;
          const int x = b.input("x", DType::F32, {n_in, n_rows});
          const int wg = b.weight("ffn_gate.weight", type, {n_in, n_out}, wq[0].data());
          const int wu = b.weight("ffn_up.weight", type, {n_in, n_out}, wq[1].data());
          return b.finish({b.mul("ffn_swiglu", b.silu("ffn_gate.silu", b.matmul("ffn_gate", wg, x)), b.matmul("ffn_up", wu, x))});
        };
        std::vector<float> out[2];
        for (int fuse = 0; fuse < 2; ++fuse) {
          cpu::CpuBackend cpu(2);
          Scheduler sched({&cpu});
          auto pg = sched.prepare(build(), {.fuse = fuse == 1});
          ASSERT_TRUE(pg) << pg.error().message;
          EXPECT_EQ((*pg)->n_fused, fuse ? 2 : 0);
          ASSERT_TRUE(sched.set_input(**pg, 0, xin.data(), xin.size() * 4));
          ASSERT_TRUE(sched.compute(**pg));
          out[fuse].resize(static_cast<size_t>(n_out * n_rows));
          ASSERT_TRUE(sched.get_output(**pg, (*pg)->graph.outputs[0], out[fuse].data(), out[fuse].size() * 4));
        }
        EXPECT_EQ(std::memcmp(out[0].data(), out[1].data(), out[0].size() * 4), 0)
            << dtype_name(type) << " n_out " << n_out << " rows " << n_rows;
      }
    }
  }
}

}  // namespace
}  // namespace minfer
