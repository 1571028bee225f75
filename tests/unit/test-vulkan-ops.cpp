// The Vulkan backend's op harness: every op it supports, on odd and even shapes (row lengths
// 1, 7, 64, 4097; 1, 3 and 512 rows; broadcast and full second operands), run through the
// scheduler on the first Vulkan device (lavapipe in CI) and on the CPU backend alone, compared.
// add, mul and scale are single IEEE f32 operations per element: equal bit for bit. The rest
// are bounded by an NMSE of 1e-10: rms_norm sums squares in f32 on the device (a tree per row)
// and in double on the CPU (llama.cpp's order), f32 rounding of up to 4097 terms stays near
// 1e-14; silu's exp and softcap's tanh are the driver's (a few ulp) against the CPU's
// polynomial and libm; gelu rounds to f16 on both sides, so a tanh that differs by an ulp can
// move a result by one f16 step at a rounding boundary (rare: ~1e-7 relative each). A wrong
// formula, row or operand is ~1e-2 or worse.
// No Vulkan device is a failure, not a skip: scripts/setup.sh installs lavapipe.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <random>

#include "backends/cpu/cpu-backend.h"
#include "backends/cpu/kernels.h"
#include "backends/vulkan/vk-instance.h"
#include "backends/vulkan/vulkan-backend.h"
#include "core/dtype.h"
#include "graph/builder.h"
#include "graph/scheduler.h"
#include "quant/quant.h"

namespace minfer {
namespace {

using Build = std::function<int(GraphBuilder&, int x, int y, int w)>;

struct Result {
  std::vector<float> out;
  int on_device = 0;  // nodes the scheduler gave the Vulkan backend
};

std::vector<float> random_values(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-3.0f, 3.0f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

// Prepares g on the backends, feeds its inputs in order, computes, and returns output 0 and how
// many `op` nodes (no op: compute nodes of any op) the first backend ran.
Result run_graph(std::vector<Backend*> backends, Graph graph, const std::vector<std::pair<const void*, size_t>>& inputs,
                 std::optional<Op> op = std::nullopt) {
  Scheduler sched(std::move(backends));
  auto pg = sched.prepare(std::move(graph), {.fuse = false});
  EXPECT_TRUE(pg) << pg.error().message;
  Result r;
  if (!pg) return r;
  const Graph& g = (*pg)->graph;
  for (size_t i = 0; i < inputs.size(); ++i)
    EXPECT_TRUE(sched.set_input(**pg, g.inputs[i], inputs[i].first, inputs[i].second));
  Status st = sched.compute(**pg);
  EXPECT_TRUE(st) << st.error().message;
  r.out.resize(static_cast<size_t>(g.nodes[static_cast<size_t>(g.outputs[0])].n_elements()));
  EXPECT_TRUE(sched.get_output(**pg, g.outputs[0], r.out.data(), r.out.size() * 4));
  for (const Node& n : g.nodes)
    r.on_device += n.backend == 0 && (op ? n.op == *op : n.op != Op::kCopy && !op_is_leaf(n.op));
  return r;
}

Result run(std::vector<Backend*> backends, int64_t ne0, int64_t rows, int64_t y_rows, const Build& op) {
  const auto x = random_values(static_cast<size_t>(ne0 * rows), 1);
  const auto y = random_values(static_cast<size_t>(ne0 * y_rows), 2);
  static std::vector<float> w;  // a weight: host memory for the graph's lifetime
  w = random_values(static_cast<size_t>(ne0), 3);
  GraphBuilder b;
  const int xi = b.input("x", DType::F32, {ne0, rows});
  const int yi = b.input("y", DType::F32, {ne0, y_rows});
  const int wi = b.weight("w.weight", DType::F32, {ne0}, w.data());
  const int out = op(b, xi, yi, wi);
  return run_graph(std::move(backends), b.finish({out}), {{x.data(), x.size() * 4}, {y.data(), y.size() * 4}});
}

double nmse(const std::vector<float>& want, const std::vector<float>& got) {
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    num += (double(want[i]) - got[i]) * (double(want[i]) - got[i]);
    den += double(want[i]) * want[i];
  }
  return den > 0 ? num / den : num;
}

// The first Vulkan device (lavapipe in CI) and the CPU backend the results are compared with.
class VulkanOps : public testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(vulkan::vk_devices().empty()) << "no Vulkan device (scripts/setup.sh installs mesa-vulkan-drivers)";
    auto b = vulkan::VulkanBackend::create(vulkan::vk_devices()[0].name);
    ASSERT_TRUE(b) << b.error().message;
    vk = std::move(*b);
  }
  std::unique_ptr<vulkan::VulkanBackend> vk;
  cpu::CpuBackend cpu{2};
};

struct OpCase {
  const char* name;
  bool exact;
  bool y_broadcast;
  Build build;
};

