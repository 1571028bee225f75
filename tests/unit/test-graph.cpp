// Graph IR, builder, memory planner (liveness, in-place, views, a property test on random
// graphs) and export.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <set>

#include <fmt/format.h>

#include "graph/builder.h"
#include "graph/export.h"
#include "graph/planner.h"

namespace minfer {
namespace {

void assign_all(Graph& g, int backend = 0) {
  for (Node& n : g.nodes) n.backend = backend;
}

TEST(GraphOps, NamesAreUniqueAndRoundTrip) {
  std::set<std::string_view> names;
  for (int i = 0; i < kOpCount; ++i) {
    const Op op = static_cast<Op>(i);
    EXPECT_TRUE(names.insert(op_name(op)).second) << op_name(op);
    EXPECT_EQ(op_from_name(op_name(op)), op);
    EXPECT_FALSE(op_help(op).empty());
  }
  EXPECT_FALSE(op_from_name("no_such_op").has_value());
}

TEST(GraphBuilder, ShapesNamesAndSources) {
  GraphBuilder b;
  const float w[8] = {};
  const int tok = b.input("inp_tokens", DType::I32, {3});
  const int emb = b.weight("token_embd.weight", DType::F32, {8, 10}, w);
  const int x = b.get_rows("inp_embd", emb, tok);
  const int wq = b.weight("blk.0.attn_q.weight", DType::F32, {8, 4}, w);
  const int q = b.matmul("blk.0.attn_q", wq, x);
  const int h = b.reshape("blk.0.attn_q.heads", q, {2, 2, 3});
  Graph g = b.finish({h});
  EXPECT_EQ(g.nodes[static_cast<size_t>(x)].ne, (Shape{8, 3, 1, 1}));
  EXPECT_EQ(g.nodes[static_cast<size_t>(q)].ne, (Shape{4, 3, 1, 1}));
  EXPECT_EQ(g.nodes[static_cast<size_t>(q)].src, (std::vector<int>{wq, x}));
  EXPECT_EQ(g.find("blk.0.attn_q"), q);
  EXPECT_EQ(g.find("nope"), -1);
  EXPECT_EQ(g.inputs, std::vector<int>{tok});
  EXPECT_EQ(shape_string(g.nodes[static_cast<size_t>(h)].ne), "[2, 2, 3]");
  EXPECT_TRUE(g.same_structure(g));
}

// A chain x -> silu -> silu -> ... : in-place all the way, a single buffer besides the input.
TEST(Planner, InPlaceChainUsesOneBuffer) {
  GraphBuilder b;
  const int x = b.input("x", DType::F32, {16, 4});
  int y = b.rms_norm("n", x, 1e-6f);
  for (int i = 0; i < 5; ++i) y = b.silu(fmt::format("s{}", i), y);
  Graph g = b.finish({y});
  assign_all(g);
  const MemoryPlan p = plan_memory(g, 1);
  const TensorMemory& out = p.nodes[static_cast<size_t>(y)];
  EXPECT_EQ(out.root, 1);  // the rms_norm's buffer, aliased by every silu
  EXPECT_EQ(p.nodes[static_cast<size_t>(x)].root, x);  // the input is never aliased
  EXPECT_EQ(p.arena_bytes[0], 2 * 16 * 4 * sizeof(float));
}

// An input is never reused even when its last reader is an in-place op.
TEST(Planner, InputsAreNeverReusedOrFreed) {
  GraphBuilder b;
  const int x = b.input("x", DType::F32, {64});
  const int y = b.silu("y", x);
  const int z = b.silu("z", y);
  const int w = b.silu("w", z);
  Graph g = b.finish({w});
  assign_all(g);
  const MemoryPlan p = plan_memory(g, 1);
  for (int id : {y, z, w}) {
    const TensorMemory& m = p.nodes[static_cast<size_t>(id)];
    EXPECT_NE(m.root, x);
    const TensorMemory& xm = p.nodes[static_cast<size_t>(x)];
    EXPECT_TRUE(m.offset >= xm.offset + 256 || m.offset + 256 <= xm.offset) << id;
  }
}

// A view keeps its source alive until the view's own last reader.
TEST(Planner, ViewsExtendLiveness) {
  GraphBuilder b;
  const int x = b.input("x", DType::F32, {8, 2});
  const int a = b.silu("a", x);                     // buffer A
  const int v = b.reshape("v", a, {16});             // view of A
  const int c = b.silu("c", b.rms_norm("t", x, 1e-6f));  // must not land on A
  const int d = b.add("d", b.reshape("c16", c, {16}), v);  // reads A through the view
  Graph g = b.finish({d});
  assign_all(g);
  const MemoryPlan p = plan_memory(g, 1);
  const TensorMemory& am = p.nodes[static_cast<size_t>(a)];
  EXPECT_EQ(p.nodes[static_cast<size_t>(v)].root, a);
  EXPECT_GE(am.last, d);
  const TensorMemory& cm = p.nodes[static_cast<size_t>(c)];
  EXPECT_NE(cm.root, a);
  EXPECT_TRUE(cm.offset >= am.offset + 64 || cm.offset + 64 <= am.offset);
}

TEST(Planner, WeightsExternalKvPersistentDeadNone) {
  GraphBuilder b;
  const float w[4] = {1, 2, 3, 4};
  const int pos = b.input("pos", DType::I32, {1});
  const int x = b.input("x", DType::F32, {4});
  const int wn = b.weight("w", DType::F32, {4}, w);
  const int cache = b.kv_cache("cache_k", 0, false, DType::F16, 4, 8);
  const int st = b.kv_store("store", cache, b.mul("m", x, wn), pos);
  Graph g = b.finish({st});
  assign_all(g);
  g.nodes.push_back(g.nodes.back());
  g.nodes.back().id = static_cast<int>(g.nodes.size() - 1);
  g.nodes.back().dead = true;
  const MemoryPlan p = plan_memory(g, 1);
  EXPECT_EQ(p.nodes[static_cast<size_t>(wn)].kind, TensorMemory::kExternal);
  EXPECT_EQ(p.nodes[static_cast<size_t>(cache)].kind, TensorMemory::kPersistent);
  EXPECT_EQ(p.nodes[static_cast<size_t>(st)].kind, TensorMemory::kPersistent);
  EXPECT_EQ(p.nodes[static_cast<size_t>(st)].root, cache);
  EXPECT_EQ(p.nodes.back().kind, TensorMemory::kNone);
}

// ---- property test: random graphs of element-wise ops and views ----

struct RandomGraph {
  Graph g;
  std::vector<std::vector<float>> input_values;
};

RandomGraph random_graph(std::mt19937& rng) {
  GraphBuilder b;
  const int64_t w = 1 + static_cast<int64_t>(rng() % 4) * 8;  // row width
  const int64_t rows = 1 + static_cast<int64_t>(rng() % 3);
  std::vector<int> pool;
  RandomGraph r;
  const int n_inputs = 1 + static_cast<int>(rng() % 3);
  for (int i = 0; i < n_inputs; ++i) {
    pool.push_back(b.input(fmt::format("in{}", i), DType::F32, {w, rows}));
    std::vector<float> v(static_cast<size_t>(w * rows));
    for (float& x : v) x = static_cast<float>(static_cast<int>(rng() % 200) - 100) / 50.0f;
    r.input_values.push_back(std::move(v));
  }
  const int n_ops = 4 + static_cast<int>(rng() % 30);
  for (int i = 0; i < n_ops; ++i) {
    // Prefer recent nodes so chains (and in-place chances) are common.
    auto pick = [&] {
      const size_t k = std::min<size_t>(pool.size(), 1 + rng() % 4);
      return pool[pool.size() - 1 - rng() % k];
    };
    const std::string name = fmt::format("op{}", i);
    int id;
    switch (rng() % 5) {
      case 0: id = b.add(name, pick(), pick()); break;
      case 1: id = b.mul(name, pick(), pick()); break;
      case 2: id = b.silu(name, pick()); break;
      case 3: id = b.rms_norm(name, pick(), 1e-5f); break;
      default: {  // a view, then an op on it, shaped back
        const int v = b.reshape(name + ".v", pick(), {w * rows});
        id = b.reshape(name, b.silu(name + ".s", v), {w, rows});
      }
    }
    pool.push_back(id);
  }
  std::vector<int> outs;
  for (int k = 0; k < 1 + static_cast<int>(rng() % 3); ++k) outs.push_back(pool[pool.size() - 1 - rng() % pool.size()]);
  std::sort(outs.begin(), outs.end());
  outs.erase(std::unique(outs.begin(), outs.end()), outs.end());
  r.g = b.finish(outs);
  return r;
}

// Executes g with node data at addr[id] (shared or private buffers alike).
void interpret(const Graph& g, const std::vector<float*>& addr, const RandomGraph& rg) {
  for (const Node& n : g.nodes) {
    float* y = addr[static_cast<size_t>(n.id)];
    const int64_t ne = n.n_elements(), ne0 = n.ne[0];
    auto src = [&](size_t i) { return addr[static_cast<size_t>(n.src[i])]; };
    switch (n.op) {
      case Op::kInput: {
        const size_t k = static_cast<size_t>(std::find(g.inputs.begin(), g.inputs.end(), n.id) - g.inputs.begin());
        std::memcpy(y, rg.input_values[k].data(), static_cast<size_t>(ne) * sizeof(float));
        break;
      }
      case Op::kAdd: for (int64_t i = 0; i < ne; ++i) y[i] = src(0)[i] + src(1)[i]; break;
      case Op::kMul: for (int64_t i = 0; i < ne; ++i) y[i] = src(0)[i] * src(1)[i]; break;
      case Op::kSilu: for (int64_t i = 0; i < ne; ++i) y[i] = src(0)[i] / (1.0f + std::exp(-src(0)[i])); break;
      case Op::kRmsNorm:
        for (int64_t r = 0; r < n.n_rows(); ++r) {
          double s = 0;
          for (int64_t i = 0; i < ne0; ++i) s += double(src(0)[r * ne0 + i]) * src(0)[r * ne0 + i];
          const float sc = 1.0f / std::sqrt(static_cast<float>(s / double(ne0)) + 1e-5f);
          for (int64_t i = 0; i < ne0; ++i) y[r * ne0 + i] = src(0)[r * ne0 + i] * sc;
        }
        break;
      case Op::kReshape: break;  // same storage
      default: FAIL() << "unexpected op";
    }
  }
}

TEST(Planner, RandomGraphsNeverOverlapLiveBuffersAndComputeTheSame) {
  std::mt19937 rng(1234);
  int aliased = 0;
  for (int iter = 0; iter < 500; ++iter) {
    RandomGraph rg = random_graph(rng);
    Graph& g = rg.g;
    assign_all(g);
    const MemoryPlan p = plan_memory(g, 1);
    // 1. No two distinct roots overlap in bytes while both are live.
    for (const Node& a : g.nodes) {
      const TensorMemory& ma = p.nodes[static_cast<size_t>(a.id)];
      if (ma.root != a.id || ma.kind != TensorMemory::kArena) continue;
      for (const Node& c : g.nodes) {
        const TensorMemory& mc = p.nodes[static_cast<size_t>(c.id)];
        if (c.id <= a.id || mc.root != c.id || mc.kind != TensorMemory::kArena) continue;
        const bool bytes = ma.offset < mc.offset + mc.size && mc.offset < ma.offset + ma.size;
        const bool time = ma.first <= mc.last && mc.first <= ma.last;
        ASSERT_FALSE(bytes && time) << "iter " << iter << ": '" << a.name << "' and '" << c.name << "' overlap";
      }
      ASSERT_LE(ma.offset + ma.size, p.arena_bytes[0]);
    }
    for (const Node& n : g.nodes) aliased += p.nodes[static_cast<size_t>(n.id)].root != n.id;
    // 2. Executing with the planned (shared) buffers gives the private-buffer results.
    std::vector<std::vector<float>> priv(g.nodes.size());
    std::vector<float*> pa(g.nodes.size());
    for (const Node& n : g.nodes) {
      if (n.op == Op::kReshape) {
        pa[static_cast<size_t>(n.id)] = pa[static_cast<size_t>(n.src[0])];
      } else {
        priv[static_cast<size_t>(n.id)].assign(static_cast<size_t>(n.n_elements()), 0.0f);
        pa[static_cast<size_t>(n.id)] = priv[static_cast<size_t>(n.id)].data();
      }
    }
    interpret(g, pa, rg);
    std::vector<float> arena(p.arena_bytes[0] / sizeof(float) + 1, std::nanf(""));
    std::vector<float*> sa(g.nodes.size());
    for (const Node& n : g.nodes) sa[static_cast<size_t>(n.id)] = arena.data() + p.nodes[static_cast<size_t>(n.id)].offset / sizeof(float);
    interpret(g, sa, rg);
    for (int o : g.outputs) {
      const int64_t ne = g.nodes[static_cast<size_t>(o)].n_elements();
      for (int64_t i = 0; i < ne; ++i)
        ASSERT_EQ(std::memcmp(&pa[static_cast<size_t>(o)][i], &sa[static_cast<size_t>(o)][i], 4), 0)
            << "iter " << iter << " output " << g.nodes[static_cast<size_t>(o)].name << "[" << i << "]";
    }
  }
  EXPECT_GT(aliased, 100);  // the generator does exercise in-place and views
}

TEST(Export, DotAndJsonNameEveryLiveNode) {
  GraphBuilder b;
  const int x = b.input("x", DType::F32, {8});
  const int s = b.silu("blk.0.ffn_gate.silu", x);
  Graph g = b.finish({b.mul("blk.0.ffn_swiglu", s, x)});
  assign_all(g);
  const MemoryPlan p = plan_memory(g, 1);
  const std::string dot = graph_to_dot(g, &p, {"cpu"});
  EXPECT_NE(dot.find("digraph"), std::string::npos);
  EXPECT_NE(dot.find("blk.0.ffn_swiglu"), std::string::npos);
  GraphExportInfo info{"m", "llama", "decode", {{"n_tokens", "1"}}};
  const std::string js = graph_to_json(g, &p, {"cpu"}, info);
  EXPECT_NE(js.find("\"format\":\"minfer-graph\""), std::string::npos);
  EXPECT_NE(js.find("\"name\":\"blk.0.ffn_gate.silu\",\"op\":\"silu\""), std::string::npos);
  EXPECT_NE(js.find("\"buffer\":{\"kind\":\"arena\""), std::string::npos);
  EXPECT_NE(js.find("\"n_tokens\":1"), std::string::npos);
}

}  // namespace
}  // namespace minfer
