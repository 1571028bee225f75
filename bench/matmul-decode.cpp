// Decode matmuls alone: one activation row times weights repacked as the model's are, cycling
// through enough distinct weights (--total-mib) that each call streams its bytes from memory as
// a decode step does. Prints the median time per call and the weight bytes read per second:
// the matmul's share of the bandwidth, next to minfer-membw's ceiling. Used to tune the GEMM
// tiles' streaming (gemm-tiles.h, ThreadPool::parallel_streams):
//   matmul-decode [--type q4_0|q4_k|q6_k|q8_0] [--n-in 1024] [--n-out 2048] [--total-mib 360]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "backends/cpu/ops.h"
#include "backends/cpu/repack.h"
#include "op-bench.h"
#include "quant/quant.h"

using namespace minfer;
using namespace minfer::bench;
using namespace minfer::cpu;

int main(int argc, char** argv) {
  int64_t n_in = 1024, n_out = 2048, total_mib = 360, reps = 5, threads = 2;
  DType type = DType::Q4_0;
  if (!parse_flags(argc, argv, {{"--n-in", int_flag(n_in)}, {"--n-out", int_flag(n_out)}, {"--total-mib", int_flag(total_mib)},
                                {"--reps", int_flag(reps)}, {"--threads", int_flag(threads)}, {"--type", type_flag(type)}}))
    return 2;
  if (reps < 1) {
    fprintf(stderr, "matmul-decode: --reps must be at least 1\n");
    return 2;
  }
  const size_t row = row_bytes(type, n_in), bytes = row * static_cast<size_t>(n_out);
  const int64_t count = std::max<int64_t>(1, (total_mib << 20) / static_cast<int64_t>(bytes));
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> src(static_cast<size_t>(n_in));
  std::vector<uint8_t> gguf(bytes);  // one weight's GGUF rows, repacked `count` times (a copy each)
  for (int64_t r = 0; r < n_out; ++r) {
    for (float& x : src) x = nd(rng);
    quantize_row(type, src.data(), gguf.data() + static_cast<size_t>(r) * row, n_in);
  }
  std::vector<std::vector<uint8_t>> originals(static_cast<size_t>(count), gguf);
  RepackMap map;
  for (auto& o : originals) {
    map[o.data()] = repack_weight(type, o.data(), n_in, n_out, false);
    if (!map[o.data()]) {
      fprintf(stderr, "matmul-decode: %lld x %lld of this type is not repacked\n", static_cast<long long>(n_in),
              static_cast<long long>(n_out));
      return 1;
    }
  }
  std::vector<float> x(static_cast<size_t>(n_in)), y(static_cast<size_t>(n_out));
  for (float& e : x) e = nd(rng);
  Node wn = make_node(Op::kWeight, type, {n_in, n_out, 1, 1});
  Node xn = make_node(Op::kInput, DType::F32, {n_in, 1, 1, 1});
  Node yn = make_node(Op::kMatmul, DType::F32, {n_out, 1, 1, 1});
  std::vector<uint8_t> work(op_work_size(yn, &wn, &xn) + 64);
  ThreadPool pool(static_cast<int>(threads));
  std::vector<double> per_call;
  for (int64_t rep = 0; rep < reps + 1; ++rep) {
    double t = 0.0;
    for (auto& o : originals) {
      OpArgs a;
      a.dst = {&yn, y.data()};
      a.src[0] = {&wn, o.data()};
      a.src[1] = {&xn, x.data()};
      const double t0 = now_s();
      op_matmul(OpContext{pool, cpu_kernels(), work.data(), work.size(), &map}, a);
      t += now_s() - t0;
    }
    if (rep > 0) per_call.push_back(t / static_cast<double>(count));
  }
  const double med = median(per_call);
  const double rb = static_cast<double>(map.begin()->second->n_blocks * map.begin()->second->n_groups) *
                    static_cast<double>(map.begin()->second->block_bytes);
  printf("{\"type\":\"%s\",\"n_in\":%lld,\"n_out\":%lld,\"weights\":%lld,\"us_per_call\":%.2f,\"gbps\":%.2f}\n",
         std::string(dtype_name(type)).c_str(), static_cast<long long>(n_in), static_cast<long long>(n_out),
         static_cast<long long>(count), med * 1e6, rb / med / 1e9);
  return 0;
}