TEST_F(VulkanOps, EveryOpAndShapeMatchesTheCpuBackend) {
  const OpCase cases[] = {
      {"add", true, false, [](GraphBuilder& b, int x, int y, int) { return b.add("out", x, y); }},
      {"add_bcast", true, true, [](GraphBuilder& b, int x, int y, int) { return b.add("out", x, y); }},
      {"mul", true, false, [](GraphBuilder& b, int x, int y, int) { return b.mul("out", x, y); }},
      {"mul_weight", true, true, [](GraphBuilder& b, int x, int, int w) { return b.mul("out", x, w); }},
      {"scale", true, false, [](GraphBuilder& b, int x, int, int) { return b.scale("out", x, 0.37f); }},
      {"rms_norm", true, false, [](GraphBuilder& b, int x, int, int) { return b.rms_norm("out", x, 1e-6f); }},
      {"rms_norm_mul", false, false,
       [](GraphBuilder& b, int x, int, int w) { return b.rms_norm_mul("out", x, w, 1e-5f); }},
      {"silu", false, false, [](GraphBuilder& b, int x, int, int) { return b.silu("out", x); }},
      {"swiglu", false, false, [](GraphBuilder& b, int x, int y, int) { return b.swiglu("out", x, y); }},
      {"gelu", false, false, [](GraphBuilder& b, int x, int, int) { return b.gelu("out", x); }},
      {"geglu", false, false, [](GraphBuilder& b, int x, int y, int) { return b.geglu("out", x, y); }},
      {"softcap", false, false, [](GraphBuilder& b, int x, int, int) { return b.softcap("out", x, 1.5f); }},
      {"chain", false, true,  // several dispatches in one submission, each reading the last
       [](GraphBuilder& b, int x, int y, int w) {
         return b.scale("out", b.add("a", b.rms_norm_mul("n", x, w, 1e-6f), y), 2.0f);
       }},
  };
  int n_checked = 0, n_exact = 0;
  double worst = 0;
  for (const OpCase& c : cases)
    for (int64_t ne0 : {1, 7, 64, 4097})
      for (int64_t rows : {1, 3, 512}) {
        const int64_t y_rows = c.y_broadcast ? 1 : rows;
        SCOPED_TRACE(std::string(c.name) + " ne0 " + std::to_string(ne0) + " rows " + std::to_string(rows));
        const Result want = run({&cpu}, ne0, rows, y_rows, c.build);
        const Result got = run({vk.get(), &cpu}, ne0, rows, y_rows, c.build);
        ASSERT_EQ(want.out.size(), got.out.size());
        EXPECT_GE(got.on_device, 1) << "the op did not run on the Vulkan backend";
        // With the exact variants (lavapipe): rms_norm takes the CPU's double sum, silu its
        // exp_poly on rows of 16-multiples (the rest of a row: the driver's exp against libm's).
        const std::string name = c.name;
        const bool exact = c.exact || (vk->exact() && (name == "rms_norm" || name == "rms_norm_mul" || name == "chain" ||
                                                       ((name == "silu" || name == "swiglu") && ne0 % 16 == 0)));
        n_exact += exact;
        if (exact) EXPECT_EQ(std::memcmp(want.out.data(), got.out.data(), want.out.size() * 4), 0);
        else EXPECT_LT(nmse(want.out, got.out), 1e-10);
        worst = std::max(worst, nmse(want.out, got.out));
        ++n_checked;
      }
  // Past 65535 workgroups the dispatch is two-dimensional (one row per workgroup here).
  {
    const OpCase& c = cases[5];  // rms_norm
    SCOPED_TRACE("rms_norm ne0 3 rows 70000");
    const Result want = run({&cpu}, 3, 70000, 70000, c.build);
    const Result got = run({vk.get(), &cpu}, 3, 70000, 70000, c.build);
    EXPECT_GE(got.on_device, 1);
    EXPECT_LT(nmse(want.out, got.out), 1e-10);
    if (vk->exact()) {
      EXPECT_EQ(std::memcmp(want.out.data(), got.out.data(), want.out.size() * 4), 0);
    }
    worst = std::max(worst, nmse(want.out, got.out));
    ++n_checked;
  }
  EXPECT_EQ(n_checked, 13 * 4 * 3 + 1);
  std::printf("vulkan ops on %s: %d op x shape cases (%d bit-identical), worst NMSE %.3g\n",
              vulkan::vk_devices()[0].description.c_str(), n_checked, n_exact, worst);
}

