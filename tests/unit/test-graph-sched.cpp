// Scheduler: backend assignment by priority and supports_op, splits and cross-backend copies
// (with a second, fake host backend that only adds), persistent regions across graphs, and
// arena discarding when another graph runs.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "backends/cpu/cpu-backend.h"
#include "core/process-memory.h"
#include "graph/builder.h"
#include "graph/scheduler.h"

namespace minfer {
namespace {

// Host memory, only kAdd, higher priority than the CPU: every add goes here.
class AddOnlyBackend final : public Backend {
 public:
  std::string_view name() const override { return "adder"; }
  int priority() const override { return 200; }
  bool supports_op(const Graph&, const Node& n) const override { return n.op == Op::kAdd; }
  Expected<BackendBuffer> alloc(size_t bytes) override { return BackendBuffer{std::calloc(bytes + 64, 1), bytes}; }
  void free(BackendBuffer b) override { std::free(b.base); }
  // Loses the contents for real (poison), so a graph that relied on them would compute garbage.
  void discard(BackendBuffer b) override {
    std::memset(b.base, 0xff, b.size);
    ++discards;
  }
  void write(void* dst, const void* host, size_t n) override { std::memcpy(dst, host, n); ++writes; }
  void read(void* host, const void* src, size_t n) override { std::memcpy(host, src, n); }
  Status prepare(const Graph&, std::span<const int>) override { return Status::ok(); }
  Status compute(const Graph& g, std::span<const int> nodes, std::span<void* const> addrs) override {
    for (int id : nodes) {
      const Node& n = g.nodes[static_cast<size_t>(id)];
      const float* a = static_cast<const float*>(addrs[static_cast<size_t>(n.src[0])]);
      const float* b = static_cast<const float*>(addrs[static_cast<size_t>(n.src[1])]);
      float* y = static_cast<float*>(addrs[static_cast<size_t>(id)]);
      for (int64_t i = 0; i < n.n_elements(); ++i) y[i] = a[i] + b[i];
      ++computed;
    }
    return Status::ok();
  }
  int writes = 0, computed = 0, discards = 0;
};

Graph mixed_graph() {
  GraphBuilder b;
  const int x = b.input("x", DType::F32, {16, 2});
  const int s = b.silu("s", x);
  const int a = b.add("a", s, x);  // -> adder (needs s and x copied over)
  const int t = b.silu("t", a);    // -> cpu (needs a copied back)
  return b.finish({b.add("out", t, s)});
}

TEST(Scheduler, SplitsAndCopiesAcrossBackends) {
  std::vector<float> x(32);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) / 8.0f - 2.0f;
  std::vector<float> want(32), got(32);
  {
    cpu::CpuBackend cpu(1);
    Scheduler sched({&cpu});
    auto pg = sched.prepare(mixed_graph(), {});
    ASSERT_TRUE(pg) << pg.error().message;
    EXPECT_EQ((*pg)->splits.size(), 1u);
    ASSERT_TRUE(sched.set_input(**pg, 0, x.data(), 128));
    ASSERT_TRUE(sched.compute(**pg));
    ASSERT_TRUE(sched.get_output(**pg, (*pg)->graph.outputs[0], want.data(), 128));
  }
  cpu::CpuBackend cpu(1);
  AddOnlyBackend adder;
  Scheduler sched({&cpu, &adder});
  auto pg = sched.prepare(mixed_graph(), {});
  ASSERT_TRUE(pg) << pg.error().message;
  const Graph& g = (*pg)->graph;
  int n_copies = 0;
  for (const Node& n : g.nodes) n_copies += n.op == Op::kCopy;
  EXPECT_EQ(n_copies, 4);  // s and x to the adder, a back to the cpu, t to the adder
  ASSERT_EQ((*pg)->splits.size(), 4u);  // cpu [s], adder [a], cpu [t], adder [out]
  EXPECT_EQ((*pg)->splits[1].backend, 1);
  EXPECT_EQ(g.nodes[static_cast<size_t>(g.find("a"))].backend, 1);
  EXPECT_EQ(g.nodes[static_cast<size_t>(g.find("t"))].backend, 0);
  EXPECT_GT((*pg)->plan.arena_bytes[1], 0u);
  ASSERT_TRUE(sched.set_input(**pg, g.inputs[0], x.data(), 128));
  ASSERT_TRUE(sched.compute(**pg));
  ASSERT_TRUE(sched.get_output(**pg, g.outputs[0], got.data(), 128));
  EXPECT_EQ(adder.computed, 2);
  EXPECT_EQ(std::memcmp(want.data(), got.data(), 128), 0);
}

TEST(Scheduler, UnsupportedNodeIsAnErrorNamingIt) {
  GraphBuilder b;
  static const uint8_t w[66 * 4] = {};
  const int x = b.input("x", DType::F32, {256});
  const int wn = b.weight("blk.0.attn_q.weight", DType::IQ2_XXS, {256, 4}, w);
  Graph g = b.finish({b.matmul("blk.0.attn_q", wn, x)});
  cpu::CpuBackend cpu(1);
  Scheduler sched({&cpu});
  auto pg = sched.prepare(std::move(g), {});
  ASSERT_FALSE(pg);
  EXPECT_NE(pg.error().message.find("blk.0.attn_q"), std::string::npos) << pg.error().message;
  EXPECT_NE(pg.error().message.find("IQ2_XXS"), std::string::npos) << pg.error().message;
}

Graph kv_graph(int64_t n_ctx, DType type) {
  GraphBuilder b;
  const int pos = b.input("pos", DType::I32, {1});
  const int x = b.input("x", DType::F32, {4, 1});
  const int cache = b.kv_cache("blk.0.cache_k", 0, false, type, 4, n_ctx);
  const int st = b.kv_store("blk.0.cache_k.store", cache, x, pos);
  return b.finish({st});
}

TEST(Scheduler, PersistentRegionsSurviveAcrossGraphs) {
  cpu::CpuBackend cpu(1);
  Scheduler sched({&cpu});
  auto a = sched.prepare(kv_graph(8, DType::F32), {});
  ASSERT_TRUE(a);
  const float x[4] = {1, 2, 3, 4};
  const int32_t pos = 5;
  ASSERT_TRUE(sched.set_input(**a, 0, &pos, 4));
  ASSERT_TRUE(sched.set_input(**a, 1, x, 16));
  ASSERT_TRUE(sched.compute(**a));
  a->reset();
  auto b = sched.prepare(kv_graph(8, DType::F32), {});
  ASSERT_TRUE(b);
  float row[4];
  const float* base = static_cast<const float*>((*b)->addrs[2]);
  std::memcpy(row, base + 5 * 4, 16);
  EXPECT_EQ(std::memcmp(row, x, 16), 0);
  EXPECT_EQ(sched.persistent_bytes(), 8u * 4 * 4);
  auto c = sched.prepare(kv_graph(16, DType::F32), {});  // same name, other shape
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message.find("blk.0.cache_k"), std::string::npos);
}

