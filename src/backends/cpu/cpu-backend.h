// The CPU backend: host memory, every op of graph/ops.h for every weight type in kernels.h,
// multi-threaded through a persistent ThreadPool (each op splits its own work).
//
//   CpuBackend cpu(/*n_threads=*/2);                 // kernels: cpu_kernels() (cpuid/MINFER_ISA)
//   Scheduler sched({&cpu});
//
// prepare() repacks the weights of matmuls whose type has a GEMM kernel in the table
// (repack.h; MINFER_REPACK=0 keeps every weight in place).
// MINFER_CPU_PROFILE=1 prints the time spent per op (and per matmul weight type) when the
// backend is destroyed.
#pragma once

#include <array>
#include <chrono>
#include <map>
#include <string>
#include <cstdint>
#include <vector>

#include "backends/cpu/kernels.h"
#include "backends/cpu/ops.h"
#include "backends/cpu/rope-angles.h"
#include "core/thread-pool.h"
#include "graph/backend.h"

namespace minfer::cpu {

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(int n_threads, const CpuKernels* kernels = nullptr);
  ~CpuBackend() override;

  std::string_view name() const override { return "cpu"; }
  int priority() const override { return 100; }
  std::string describe() const override;  // "cpu: kernels avx2 (this CPU: ref, avx2), 2 threads"
  bool supports_op(const Graph& g, const Node& n) const override;

  Expected<BackendBuffer> alloc(size_t bytes) override;
  void free(BackendBuffer b) override;
  void discard(BackendBuffer b) override;
  void write(void* dst, const void* host, size_t n_bytes) override;
  void read(void* host, const void* src, size_t n_bytes) override;

  Status prepare(const Graph& g, std::span<const int> nodes) override;
  Status compute(const Graph& g, std::span<const int> nodes, std::span<void* const> addrs) override;

  int n_threads() const { return pool_.n_threads(); }
  // What compute() saved so far: activation conversions reused, matmul runs joined (tests).
  struct Stats {
    int64_t reused_conversions = 0, joint_runs = 0;
  };
  const Stats& stats() const { return stats_; }
  const CpuKernels& kernels() const { return *k_; }

 private:
  ThreadPool pool_;
  const CpuKernels* k_;
  std::vector<uint8_t> work_;  // scratch shared by the ops, sized in prepare()
  RepackMap repacked_;         // matmul weights repacked for the GEMM kernels (prepare())
  RopeAngles rope_;            // the rope ops' angles, reused across a graph's layers
  // MINFER_CPU_PROFILE: one op's (or a joint run's) time since t0, and its matmul key.
  static std::string matmul_key(const Node& weight);  // "Q4_0 1024x2048"
  void record(Op op, std::chrono::steady_clock::time_point t0, int64_t calls, const std::string& matmul);

  Stats stats_;
  bool profile_ = false;
  std::array<double, kOpCount> op_seconds_{};
  std::array<int64_t, kOpCount> op_calls_{};
  std::map<std::string, std::pair<double, int64_t>> matmul_profile_;  // "Q4_0 896x4864 x1" -> (s, calls)
};

}  // namespace minfer::cpu