// RoPE on both pairings, full and partial rotation (n_rot < head size: the tail copied), with
// and without frequency factors and a frequency scale, positions up to 30000. The backend takes
// cos/sin from a table it fills on the host as the CPU does (libm), so with fused multiply-adds
// (the exact variant on lavapipe) the output is the CPU's bits; NMSE < 1e-10 anywhere, where a
// wrong pairing or angle is ~1.
TEST_F(VulkanOps, RopeMatchesTheCpuBackend) {
  std::mt19937 rng(7);
  double worst = 0;
  int n_checked = 0;
  for (RopeMode mode : {RopeMode::kNorm, RopeMode::kNeox})
    for (auto [hd, n_rot] : {std::pair{64, 64}, std::pair{128, 128}, std::pair{80, 32}})
      for (int64_t n_head : {1, 4})
        for (int64_t n_tok : {1, 7, 300})
          for (bool with_factors : {false, true}) {
            SCOPED_TRACE(std::string(mode == RopeMode::kNeox ? "neox" : "norm") + " hd " + std::to_string(hd) +
                         " n_rot " + std::to_string(n_rot) + " heads " + std::to_string(n_head) + " tokens " +
                         std::to_string(n_tok) + (with_factors ? " factors" : ""));
            const auto x = random_values(static_cast<size_t>(hd * n_head * n_tok), 11);
            std::vector<int32_t> pos(static_cast<size_t>(n_tok));
            for (int32_t& q : pos) q = static_cast<int32_t>(rng() % 30000);
            std::vector<float> factors(static_cast<size_t>(n_rot / 2));
            for (size_t i = 0; i < factors.size(); ++i) factors[i] = 1.0f + 0.37f * static_cast<float>(i % 5);
            auto one = [&](std::vector<Backend*> backends) {
              GraphBuilder b;
              const int xi = b.input("x", DType::F32, {hd, n_head, n_tok});
              const int pi = b.input("pos", DType::I32, {n_tok});
              const int fi = with_factors ? b.weight("rope_freqs.weight", DType::F32, {n_rot / 2}, factors.data()) : -1;
              const int out = b.rope("out", xi, pi, mode, n_rot, 10000.0f, with_factors ? 0.25f : 1.0f, fi);
              return run_graph(std::move(backends), b.finish({out}),
                               {{x.data(), x.size() * 4}, {pos.data(), pos.size() * 4}}, Op::kRope);
            };
            const Result want = one({&cpu});
            const Result got = one({vk.get(), &cpu});
            EXPECT_EQ(got.on_device, 1);
            EXPECT_LT(nmse(want.out, got.out), 1e-10);
            if (vk->exact()) {  // the host's libm table and the fused rotation: the CPU's bits
              EXPECT_EQ(std::memcmp(want.out.data(), got.out.data(), want.out.size() * 4), 0);
            }
            worst = std::max(worst, nmse(want.out, got.out));
            ++n_checked;
          }
  EXPECT_EQ(n_checked, 2 * 3 * 2 * 3 * 2);
  std::printf("vulkan rope: %d cases, worst NMSE %.3g\n", n_checked, worst);
}

// Every weight type minfer loads, as shaders/dequant.glsl reads them.
constexpr DType kWeightTypes[] = {DType::F32,    DType::F16,  DType::BF16, DType::Q8_0, DType::Q4_0,
                                  DType::Q4_1,   DType::Q5_0, DType::Q5_1, DType::IQ4_NL, DType::Q2_K,
                                  DType::Q3_K,   DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_XS};

// Row lengths for a type: odd multiples of its block (one block, three, 4096).
std::vector<int64_t> row_lengths(DType t, std::vector<int64_t> for_32) {
  const int64_t block = static_cast<int64_t>(dtype_info(t).block_elems);
  if (block <= 32) return for_32;
  for (int64_t& n : for_32) n = n == 96 ? 3 * block : n < block ? block : n;
  return for_32;
}

// x [n_tok][n_in] rounded as the CPU backend rounds a matmul's activations for weights of type
// w (cpu/kernels.h activation_type: f16, bf16, Q8_0, Q8_1 or Q8_K blocks), as f32.
std::vector<float> cpu_rounded(DType w, const std::vector<float>& x, int64_t n_in) {
  DType act = cpu::activation_type(w);
  if (act == DType::Q8_1) act = DType::Q8_0;  // the same values (Q8_1 also carries their sums)
  if (act == DType::F32) return x;
  std::vector<float> out(x.size());
  std::vector<uint8_t> q(row_bytes(act, n_in));
  for (size_t r = 0; r < x.size() / static_cast<size_t>(n_in); ++r) {
    cpu::cpu_kernels_ref().quantize[cpu::type_slot(act)](x.data() + r * n_in, q.data(), n_in);
    dequantize_row(act, q.data(), out.data() + r * n_in, n_in);
  }
  return out;
}

