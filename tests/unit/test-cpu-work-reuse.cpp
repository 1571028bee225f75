// The CPU backend's reuse of converted activations (ops.h, WorkActivations): a matmul that reads
// the tensor the previous matmul converted, to the same form, takes the work buffer as it is
// (a layer's q, k and v). Reuse must give the bits of a fresh conversion, and must not happen
// across a change of form (another activation type, GEMM or row kernels) or once the source
// bytes were written over. With one row, consecutive matmuls of one form also run as one job
// (op_matmuls_joint): the same comparison checks that path (its groups split across weights,
// each weight's rows past its last group).
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>

#include "backends/cpu/cpu-backend.h"
#include "backends/cpu/ops.h"
#include "graph/builder.h"
#include "graph/scheduler.h"
#include "quant/quant.h"

namespace minfer {
namespace {

std::vector<uint8_t> quantized(DType type, int64_t n_in, int64_t n_out, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 0.1f);
  std::vector<float> wf(static_cast<size_t>(n_in * n_out));
  for (float& v : wf) v = nd(rng);
  std::vector<uint8_t> q(row_bytes(type, n_in) * static_cast<size_t>(n_out));
  for (int64_t o = 0; o < n_out; ++o) quantize_row(type, wf.data() + o * n_in, q.data() + o * row_bytes(type, n_in), n_in);
  return q;
}

// Each output of `outs` matmuls of one input, computed in one graph (reuse possible) and each
// in a graph of its own (fresh conversion): the same bits. `one_form`: the graph of all of them
// must then have saved work (one row: a joint run; more: reused conversions), so the
// comparison really covers those paths.
void expect_reuse_exact(const std::vector<DType>& types, int64_t n_rows, bool one_form) {
  const int64_t n_in = 512, n_out = 16 * 5 + 3;
  std::vector<std::vector<uint8_t>> w;
  for (size_t i = 0; i < types.size(); ++i) w.push_back(quantized(types[i], n_in, n_out, 11 + static_cast<uint32_t>(i)));
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> xin(static_cast<size_t>(n_in * n_rows));
  for (float& v : xin) v = nd(rng);
  cpu::CpuBackend::Stats saved;
  auto run = [&](const std::vector<size_t>& which) {
    GraphBuilder b;
    const int x = b.input("x", DType::F32, {n_in, n_rows});
    std::vector<int> outs;
    for (size_t i : which) {
      std::string wname = "w", yname = "y";
      wname += std::to_string(i);
      yname += std::to_string(i);
      const int wi = b.weight(wname, types[i], {n_in, n_out}, w[i].data());
      outs.push_back(b.matmul(yname, wi, x));
    }
    cpu::CpuBackend cpu(2);
    Scheduler sched({&cpu});
    auto pg = sched.prepare(b.finish(outs), {});
    EXPECT_TRUE(pg) << pg.error().message;
    EXPECT_TRUE(sched.set_input(**pg, 0, xin.data(), xin.size() * 4));
    EXPECT_TRUE(sched.compute(**pg));
    std::vector<std::vector<float>> ys;
    for (int o : (*pg)->graph.outputs) {
      ys.emplace_back(static_cast<size_t>(n_out * n_rows));
      EXPECT_TRUE(sched.get_output(**pg, o, ys.back().data(), ys.back().size() * 4));
    }
    saved = cpu.stats();
    return ys;
  };
  std::vector<size_t> all;
  for (size_t i = 0; i < types.size(); ++i) all.push_back(i);
  const auto together = run(all);
  ASSERT_EQ(together.size(), types.size());
  if (one_form) {
    if (n_rows == 1)
      EXPECT_EQ(saved.joint_runs, 1) << "the matmuls did not run as one job";
    else
      EXPECT_EQ(saved.reused_conversions, static_cast<int64_t>(types.size()) - 1) << "a conversion was repeated";
  } else {
    EXPECT_EQ(saved.joint_runs + saved.reused_conversions, 0) << "work shared across forms";
  }
  for (size_t i = 0; i < types.size(); ++i) {
    const auto alone = run({i});
    EXPECT_EQ(std::memcmp(together[i].data(), alone[0].data(), alone[0].size() * 4), 0)
        << "matmul " << i << " (" << dtype_name(types[i]) << ") of " << types.size() << ", " << n_rows << " rows";
  }
}

TEST(CpuWorkReuse, SameFormGivesTheBitsOfAFreshConversion) {
  for (int64_t rows : {int64_t{1}, int64_t{37}}) {
    expect_reuse_exact({DType::Q4_0, DType::Q4_0, DType::Q8_0}, rows, true);  // q, k, v: one form (Q8_0 + sums + scales)
    expect_reuse_exact({DType::Q4_K, DType::Q6_K}, rows, true);               // Q8_K
  }
}

TEST(CpuWorkReuse, AChangeOfFormConvertsAgain) {
  for (int64_t rows : {int64_t{1}, int64_t{37}}) {
    expect_reuse_exact({DType::Q4_0, DType::Q4_K, DType::Q4_0}, rows, false);  // Q8_0, Q8_K, Q8_0 again
    expect_reuse_exact({DType::F16, DType::Q4_0, DType::F16}, rows, false);    // F16 rows as f32, Q8_0
  }
}

// The overlap test compute() applies after every matmul: byte ranges, ends exclusive.
TEST(CpuWorkReuse, OverlapIsTheSourceBytes) {
  Node x;
  x.type = DType::F32;
  x.ne = {64, 4, 1, 1};
  std::vector<float> buf(64 * 4 + 64);
  cpu::WorkActivations held{true, &x, buf.data() + 16, DType::Q8_0, true, false};
  EXPECT_TRUE(held.overlaps(buf.data() + 16, 4));
  EXPECT_TRUE(held.overlaps(buf.data(), 16 * 4 + 1));                // ends one byte into it
  EXPECT_FALSE(held.overlaps(buf.data(), 16 * 4));                   // ends where it starts
  EXPECT_TRUE(held.overlaps(buf.data() + 16 + 64 * 4 - 1, 4));       // its last float
  EXPECT_FALSE(held.overlaps(buf.data() + 16 + 64 * 4, 64));         // just past it
  held.valid = false;
  EXPECT_FALSE(held.overlaps(buf.data() + 16, 4));
}

}  // namespace
}  // namespace minfer
