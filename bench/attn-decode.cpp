// Decode attention alone, as a model's step meets it: one query token against a cache of
// `depth` rows, one op_attn per layer over that layer's own cache, with a stream of "weights"
// read between layers so the cache rows come from memory as they do in a real step. Prints
// the median time per call and the KV bytes it read per second. Used to tune ops-attn.cpp:
//   attn-decode [--hd 128 --heads 16 --kv-heads 8] [--depth 448] [--kv f16|q8_0|q4_0] [--layers 28]
// (from depth 511 on, a decode takes the tiles, ops-attn.cpp kTileFromKeys, not the narrow rows)
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/ops.h"
#include "core/fp16.h"
#include "quant/quant.h"

using namespace minfer;
using namespace minfer::cpu;

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

Node make_node(Op op, DType t, Shape ne) {
  Node n;
  n.op = op;
  n.type = t;
  n.ne = ne;
  return n;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t hd = 128, n_head = 16, n_head_kv = 8, depth = 448, layers = 28, reps = 20, threads = 2;
  int64_t between = 12 << 20;  // bytes of "weights" streamed between two layers' attention
  DType type = DType::F16;
  if (argc % 2 == 0) {
    fprintf(stderr, "%s: flags take a value each (flag value ...)\n", argv[0]);
    return 2;
  }
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string f = argv[i];
    const char* v = argv[i + 1];
    if (f == "--hd") hd = atoll(v);
    else if (f == "--heads") n_head = atoll(v);
    else if (f == "--kv-heads") n_head_kv = atoll(v);
    else if (f == "--depth") depth = atoll(v);
    else if (f == "--layers") layers = atoll(v);
    else if (f == "--reps") reps = atoll(v);
    else if (f == "--threads") threads = atoll(v);
    else if (f == "--between-mib") between = atoll(v) << 20;
    else if (f == "--kv") {
      const std::string t = v;
      if (t != "f16" && t != "q8_0" && t != "q4_0") {
        fprintf(stderr, "attn-decode: --kv %s: f16, q8_0 or q4_0\n", v);
        return 2;
      }
      type = t == "q8_0" ? DType::Q8_0 : t == "q4_0" ? DType::Q4_0 : DType::F16;
    }
    else {
      fprintf(stderr, "attn-decode: unknown flag %s\n", f.c_str());
      return 2;
    }
  }
  const int64_t n_ctx = depth + 1, row = n_head_kv * hd;
  const size_t rb = row_bytes(type, row);
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> tmp(static_cast<size_t>(row));
  std::vector<std::vector<uint8_t>> kc(static_cast<size_t>(layers)), vc(kc.size());
  for (size_t l = 0; l < kc.size(); ++l)
    for (auto* c : {&kc[l], &vc[l]}) {
      c->resize(rb * static_cast<size_t>(n_ctx));
      for (int64_t r = 0; r < n_ctx; ++r) {
        for (float& x : tmp) x = nd(rng);
        quantize_row(type, tmp.data(), c->data() + static_cast<size_t>(r) * rb, row);
      }
    }
  std::vector<float> q(static_cast<size_t>(hd * n_head));
  for (float& x : q) x = nd(rng) * 0.3f;
  std::vector<float> y(q.size());
  std::vector<uint8_t> weights(static_cast<size_t>(between) + 64, 1);
  ThreadPool pool(static_cast<int>(threads));
  Node qn = make_node(Op::kRope, DType::F32, {hd, n_head, 1, 1});
  Node kn = make_node(Op::kKvStore, type, {row, n_ctx, 1, 1});
  Node pn = make_node(Op::kInput, DType::I32, {1, 1, 1, 1});
  Node yn = make_node(Op::kAttn, DType::F32, {hd * n_head, 1, 1, 1});
  yn.params.n_head_kv = static_cast<int32_t>(n_head_kv);
  yn.params.attn_scale = 1.0f;
  const int32_t pos = static_cast<int32_t>(depth);
  std::vector<double> per_call;
  std::atomic<uint64_t> sink{0};  // the weights' sum, so the reads stay
  for (int64_t rep = 0; rep < reps + 1; ++rep) {
    double t = 0.0;
    for (int64_t l = 0; l < layers; ++l) {
      // both threads stream the weights, as a matmul does (and the pool stays awake)
      pool.parallel_for(static_cast<int64_t>(weights.size() / 4096), [&](int64_t i0, int64_t i1) {
        uint64_t s = 0;
        for (int64_t i = i0 * 4096; i < i1 * 4096; i += 64) s += weights[static_cast<size_t>(i)];
        sink.fetch_add(s, std::memory_order_relaxed);
      });
      OpArgs a;
      a.dst = {&yn, y.data()};
      a.src[0] = {&qn, q.data()};
      a.src[1] = {&kn, kc[static_cast<size_t>(l)].data()};
      a.src[2] = {&kn, vc[static_cast<size_t>(l)].data()};
      a.src[3] = {&pn, const_cast<int32_t*>(&pos)};
      const double t0 = now_s();
      op_attn(OpContext{pool, cpu_kernels()}, a);
      t += now_s() - t0;
    }
    if (rep > 0) per_call.push_back(t / static_cast<double>(layers));
  }
  if (per_call.empty()) {
    fprintf(stderr, "%s: --reps must be at least 1\n", argv[0]);
    return 2;
  }
  std::sort(per_call.begin(), per_call.end());
  const double med = per_call[per_call.size() / 2];
  const double bytes = 2.0 * static_cast<double>(rb) * static_cast<double>(n_ctx);
  printf("{\"hd\":%lld,\"heads\":%lld,\"kv_heads\":%lld,\"depth\":%lld,\"us_per_call\":%.2f,\"kv_gbps\":%.2f}\n",
         static_cast<long long>(hd), static_cast<long long>(n_head), static_cast<long long>(n_head_kv),
         static_cast<long long>(depth), med * 1e6, bytes / med / 1e9);
  return 0;
}