// Matmul with every weight type (row lengths of 1 and 3 blocks and 4096, 1 .. 300 output rows,
// 1 .. 64 tokens). The device first rounds x as the CPU backend does for that weight type
// (shaders/act_round.comp: f16 for F16, bf16 for BF16, Q8_0 / Q8_1 / Q8_K blocks for the
// quantized types, as llama.cpp's CPU backend does), then sums weight x rounded-x products in
// f32. Against an exact reference (the dequantized weights times the CPU-rounded x, in double):
// NMSE < 1e-10, which also proves the rounding bit-exact (one element rounded the other way is
// ~1e-6), except for Q4_1 and Q5_1: the CPU (and the device, as it) takes each block's minimum
// times an f16 copy of d * sum(q) of the Q8_1 activations, a relative 5e-4 on that term against
// the exact sum: NMSE < 1e-5 there (measured 1.6e-6). Against the CPU backend (integer and f16
// dot products in its own order): NMSE < 1e-9 for every type (measured ~4e-12), and the 12
// quantized types bit-identical where the exact variants run (lavapipe): the shader takes the
// CPU's integer sums and its float order (cpu/vec-dot-ref.cpp). F32/F16/BF16 follow the
// reference's order, which the CPU's float GEMMs do not: within float rounding.
// A wrong block, scale or nibble is ~1. Every case's weights stay alive to the end: both
// backends keep a weight's device or repacked copy by its address.
TEST_F(VulkanOps, MatmulMatchesTheCpuBackendAndAnExactSum) {
  double worst_exact = 0, worst_cpu = 0;
  int n_checked = 0, n_identical = 0;
  std::map<std::string, std::pair<int, double>> per_type;  // cases, worst NMSE vs the CPU backend
  std::list<std::vector<uint8_t>> weights;
  int n_expected = 0;
  for (DType type : kWeightTypes)
    for (int64_t n_in : row_lengths(type, {32, 96, 4096}))
      for (int64_t n_out : {1, 17, 300})
        for (int64_t n_tok : {1, 5, 64, 512}) {
          // The largest shape (4096 x 300, the slow naive kernel on a software device) for the
          // four types it first ran with; the others read the same code paths at 4096 x 17.
          const bool legacy = type == DType::F32 || type == DType::F16 || type == DType::Q8_0 || type == DType::Q4_0;
          if (!legacy && n_in == 4096 && n_out == 300) continue;
          // A prefill batch of 512 (64 tiles of 8 tokens) once per type, on its shortest rows.
          if (n_tok == 512 && (n_out != 17 || n_in != row_lengths(type, {32, 96, 4096}).front())) continue;
          ++n_expected;
          SCOPED_TRACE(std::string(dtype_name(type)) + " n_in " + std::to_string(n_in) + " n_out " +
                       std::to_string(n_out) + " tokens " + std::to_string(n_tok));
          const auto wf = random_values(static_cast<size_t>(n_in * n_out), 21);
          const auto x = random_values(static_cast<size_t>(n_in * n_tok), 22);
          std::vector<uint8_t>& wq = weights.emplace_back(row_bytes(type, n_in) * static_cast<size_t>(n_out));
          std::vector<float> wd(wf.size());  // the weights as the device sees them
          for (int64_t o = 0; o < n_out; ++o) {
            uint8_t* row = wq.data() + static_cast<size_t>(o) * row_bytes(type, n_in);
            quantize_row(type, wf.data() + o * n_in, row, n_in);
            dequantize_row(type, row, wd.data() + o * n_in, n_in);
          }
          std::vector<float> exact(static_cast<size_t>(n_out * n_tok));
          const std::vector<float> xr = cpu_rounded(type, x, n_in);
          for (int64_t t = 0; t < n_tok; ++t)
            for (int64_t o = 0; o < n_out; ++o) {
              double acc = 0;
              for (int64_t i = 0; i < n_in; ++i) acc += double(wd[o * n_in + i]) * xr[t * n_in + i];
              exact[t * n_out + o] = static_cast<float>(acc);
            }
          auto one = [&](std::vector<Backend*> backends) {
            GraphBuilder b;
            const int xi = b.input("x", DType::F32, {n_in, n_tok});
            const int wi = b.weight("w.weight", type, {n_in, n_out}, wq.data());
            const int out = b.matmul("out", wi, xi);
            return run_graph(std::move(backends), b.finish({out}), {{x.data(), x.size() * 4}}, Op::kMatmul);
          };
          const Result cpu_out = one({&cpu});
          const Result got = one({vk.get(), &cpu});
          EXPECT_EQ(got.on_device, 1);
          const bool f16_sums = type == DType::Q4_1 || type == DType::Q5_1;
          EXPECT_LT(nmse(exact, got.out), f16_sums ? 1e-5 : 1e-10);
          EXPECT_LT(nmse(cpu_out.out, got.out), 1e-9);
          // The quantized types: the CPU's integer dot products in its float order; with fused
          // multiply-adds (exact variants on lavapipe) the CPU's bits.
          const bool quantized = dtype_info(type).block_elems > 1;
          const bool same = std::memcmp(cpu_out.out.data(), got.out.data(), got.out.size() * 4) == 0;
          if (quantized && vk->exact()) {
            EXPECT_TRUE(same) << "not bit-identical to the CPU backend";
          }
          n_identical += same;
          if (std::getenv("MINFER_VERBOSE_CASES"))
            std::printf("  %s %lld x %lld x %lld: %s (%.3g)\n", std::string(dtype_name(type)).c_str(), (long long)n_in,
                        (long long)n_out, (long long)n_tok,
                        std::memcmp(cpu_out.out.data(), got.out.data(), got.out.size() * 4) == 0 ? "bit-identical" : "differs",
                        nmse(cpu_out.out, got.out));
          worst_exact = std::max(worst_exact, nmse(exact, got.out));
          worst_cpu = std::max(worst_cpu, nmse(cpu_out.out, got.out));
          auto& [cases, worst] = per_type[std::string(dtype_name(type))];
          ++cases;
          worst = std::max(worst, nmse(cpu_out.out, got.out));
          ++n_checked;
        }
  EXPECT_EQ(n_checked, n_expected);
  EXPECT_EQ(n_expected, 4 * 27 + (static_cast<int>(std::size(kWeightTypes)) - 4) * 24 + static_cast<int>(std::size(kWeightTypes)));
  std::printf("vulkan matmul: %d cases (%d bit-identical to the CPU backend), worst NMSE %.3g vs the exact sum, %.3g "
              "vs the CPU backend\n", n_checked, n_identical, worst_exact, worst_cpu);
  std::printf("vulkan matmul per type (cases, worst NMSE vs the CPU backend):");
  for (const auto& [name, cw] : per_type) std::printf(" %s %d %.3g;", name.c_str(), cw.first, cw.second);
  std::printf("\n");
}

