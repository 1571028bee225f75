// Decode matmuls alone: one activation row times weights repacked as the model's are, cycling
// through enough distinct weights (--total-mib) that each call streams its bytes from memory as
// a decode step does. Prints the median time per call and the weight bytes read per second:
// the matmul's share of the bandwidth, next to minfer-membw's ceiling. Used to tune the GEMM
// tiles' streaming (gemm-tiles.h, ThreadPool::parallel_streams):
//   matmul-decode [--type q4_0|q4_k|q6_k|q8_0] [--n-in 1024] [--n-out 2048] [--total-mib 360]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/ops.h"
#include "backends/cpu/repack.h"
#include "quant/quant.h"

using namespace minfer;
using namespace minfer::cpu;

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

DType parse_type(const std::string& s) {
  if (s == "q4_0") return DType::Q4_0;
  if (s == "q4_k") return DType::Q4_K;
  if (s == "q6_k") return DType::Q6_K;
  if (s == "q8_0") return DType::Q8_0;
  fprintf(stderr, "matmul-decode: unknown type %s (q4_0, q4_k, q6_k, q8_0)\n", s.c_str());
  exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  int64_t n_in = 1024, n_out = 2048, total_mib = 360, reps = 5, threads = 2;
  DType type = DType::Q4_0;
  if (argc % 2 == 0) {
    fprintf(stderr, "%s: flags take a value each (flag value ...)\n", argv[0]);
    return 2;
  }
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string f = argv[i];
    const char* v = argv[i + 1];
    if (f == "--n-in") n_in = atoll(v);
    else if (f == "--n-out") n_out = atoll(v);
    else if (f == "--total-mib") total_mib = atoll(v);
    else if (f == "--reps") reps = atoll(v);
    else if (f == "--threads") threads = atoll(v);
    else if (f == "--type") type = parse_type(v);
    else {
      fprintf(stderr, "matmul-decode: unknown flag %s\n", f.c_str());
      return 2;
    }
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
  Node wn;
  wn.op = Op::kWeight;
  wn.type = type;
  wn.ne = {n_in, n_out, 1, 1};
  Node xn;
  xn.op = Op::kInput;
  xn.type = DType::F32;
  xn.ne = {n_in, 1, 1, 1};
  Node yn;
  yn.op = Op::kMatmul;
  yn.type = DType::F32;
  yn.ne = {n_out, 1, 1, 1};
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
  if (per_call.empty()) {
    fprintf(stderr, "%s: --reps must be at least 1\n", argv[0]);
    return 2;
  }
  std::sort(per_call.begin(), per_call.end());
  const double med = per_call[per_call.size() / 2];
  const double rb = static_cast<double>(map.begin()->second->n_blocks * map.begin()->second->n_groups) *
                    static_cast<double>(map.begin()->second->block_bytes);
  printf("{\"type\":\"%s\",\"n_in\":%lld,\"n_out\":%lld,\"weights\":%lld,\"us_per_call\":%.2f,\"gbps\":%.2f}\n",
         std::string(dtype_name(type)).c_str(), static_cast<long long>(n_in), static_cast<long long>(n_out),
         static_cast<long long>(count), med * 1e6, rb / med / 1e9);
  return 0;
}
