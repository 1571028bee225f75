#include "graph/fusion.h"

#include "core/status.h"

namespace minfer {
namespace {

const Node& at(const Graph& g, int id) { return g.nodes[static_cast<size_t>(id)]; }

// The producer p can disappear into its only consumer c.
bool absorbable(const Graph& g, const std::vector<int>& uses, int p, int c) {
  const Node& pn = at(g, p);
  return !pn.dead && uses[static_cast<size_t>(p)] == 1 && pn.backend == at(g, c).backend;
}

}  // namespace

namespace {
// mul(act(x), y) or mul(y, act(x)) -> fused(x, y): swiglu and geglu.
std::optional<FusionMatch> match_gated(const Graph& g, const std::vector<int>& uses, int root, Op act, Op fused,
                                       FusionRule rule) {
  const Node& m = at(g, root);
  if (m.dead || m.op != Op::kMul || m.src.size() != 2) return std::nullopt;
  for (int side = 0; side < 2; ++side) {
    const int s = m.src[static_cast<size_t>(side)];
    const int other = m.src[static_cast<size_t>(1 - side)];
    const Node& a = at(g, s);
    if (a.op != act || s == other || !absorbable(g, uses, s, root)) continue;
    const Node& x = at(g, a.src[0]);
    const Node& y = at(g, other);
    if (x.ne != m.ne || y.ne != m.ne || x.type != DType::F32 || y.type != DType::F32) continue;
    FusionMatch r{rule, root, s, m};
    r.fused.op = fused;
    r.fused.src = {a.src[0], other};
    r.fused.fused = true;
    return r;
  }
  return std::nullopt;
}
}  // namespace

std::optional<FusionMatch> match_swiglu(const Graph& g, const std::vector<int>& uses, int root) {
  return match_gated(g, uses, root, Op::kSilu, Op::kSwiglu, FusionRule::kSwiglu);
}

std::optional<FusionMatch> match_geglu(const Graph& g, const std::vector<int>& uses, int root) {
  return match_gated(g, uses, root, Op::kGelu, Op::kGeglu, FusionRule::kGeglu);
}

std::optional<FusionMatch> match_rms_norm_mul(const Graph& g, const std::vector<int>& uses, int root) {
  const Node& m = at(g, root);
  if (m.dead || m.op != Op::kMul || m.src.size() != 2) return std::nullopt;
  const int s = m.src[0];
  const Node& norm = at(g, s);
  const Node& w = at(g, m.src[1]);
  if (norm.op != Op::kRmsNorm || m.src[1] == s || !absorbable(g, uses, s, root)) return std::nullopt;
  if (w.type != DType::F32 || w.n_rows() != 1 || w.ne[0] != norm.ne[0]) return std::nullopt;
  FusionMatch r{FusionRule::kRmsNormMul, root, s, m};
  r.fused.op = Op::kRmsNormMul;
  r.fused.src = {norm.src[0], m.src[1]};
  r.fused.params.eps = norm.params.eps;
  r.fused.fused = true;
  return r;
}

std::optional<FusionMatch> match_matmul_swiglu(const Graph& g, const std::vector<int>& uses, int root) {
  const Node& s = at(g, root);
  if (s.dead || s.op != Op::kSwiglu || s.src.size() != 2 || s.src[0] == s.src[1]) return std::nullopt;
  const int gate = s.src[0], up = s.src[1];
  const Node& gm = at(g, gate);
  const Node& um = at(g, up);
  if (gm.op != Op::kMatmul || um.op != Op::kMatmul || !absorbable(g, uses, gate, root) || !absorbable(g, uses, up, root))
    return std::nullopt;
  if (gm.src[1] != um.src[1] || gm.src[0] == um.src[0]) return std::nullopt;
  const Node& wg = at(g, gm.src[0]);
  const Node& wu = at(g, um.src[0]);
  if (wg.type != wu.type || wg.ne != wu.ne || gm.ne != s.ne || um.ne != s.ne) return std::nullopt;
  FusionMatch r{FusionRule::kMatmulSwiglu, root, gate, s};
  r.absorbed2 = up;
  r.fused.op = Op::kMatmulSwiglu;
  r.fused.src = {gm.src[0], um.src[0], gm.src[1]};
  r.fused.fused = true;
  return r;
}

void apply_fusion(Graph& g, const FusionMatch& m) {
  Node& root = g.nodes[static_cast<size_t>(m.root)];
  MINFER_ASSERT(root.id == m.fused.id);
  root = m.fused;
  for (int id : {m.absorbed, m.absorbed2}) {
    if (id < 0) continue;
    Node& gone = g.nodes[static_cast<size_t>(id)];
    MINFER_ASSERT(!gone.dead);
    gone.dead = true;
    gone.src.clear();
  }
}

int fuse_graph(Graph& g, const std::function<bool(const Node&)>& allowed) {
  using Rule = std::optional<FusionMatch> (*)(const Graph&, const std::vector<int>&, int);
  constexpr Rule kRules[] = {match_swiglu, match_geglu, match_rms_norm_mul, match_matmul_swiglu};
  int n = 0;
  std::vector<int> uses = use_counts(g);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    for (bool again = true; again;) {  // a rewritten node may match another rule
      again = false;
      for (Rule rule : kRules) {
        auto m = rule(g, uses, static_cast<int>(i));
        if (!m || !allowed(m->fused)) continue;
        apply_fusion(g, *m);
        uses = use_counts(g);
        ++n;
        again = true;
        break;
      }
    }
  }
  return n;
}

}  // namespace minfer