// matmul_id (MoE): W [n_in, n_out, n_expert], x [n_in, 1 or k, T], ids [k, T]: each slot's
// rows from its expert, as op_matmul computes a row; against the CPU backend, bit-identical for
// the quantized types where the exact variants run, NMSE < 1e-9 otherwise.
TEST_F(VulkanOps, MatmulIdMatchesTheCpuBackend) {
  std::list<std::vector<uint8_t>> weights;
  std::mt19937 rng(9);
  int n_checked = 0, n_identical = 0;
  for (DType type : {DType::F16, DType::Q8_0, DType::Q4_1, DType::Q4_K, DType::Q6_K})
    for (int64_t n_tok : {1, 5})
      for (bool x_per_slot : {false, true}) {
        const int64_t n_in = 256, n_out = 70, n_expert = 4, k = 2;
        SCOPED_TRACE(std::string(dtype_name(type)) + " tokens " + std::to_string(n_tok) + (x_per_slot ? " x per slot" : ""));
        const auto wf = random_values(static_cast<size_t>(n_in * n_out * n_expert), 51);
        std::vector<uint8_t>& wq = weights.emplace_back(row_bytes(type, n_in) * static_cast<size_t>(n_out * n_expert));
        for (int64_t r = 0; r < n_out * n_expert; ++r)
          quantize_row(type, wf.data() + r * n_in, wq.data() + static_cast<size_t>(r) * row_bytes(type, n_in), n_in);
        const int64_t x_rows = x_per_slot ? k : 1;
        const auto x = random_values(static_cast<size_t>(n_in * x_rows * n_tok), 52);
        std::vector<int32_t> ids(static_cast<size_t>(k * n_tok));
        for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((rng() % n_expert));
        auto one = [&](std::vector<Backend*> backends) {
          GraphBuilder b;
          const int xi = b.input("x", DType::F32, {n_in, x_rows, n_tok});
          const int ii = b.input("ids", DType::I32, {k, n_tok});
          const int wi = b.weight("blk.0.ffn_up_exps.weight", type, {n_in, n_out, n_expert}, wq.data());
          return run_graph(std::move(backends), b.finish({b.matmul_id("out", wi, xi, ii)}),
                           {{x.data(), x.size() * 4}, {ids.data(), ids.size() * 4}}, Op::kMatmulId);
        };
        const Result want = one({&cpu});
        const Result got = one({vk.get(), &cpu});
        EXPECT_EQ(got.on_device, 1);
        ASSERT_EQ(want.out.size(), got.out.size());
        const bool same = std::memcmp(want.out.data(), got.out.data(), want.out.size() * 4) == 0;
        EXPECT_LT(nmse(want.out, got.out), 1e-9);
        if (type != DType::F16 && vk->exact()) {
          EXPECT_TRUE(same) << "not bit-identical to the CPU backend";
        }
        n_identical += same;
        ++n_checked;
      }
  EXPECT_EQ(n_checked, 20);
  std::printf("vulkan matmul_id: %d cases, %d bit-identical to the CPU backend\n", n_checked, n_identical);
}

