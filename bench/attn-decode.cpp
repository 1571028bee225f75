// Decode attention alone, as a model's step meets it: one query token against a cache of
// `depth` rows, one op_attn per layer over that layer's own cache, with a stream of "weights"
// read between layers so the cache rows come from memory as they do in a real step. Prints
// the median time per call and the KV bytes it read per second. Used to tune ops-attn.cpp:
//   attn-decode [--hd 128 --heads 16 --kv-heads 8] [--depth 448] [--kv f16|q8_0|q4_0] [--layers 28]
// (from depth 511 on, a decode takes the tiles, ops-attn.cpp kTileFromKeys, not the narrow rows)
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "backends/cpu/ops.h"
#include "op-bench.h"
#include "core/fp16.h"
#include "quant/quant.h"

using namespace minfer;
using namespace minfer::bench;
using namespace minfer::cpu;

int main(int argc, char** argv) {
  int64_t hd = 128, n_head = 16, n_head_kv = 8, depth = 448, layers = 28, reps = 20, threads = 2;
  int64_t between = 12 << 20;  // bytes of "weights" streamed between two layers' attention
  DType type = DType::F16;
  if (!parse_flags(argc, argv, {{"--hd", int_flag(hd)}, {"--heads", int_flag(n_head)}, {"--kv-heads", int_flag(n_head_kv)},
                                {"--depth", int_flag(depth)}, {"--layers", int_flag(layers)}, {"--reps", int_flag(reps)},
                                {"--threads", int_flag(threads)}, {"--between-mib", int_flag(between, 20)},
                                {"--kv", type_flag(type)}}))
    return 2;
  if (type != DType::F16 && type != DType::Q8_0 && type != DType::Q4_0) {
    fprintf(stderr, "attn-decode: --kv takes f16, q8_0 or q4_0\n");
    return 2;
  }
  if (reps < 1) {
    fprintf(stderr, "attn-decode: --reps must be at least 1\n");
    return 2;
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
  const double med = median(per_call);
  const double bytes = 2.0 * static_cast<double>(rb) * static_cast<double>(n_ctx);
  printf("{\"hd\":%lld,\"heads\":%lld,\"kv_heads\":%lld,\"depth\":%lld,\"us_per_call\":%.2f,\"kv_gbps\":%.2f}\n",
         static_cast<long long>(hd), static_cast<long long>(n_head), static_cast<long long>(n_head_kv),
         static_cast<long long>(depth), med * 1e6, bytes / med / 1e9);
  return 0;
}
