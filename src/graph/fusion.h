// The fusion pass. Each rule is a pure function: it looks at one node of a graph and returns
// the rewrite (the fused replacement of that node and the node it absorbs) or nothing. The
// rules' legality conditions are unit-tested directly (tests/unit/test-graph-fusion.cpp).
//
//   std::vector<int> uses = use_counts(g);
//   if (auto m = match_swiglu(g, uses, id)) apply_fusion(g, *m);
//   int n = fuse_graph(g, [&](const Node& fused) { return backend.supports_op(g, fused); });
//
// Fused kernels compute exactly the unfused arithmetic (same operations, same order), so a
// fused graph gives bit-identical results to the same graph run unfused.
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include "graph/graph.h"

namespace minfer {

#define MINFER_FUSION_RULES(X)                                          \
  X(kSwiglu, "swiglu", "mul(silu(x), y) -> swiglu(x, y)")                \
  X(kGeglu, "geglu", "mul(gelu(x), y) -> geglu(x, y)")                    \
  X(kRmsNormMul, "rms_norm_mul", "mul(rms_norm(x), w) -> rms_norm_mul(x, w)")  \
  X(kMatmulSwiglu, "matmul_swiglu", "swiglu(matmul(Wg, x), matmul(Wu, x)) -> matmul_swiglu(Wg, Wu, x)")

enum class FusionRule : uint8_t {
#define MINFER_X(e, name, help) e,
  MINFER_FUSION_RULES(MINFER_X)
#undef MINFER_X
};

struct FusionMatch {
  FusionRule rule;
  int root = -1;      // the node replaced by `fused` (keeps its id and name)
  int absorbed = -1;  // the node that disappears (marked dead)
  Node fused;
  int absorbed2 = -1;  // a second node that disappears (matmul_swiglu: both matmuls), or -1
};

// mul(silu(x), y) or mul(y, silu(x)) where the silu has no other use, is not an output, runs
// on the same backend, and x, y and the product all have one shape (no broadcast).
std::optional<FusionMatch> match_swiglu(const Graph& g, const std::vector<int>& uses, int root);
// The same for mul(gelu(x), y) -> geglu(x, y).
std::optional<FusionMatch> match_geglu(const Graph& g, const std::vector<int>& uses, int root);
// mul(rms_norm(x), w) where the norm has no other use, is not an output, runs on the same
// backend, and w is a single f32 row of x's width.
std::optional<FusionMatch> match_rms_norm_mul(const Graph& g, const std::vector<int>& uses, int root);

// swiglu(matmul(Wg, x), matmul(Wu, x)) where neither matmul has another use or is an output,
// all three run on the same backend, both read the same x, and Wg and Wu have one type and
// shape: the FFN's gate and up projections in one op (one pass over x, one parallel region).
std::optional<FusionMatch> match_matmul_swiglu(const Graph& g, const std::vector<int>& uses, int root);

// Replaces the root by m.fused and marks m.absorbed (and m.absorbed2) dead. The match must come from g.
void apply_fusion(Graph& g, const FusionMatch& m);

// Applies every rule over g in build order where allowed(fused node) says yes (the backend's
// supports_op), each node until no rule matches it (mul(silu(matmul), matmul) becomes swiglu,
// then matmul_swiglu). Returns the number of rewrites.
int fuse_graph(Graph& g, const std::function<bool(const Node&)>& allowed);

}  // namespace minfer