// The MoE routing ops: top_k (ties to the lower index; identical anywhere), moe_weights (softmax
// at the chosen experts, plain and normalized: libm's expf and a double sum, the CPU's bits with
// the exact variants) and moe_sum (the weighted sum in order: identical anywhere).
TEST_F(VulkanOps, MoeRoutingMatchesTheCpuBackend) {
  int n_checked = 0;
  for (int64_t n_expert : {8, 60, 128})
    for (int64_t k : {1, 2, 8})
      for (int64_t n_tok : {1, 7}) {
        SCOPED_TRACE("experts " + std::to_string(n_expert) + " k " + std::to_string(k) + " tokens " + std::to_string(n_tok));
        auto logits = random_values(static_cast<size_t>(n_expert * n_tok), 61);
        logits[1] = logits[0];  // a tie: the lower index first
        for (bool norm : {false, true}) {
          auto one = [&](std::vector<Backend*> backends, int which) {
            GraphBuilder b;
            const int li = b.input("logits", DType::F32, {n_expert, n_tok});
            const int ids = b.top_k("ids", li, static_cast<int>(k));
            const int w = b.moe_weights("w", li, ids, norm);
            return run_graph(std::move(backends), b.finish({which == 0 ? w : ids}), {{logits.data(), logits.size() * 4}});
          };
          const Result want_w = one({&cpu}, 0), got_w = one({vk.get(), &cpu}, 0);
          const Result want_i = one({&cpu}, 1), got_i = one({vk.get(), &cpu}, 1);
          EXPECT_EQ(got_w.on_device, 2);
          EXPECT_EQ(std::memcmp(want_i.out.data(), got_i.out.data(), want_i.out.size() * 4), 0) << "top_k";
          EXPECT_LT(nmse(want_w.out, got_w.out), 1e-12);
          if (vk->exact()) {
            EXPECT_EQ(std::memcmp(want_w.out.data(), got_w.out.data(), want_w.out.size() * 4), 0) << "moe_weights";
          }
          ++n_checked;
        }
        const int64_t n = 96;
        const auto e = random_values(static_cast<size_t>(n * k * n_tok), 62);
        const auto w = random_values(static_cast<size_t>(k * n_tok), 63);
        auto sum = [&](std::vector<Backend*> backends) {
          GraphBuilder b;
          const int ei = b.input("e", DType::F32, {n, k, n_tok});
          const int wi = b.input("w", DType::F32, {k, n_tok});
          return run_graph(std::move(backends), b.finish({b.moe_sum("out", ei, wi)}),
                           {{e.data(), e.size() * 4}, {w.data(), w.size() * 4}}, Op::kMoeSum);
        };
        const Result want = sum({&cpu}), got = sum({vk.get(), &cpu});
        EXPECT_EQ(got.on_device, 1);
        EXPECT_EQ(std::memcmp(want.out.data(), got.out.data(), want.out.size() * 4), 0) << "moe_sum";
        ++n_checked;
      }
  EXPECT_EQ(n_checked, 3 * 3 * 2 * 3);
  std::printf("vulkan top_k + moe_weights + moe_sum: %d cases, bit-identical\n", n_checked);
}

// hadamard (a quantized KV cache's rotation): the CPU's scaling and butterflies in its order, so
// bit-identical on any device.
TEST_F(VulkanOps, HadamardIsBitIdenticalToTheCpuBackend) {
  int n_checked = 0;
  for (int block : {64, 128, 256})
    for (int64_t rows : {1, 7, 300}) {
      SCOPED_TRACE("block " + std::to_string(block) + " rows " + std::to_string(rows));
      const auto x = random_values(static_cast<size_t>(256 * rows), 71);
      auto one = [&](std::vector<Backend*> backends) {
        GraphBuilder b;
        const int xi = b.input("x", DType::F32, {256, rows});
        return run_graph(std::move(backends), b.finish({b.hadamard("out", xi, block)}), {{x.data(), x.size() * 4}},
                         Op::kHadamard);
      };
      const Result want = one({&cpu}), got = one({vk.get(), &cpu});
      EXPECT_EQ(got.on_device, 1);
      EXPECT_EQ(std::memcmp(want.out.data(), got.out.data(), want.out.size() * 4), 0);
      ++n_checked;
    }
  EXPECT_EQ(n_checked, 9);
  std::printf("vulkan hadamard: %d cases, bit-identical\n", n_checked);
}

// get_rows (the embedding lookup) from tables of every weight type: the shader computes each
// element with the CPU reference's operations in its order (no fused multiply-add), so the rows
// are bit-identical.
TEST_F(VulkanOps, GetRowsIsBitIdenticalToTheCpuBackend) {
  std::list<std::vector<uint8_t>> tables;  // alive to the end: both backends key copies by address
  std::mt19937 rng(5);
  int n_checked = 0;
  for (DType type : kWeightTypes)
    for (int64_t ne0 : row_lengths(type, {32, 4096}))
      for (int64_t rows : {1, 50})
        for (int64_t n_ids : {1, 9, 300}) {
          SCOPED_TRACE(std::string(dtype_name(type)) + " ne0 " + std::to_string(ne0) + " rows " + std::to_string(rows) +
                       " ids " + std::to_string(n_ids));
          const auto f = random_values(static_cast<size_t>(ne0 * rows), 31);
          std::vector<uint8_t>& t = tables.emplace_back(row_bytes(type, ne0) * static_cast<size_t>(rows));
          for (int64_t r = 0; r < rows; ++r)
            quantize_row(type, f.data() + r * ne0, t.data() + static_cast<size_t>(r) * row_bytes(type, ne0), ne0);
          std::vector<int32_t> ids(static_cast<size_t>(n_ids));
          for (int32_t& id : ids) id = static_cast<int32_t>(rng() % static_cast<uint32_t>(rows));
          auto one = [&](std::vector<Backend*> backends) {
            GraphBuilder b;
            const int ti = b.weight("token_embd.weight", type, {ne0, rows}, t.data());
            const int ii = b.input("ids", DType::I32, {n_ids});
            return run_graph(std::move(backends), b.finish({b.get_rows("out", ti, ii)}), {{ids.data(), ids.size() * 4}},
                             Op::kGetRows);
          };
          const Result want = one({&cpu});
          const Result got = one({vk.get(), &cpu});
          EXPECT_EQ(got.on_device, 1);
          ASSERT_EQ(want.out.size(), got.out.size());
          EXPECT_EQ(std::memcmp(want.out.data(), got.out.data(), want.out.size() * 4), 0);
          ++n_checked;
        }
  EXPECT_EQ(n_checked, static_cast<int>(std::size(kWeightTypes)) * 2 * 2 * 3);
  std::printf("vulkan get_rows: %d cases, bit-identical\n", n_checked);
}

