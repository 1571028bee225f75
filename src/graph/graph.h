// The compute graph IR: pure data. Nodes are stored in build order, which is also the
// execution order (every source comes before its consumers; a KV store comes before the
// attention reading that cache). A graph is a function of shape parameters only (n_tokens,
// n_out, n_ctx...): token ids, positions and output row ids are INPUT data, so one graph
// serves every decode step.
//
//   GraphBuilder b;                                    // builder.h
//   int x = b.input("inp_embd", DType::F32, {64, 4});
//   int y = b.rms_norm("blk.0.attn_norm", x, 1e-6f);
//   Graph g = b.finish({y});
//   g.nodes[y].op == Op::kRmsNorm;
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "graph/ops.h"

namespace minfer {

constexpr int kMaxDims = 4;
using Shape = std::array<int64_t, kMaxDims>;  // ne[0] contiguous; unused dims are 1

// Per-op parameters. Only the fields of the node's op are meaningful.
struct OpParams {
  float eps = 0.0f;            // kRmsNorm, kRmsNormMul
  float attn_scale = 0.0f;     // kAttn: scores are scaled by this before the softmax
  int32_t n_head_kv = 0;       // kAttn: KV heads in the cache rows
  float rope_freq_base = 0.0f; // kRope: theta_i = pos * base^(-2i/n_rot) * freq_scale
  float rope_freq_scale = 1.0f;
  int32_t n_rot = 0;           // kRope: rotated dimensions (<= ne[0])
  RopeMode rope_mode = RopeMode::kNorm;
  int32_t layer = -1;          // kKvCache, kKvStore, kAttn: the transformer layer
  bool is_value = false;       // kKvCache: V region (else K)
  bool attn_ranges = false;    // kAttn: src3 is I32 [3, n_tokens] (first cache row, rows to read,
                               // query rows of this token's sequence in the batch) instead of pos
  int32_t attn_window = 0;     // kAttn: sliding window: a query at position p reads positions
                               // p - window + 1 .. p only (0: every earlier position)
  float attn_softcap = 0.0f;   // kAttn: scores become c * tanh(score / c) before the softmax (0: off)
  int32_t attn_ring = 0;       // kAttn with ranges: each sequence's rows are a ring of this many
                               // rows from its first row, position p at first + p mod ring (a
                               // sliding-window layer's cache; 0: position p at first + p)
  float scale = 1.0f;          // kScale: the factor; kSoftcap: the cap c
  int32_t block = 0;           // kHadamard: the run length n (a power of two dividing ne[0])
  int32_t top_k = 0;           // kTopK: k
  bool moe_norm = false;       // kMoeWeights: divide the selected weights by their sum

  bool operator==(const OpParams&) const = default;
};

struct Node {
  int id = -1;
  std::string name;  // stable: "blk.3.attn_q"; weights keep their GGUF names
  Op op = Op::kInput;
  DType type = DType::F32;
  Shape ne{1, 1, 1, 1};
  std::vector<int> src;  // node ids, all < id
  OpParams params;
  const void* data = nullptr;  // kWeight: the tensor's bytes (e.g. mmap'd GGUF)
  int backend = -1;            // index into the scheduler's backend list; -1 = unassigned
  bool fused = false;          // produced by the fusion pass
  bool dead = false;           // absorbed by a fusion: no buffer, not executed

  int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
  int64_t n_rows() const { return ne[1] * ne[2] * ne[3]; }
  size_t n_bytes() const { return row_bytes(type, ne[0]) * static_cast<size_t>(n_rows()); }
};

struct Graph {
  std::vector<Node> nodes;   // build = execution order
  std::vector<int> inputs;   // kInput nodes, in declaration order
  std::vector<int> outputs;  // nodes read after compute (kept alive to the end)

  // Id of the live node with this name, or -1.
  int find(std::string_view name) const;
  // Structural equality (ops, names, shapes, types, sources, params); ignores weight pointers,
  // backend assignment and fusion flags' causes. Debug checks of graph reuse use it.
  bool same_structure(const Graph& other) const;
};

// Number of consumers of each node among live nodes, plus one per appearance in outputs.
std::vector<int> use_counts(const Graph& g);

std::string shape_string(const Shape& ne);  // "[64, 4]" (trailing 1s dropped)

}  // namespace minfer