TEST(Scheduler, OnlyTheGraphComputedLastKeepsItsArenas) {
  std::vector<float> x(32), want(32), got(32);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) / 8.0f - 2.0f;
  cpu::CpuBackend cpu(1);
  AddOnlyBackend adder;
  Scheduler sched({&cpu, &adder});
  auto a = sched.prepare(mixed_graph(), {});
  auto b = sched.prepare(mixed_graph(), {});
  ASSERT_TRUE(a && b);
  auto run = [&](PreparedGraph& pg, float* out) {
    ASSERT_TRUE(sched.set_input(pg, pg.graph.inputs[0], x.data(), 128));
    ASSERT_TRUE(sched.compute(pg));
    ASSERT_TRUE(sched.get_output(pg, pg.graph.outputs[0], out, 128));
  };
  run(**a, want.data());
  run(**a, got.data());  // the same graph again: nothing discarded
  EXPECT_EQ(adder.discards, 0);
  run(**b, got.data());  // another graph: a's adder arena is dropped
  EXPECT_EQ(adder.discards, 1);
  EXPECT_EQ(std::memcmp(want.data(), got.data(), 128), 0);
  run(**a, got.data());  // a again, from poisoned scratch: still right
  EXPECT_EQ(adder.discards, 2);
  EXPECT_EQ(std::memcmp(want.data(), got.data(), 128), 0);
  a->reset();            // the resident graph goes away: nothing left to discard
  run(**b, got.data());
  EXPECT_EQ(adder.discards, 2);
  EXPECT_EQ(std::memcmp(want.data(), got.data(), 128), 0);
}

TEST(CpuBackend, LargeBuffersAreZeroAndDiscardReturnsTheirPages) {
  cpu::CpuBackend cpu(1);
  constexpr size_t kBytes = size_t{64} << 20;
  auto buf = cpu.alloc(kBytes);
  ASSERT_TRUE(buf);
  auto* p = static_cast<uint8_t*>(buf->base);
  const size_t before = process_memory().rss;
  for (size_t i = 0; i < kBytes; i += 4096) ASSERT_EQ(p[i], 0) << "at byte " << i;
  std::memset(p, 7, kBytes);
  const size_t touched = process_memory().rss;
  EXPECT_GE(touched, before + kBytes * 9 / 10);
  cpu.discard(*buf);
  const size_t after = process_memory().rss;
  EXPECT_LE(after + kBytes * 9 / 10, touched);
  EXPECT_EQ(p[12345], 0);  // dropped pages come back zero-filled
  cpu.free(*buf);
}

}  // namespace
}  // namespace minfer