// One attention layer in two steps on one scheduler (the caches persist between them, as in a
// session): a batch stores its K and V rows and attends. Returns step 2's output and both caches
// after it, read back from whichever backend holds them.
struct AttnCase {
  DType type;
  int64_t hd, n_head, n_kv;
  int32_t window = 0, ring = 0;
  float softcap = 0.0f;
  bool ranges = false;
  int64_t t1, t2;  // tokens of step 1 (a prompt) and step 2
};

struct AttnRun {
  std::vector<float> out;
  std::vector<uint8_t> k_cache, v_cache;
  int on_device = 0;  // kv_store and attn nodes the first backend ran (step 2)
};

AttnRun run_attn(std::vector<Backend*> backends, const AttnCase& c, uint32_t seed) {
  Scheduler sched(std::move(backends));
  const int64_t n_ctx = 2 * std::max<int64_t>(c.ring, 512);
  AttnRun r;
  std::mt19937 rng(seed);
  auto step = [&](int64_t n_tok, int64_t pos0) {
    // Two sequences with ranges: token t belongs to sequence t % 2, whose rows start at s * n_ctx / 2;
    // its position is pos0 + t / 2 (ring: row first + p mod ring).
    GraphBuilder b;
    const int q = b.input("q", DType::F32, {c.hd, c.n_head, n_tok});
    const int k = b.input("k", DType::F32, {c.hd * c.n_kv, n_tok});
    const int v = b.input("v", DType::F32, {c.hd * c.n_kv, n_tok});
    const int rows = b.input("rows", DType::I32, {n_tok});
    const int pos = c.ranges ? b.input("ranges", DType::I32, {3, n_tok}) : b.input("pos", DType::I32, {n_tok});
    const int kc = b.kv_cache("blk.0.cache_k", 0, false, c.type, c.hd * c.n_kv, n_ctx);
    const int vc = b.kv_cache("blk.0.cache_v", 0, true, c.type, c.hd * c.n_kv, n_ctx);
    const int ks = b.kv_store("blk.0.cache_k.store", kc, k, rows);
    const int vs = b.kv_store("blk.0.cache_v.store", vc, v, rows);
    GraphBuilder::AttnOpts o{.scale = 1.0f / std::sqrt(static_cast<float>(c.hd)), .window = c.window, .softcap = c.softcap,
                             .ring = c.ring};
    const int out = c.ranges ? b.attn_ranges("blk.0.attn", q, ks, vs, pos, static_cast<int>(c.n_kv), o)
                             : b.attn("blk.0.attn", q, ks, vs, pos, static_cast<int>(c.n_kv), o);
    const auto qv = random_values(static_cast<size_t>(c.hd * c.n_head * n_tok), rng());
    const auto kv = random_values(static_cast<size_t>(c.hd * c.n_kv * n_tok), rng());
    const auto vv = random_values(static_cast<size_t>(c.hd * c.n_kv * n_tok), rng());
    std::vector<int32_t> rv(static_cast<size_t>(n_tok)), pv;
    for (int64_t t = 0; t < n_tok; ++t) {
      const int64_t s = c.ranges ? t % 2 : 0, p = c.ranges ? pos0 + t / 2 : pos0 + t;
      const int64_t first = s * n_ctx / 2;
      rv[static_cast<size_t>(t)] = static_cast<int32_t>(c.ring ? first + p % c.ring : first + p);
      if (c.ranges) {
        const int64_t mine = (n_tok - s + 1) / 2;  // this sequence's query rows in the batch
        pv.insert(pv.end(), {static_cast<int32_t>(first), static_cast<int32_t>(p + 1), static_cast<int32_t>(mine)});
      } else {
        pv.push_back(static_cast<int32_t>(p));
      }
    }
    auto pg = sched.prepare(b.finish({out}), {.fuse = false});
    EXPECT_TRUE(pg) << pg.error().message;
    if (!pg) return;
    const Graph& g = (*pg)->graph;
    const std::vector<std::pair<const void*, size_t>> in = {{qv.data(), qv.size() * 4}, {kv.data(), kv.size() * 4},
                                                             {vv.data(), vv.size() * 4}, {rv.data(), rv.size() * 4},
                                                             {pv.data(), pv.size() * 4}};
    for (size_t i = 0; i < in.size(); ++i) EXPECT_TRUE(sched.set_input(**pg, g.inputs[i], in[i].first, in[i].second));
    Status st = sched.compute(**pg);
    EXPECT_TRUE(st) << st.error().message;
    r.out.resize(static_cast<size_t>(g.nodes[static_cast<size_t>(g.outputs[0])].n_elements()));
    EXPECT_TRUE(sched.get_output(**pg, g.outputs[0], r.out.data(), r.out.size() * 4));
    r.on_device = 0;
    for (const Node& n : g.nodes) r.on_device += n.backend == 0 && (n.op == Op::kAttn || n.op == Op::kKvStore);
  };
  step(c.t1, 0);
  step(c.t2, c.ranges ? c.t1 / 2 + 17 : c.t1);  // with ranges, a gap: rows never written read as zeros
  for (auto [name, dst] : {std::pair{"blk.0.cache_k", &r.k_cache}, std::pair{"blk.0.cache_v", &r.v_cache}}) {
    const Scheduler::RegionView rv = sched.persistent_region(name);
    dst->resize(rv.size);
    rv.backend->read(dst->data(), rv.base, rv.size);
  }
  return r;
}

