// Liveness-based memory planning: one activation arena per backend, planned once per graph.
//
//   MemoryPlan p = plan_memory(g, n_backends);
//   p.nodes[id].kind == TensorMemory::kArena;  p.nodes[id].offset ... p.arena_bytes[backend]
//
// Rules (see docs/graph.md):
//   - liveness follows the build (= execution) order; a buffer is free after its last reader;
//   - inputs and graph outputs are never freed (inputs are host-filled before compute);
//   - views (reshape, kv_store) share their source's storage and extend its liveness;
//   - an in-place op (ops.h) reuses its first source's buffer when that buffer's last reader
//     is this node, it is not an input or output, it is on the same backend and the same size;
//     the alias then extends the buffer's liveness to the op's own last reader;
//   - weights are external (model memory), kv caches persistent (owned by the scheduler);
//   - dead (fused-away) nodes get nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "graph/graph.h"

namespace minfer {

constexpr size_t kTensorAlignment = 64;

struct TensorMemory {
  enum Kind : uint8_t { kNone, kArena, kExternal, kPersistent };
  Kind kind = kNone;
  int arena = -1;     // backend index for kArena
  size_t offset = 0;  // within the arena (views: their root's offset)
  size_t size = 0;    // bytes of the node's own tensor
  int root = -1;      // node whose storage this is (itself unless a view or in-place alias)
  int first = -1;     // build index where the root's storage becomes live
  int last = -1;      // build index of the root's last reader (INT32_MAX: never freed)
};

struct MemoryPlan {
  std::vector<TensorMemory> nodes;   // [n_nodes]
  std::vector<size_t> arena_bytes;   // [n_backends]
  size_t naive_bytes = 0;            // sum of all arena tensors without reuse (for reports)
};

// Every live node must have a backend in [0, n_backends) except weights (any value).
MemoryPlan plan_memory(const Graph& g, int n_backends);

}  // namespace minfer