// kv_store and attention for each cache type (f32, f16, q8_0, q4_0), with GQA, head sizes 64,
// 128 and 256, a sliding window, soft-capping, several sequences (ranges) and ring caches that
// wrap, prompts of 1..512 tokens then decode and short batches. The stored caches are
// bit-identical to the CPU's (the shader rounds as the CPU kernels do: f16 to nearest even,
// q8_0 and q4_0 blocks by the same scale and rounding rules). The attention output follows the
// CPU's own choice of arithmetic per token (narrow: per-key online softmax with W64 or integer
// scores, q to f16 and an f16 V sum for f16 caches, q through q8_0 for quantized ones; tiles of
// 32 keys or wide blocks of 8 with exp_poly for long batches) and its float order: NMSE < 1e-8
// everywhere, and < 1e-12 without a soft-cap where the exact variants run (lavapipe; measured: 0
// in 16 of the 18 cases, 2e-17 at most: the double-precision e^x rounds as libm's expf in all
// but ~0.07% of arguments). With a soft-cap, tanh against libm's tanhf: ~3e-11. Without the
// CPU's roundings the difference is ~1e-5; a wrong row, head, window, ring or mask is ~1e-2.
TEST_F(VulkanOps, AttentionAndKvStoreMatchTheCpuBackend) {
  std::vector<AttnCase> cases;
  for (DType type : {DType::F32, DType::F16, DType::Q8_0, DType::Q4_0}) {
    cases.push_back({type, 64, 4, 2, 0, 0, 0.0f, false, 7, 1});         // GQA, decode after a short prompt
    cases.push_back({type, 64, 9, 3, 0, 0, 0.0f, false, 300, 5});       // SmolLM2's heads, 300 keys
    cases.push_back({type, 128, 8, 1, 32, 0, 50.0f, false, 100, 3});    // window + soft-cap (Gemma 2)
    cases.push_back({type, 256, 4, 1, 0, 0, 0.0f, false, 65, 1});       // Gemma 3's head size
    cases.push_back({type, 64, 4, 4, 24, 48, 0.0f, true, 80, 20});      // two sequences, ring caches that wrap
    cases.push_back({type, 64, 6, 2, 0, 0, 0.0f, true, 130, 2});        // two sequences, whole caches
    cases.push_back({type, 64, 4, 1, 0, 0, 0.0f, false, 512, 8});       // a 512-token prefill batch
  }
  double worst[4] = {};
  int n_checked = 0;
  for (const AttnCase& c : cases) {
    SCOPED_TRACE(std::string(dtype_name(c.type)) + " hd " + std::to_string(c.hd) + " heads " + std::to_string(c.n_head) +
                 "/" + std::to_string(c.n_kv) + " window " + std::to_string(c.window) + " ring " +
                 std::to_string(c.ring) + " tokens " + std::to_string(c.t1) + "+" + std::to_string(c.t2));
    const AttnRun want = run_attn({&cpu}, c, 41);
    const AttnRun got = run_attn({vk.get(), &cpu}, c, 41);
    EXPECT_EQ(got.on_device, 3);
    ASSERT_EQ(want.k_cache.size(), got.k_cache.size());
    EXPECT_TRUE(want.k_cache == got.k_cache) << "K cache differs";
    EXPECT_TRUE(want.v_cache == got.v_cache) << "V cache differs";
    const double e = nmse(want.out, got.out);
    if (std::getenv("MINFER_VERBOSE_CASES")) std::printf("  %s %lld+%lld: %.3g\n", std::string(dtype_name(c.type)).c_str(), (long long)c.t1, (long long)c.t2, e);
    EXPECT_LT(e, c.softcap == 0.0f && vk->exact() ? 1e-12 : 1e-8);
    const size_t slot = c.type == DType::F32 ? 0 : c.type == DType::F16 ? 1 : c.type == DType::Q8_0 ? 2 : 3;
    worst[slot] = std::max(worst[slot], e);
    ++n_checked;
  }
  EXPECT_EQ(n_checked, 28);
  std::printf("vulkan attn + kv_store: %d cases, caches bit-identical, worst NMSE f32 %.3g f16 %.3g q8_0 %.3g q4_0 %.3g\n",
              n_checked, worst[0], worst[1], worst[2], worst[3]);
}

TEST_F(VulkanOps, UnknownDeviceNamesTheDevicesThereAre) {
  auto bad = vulkan::VulkanBackend::create("Vulkan99");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("Vulkan99"), std::string::npos) << bad.error().message;
  EXPECT_NE(bad.error().message.find("Vulkan0"), std::string::npos) << bad.error().message;
}

}  // namespace
}  // namespace minfer
