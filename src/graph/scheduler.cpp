#include "graph/scheduler.h"

#include <algorithm>
#include <cstring>
#include <map>

#include "graph/fusion.h"

namespace minfer {
namespace {

std::string describe(const Graph& g, const Node& n) {
  std::string s = fmt::format("'{}' ({} {} {}", n.name, op_name(n.op), dtype_name(n.type), shape_string(n.ne));
  for (int src : n.src) {
    const Node& sn = g.nodes[static_cast<size_t>(src)];
    s += fmt::format(", src '{}' {} {}", sn.name, dtype_name(sn.type), shape_string(sn.ne));
  }
  return s + ")";
}

// A split's copies run when the split starts (compute()), but insert_copies() put each one just
// before its first reader, possibly after other nodes of the same split. Moves every kCopy node
// to just before the first compute node of its run (a run: consecutive compute nodes of one
// backend, as prepare() cuts splits), so that the memory planner sees each copy live from when it
// really runs: no node of the run may reuse its buffer. A copy's source is a compute node of an
// earlier run (another backend) or a leaf (emitted first when it comes later in the order).
Graph hoist_copies(const Graph& g) {
  const size_t n = g.nodes.size();
  std::vector<int> run_of(n, -1), first_of_run;
  int prev_backend = -1;
  for (const Node& x : g.nodes) {
    if (x.dead || op_is_leaf(x.op)) continue;
    if (first_of_run.empty() || x.backend != prev_backend) first_of_run.push_back(x.id);
    prev_backend = x.backend;
    run_of[static_cast<size_t>(x.id)] = static_cast<int>(first_of_run.size()) - 1;
  }
  std::vector<std::vector<int>> copies_of_run(first_of_run.size());
  for (const Node& x : g.nodes)
    if (!x.dead && x.op == Op::kCopy && first_of_run[static_cast<size_t>(run_of[static_cast<size_t>(x.id)])] != x.id)
      copies_of_run[static_cast<size_t>(run_of[static_cast<size_t>(x.id)])].push_back(x.id);
  std::vector<int> order;
  std::vector<bool> emitted(n, false);
  auto emit = [&](int id) {
    if (!emitted[static_cast<size_t>(id)]) order.push_back(id);
    emitted[static_cast<size_t>(id)] = true;
  };
  for (const Node& x : g.nodes) {
    const int r = run_of[static_cast<size_t>(x.id)];
    if (r >= 0 && first_of_run[static_cast<size_t>(r)] == x.id) {
      for (int c : copies_of_run[static_cast<size_t>(r)]) {
        const int src = g.nodes[static_cast<size_t>(c)].src[0];
        MINFER_ASSERT(emitted[static_cast<size_t>(src)] || op_is_leaf(g.nodes[static_cast<size_t>(src)].op));
        emit(src);
        emit(c);
      }
    }
    emit(x.id);
  }
  MINFER_ASSERT(order.size() == n);
  std::vector<int> remap(n);
  for (size_t i = 0; i < n; ++i) remap[static_cast<size_t>(order[i])] = static_cast<int>(i);
  Graph out;
  out.nodes.reserve(n);
  for (int id : order) {
    Node x = g.nodes[static_cast<size_t>(id)];
    x.id = remap[static_cast<size_t>(id)];
    for (int& src : x.src) src = remap[static_cast<size_t>(src)];
    out.nodes.push_back(std::move(x));
  }
  for (int i : g.inputs) out.inputs.push_back(remap[static_cast<size_t>(i)]);
  for (int o : g.outputs) out.outputs.push_back(remap[static_cast<size_t>(o)]);
  return out;
}

}  // namespace

Status assign_backends(Graph& g, const std::vector<Backend*>& backends,
                       const std::function<bool(const Node&, int)>& allow) {
  for (Node& n : g.nodes) {
    if (n.dead || op_is_leaf(n.op)) continue;
    int best = -1;
    for (size_t b = 0; b < backends.size(); ++b) {
      if (allow && !allow(n, static_cast<int>(b))) continue;
      if (!backends[b]->supports_op(g, n)) continue;
      if (best < 0 || backends[b]->priority() > backends[static_cast<size_t>(best)]->priority()) best = static_cast<int>(b);
    }
    if (best < 0) return make_error("graph: no backend supports node {}", describe(g, n));
    n.backend = best;
  }
  // Leaves live where their first consumer runs.
  for (Node& n : g.nodes) {
    if (op_is_leaf(n.op)) n.backend = -1;
  }
  for (const Node& n : g.nodes) {
    if (n.dead) continue;
    for (int s : n.src) {
      Node& sn = g.nodes[static_cast<size_t>(s)];
      if (op_is_leaf(sn.op) && sn.backend < 0) sn.backend = n.backend;
    }
  }
  for (Node& n : g.nodes) {
    if (op_is_leaf(n.op) && n.backend < 0) n.backend = 0;
  }
  return Status::ok();
}

Scheduler::Scheduler(std::vector<Backend*> backends) : backends_(std::move(backends)) {
  MINFER_ASSERT(!backends_.empty());
}

Scheduler::~Scheduler() {
  for (auto& [name, r] : regions_) backends_[static_cast<size_t>(r.backend)]->free(r.buf);
}

PreparedGraph::~PreparedGraph() {
  if (scheduler && scheduler->resident_ == this) scheduler->resident_ = nullptr;
  for (size_t b = 0; b < arenas.size(); ++b) {
    if (arenas[b].base) owners[b]->free(arenas[b]);
  }
}

size_t Scheduler::persistent_bytes() const {
  size_t n = 0;
  for (const auto& [name, r] : regions_) n += r.buf.size;
  return n;
}

Scheduler::RegionView Scheduler::persistent_region(const std::string& name) const {
  auto it = regions_.find(name);
  if (it == regions_.end()) return {};
  const Region& r = it->second;
  return {backends_[static_cast<size_t>(r.backend)], r.type, r.ne, r.buf.base, r.buf.size};
}

// A source computed on another backend is read through a kCopy node on the consumer's backend
// (one per source and backend). Weights are not copied: backends read them from model memory.
Expected<Graph> Scheduler::insert_copies(const Graph& g) const {
  Graph out;
  std::vector<int> remap(g.nodes.size(), -1);
  std::map<std::pair<int, int>, int> copies;  // (old src id, backend) -> new copy id
  auto push = [&](Node n) {
    n.id = static_cast<int>(out.nodes.size());
    out.nodes.push_back(std::move(n));
    return out.nodes.back().id;
  };
  for (const Node& n : g.nodes) {
    Node c = n;
    for (int& s : c.src) {
      const Node& sn = g.nodes[static_cast<size_t>(s)];
      const int new_s = remap[static_cast<size_t>(s)];
      if (n.dead || sn.op == Op::kWeight || sn.backend == n.backend) {
        s = new_s;
        continue;
      }
      if (sn.op == Op::kKvCache || (n.op == Op::kKvStore && s == n.src[0]))
        return make_error("graph: cache '{}' on backend {} is written by '{}' on backend {}", sn.name,
                          backends_[static_cast<size_t>(sn.backend)]->name(), n.name,
                          backends_[static_cast<size_t>(n.backend)]->name());
      auto key = std::make_pair(s, n.backend);
      auto it = copies.find(key);
      if (it == copies.end()) {
        Node cp;
        cp.name = fmt::format("{}#{}", sn.name, backends_[static_cast<size_t>(n.backend)]->name());
        cp.op = Op::kCopy;
        cp.type = sn.type;
        cp.ne = sn.ne;
        cp.src = {new_s};
        cp.backend = n.backend;
        it = copies.emplace(key, push(std::move(cp))).first;
      }
      s = it->second;
    }
    remap[static_cast<size_t>(n.id)] = push(std::move(c));
  }
  for (int i : g.inputs) out.inputs.push_back(remap[static_cast<size_t>(i)]);
  for (int o : g.outputs) out.outputs.push_back(remap[static_cast<size_t>(o)]);
  return out;
}

Expected<void*> Scheduler::persistent(const Node& n) {
  auto it = regions_.find(n.name);
  if (it != regions_.end()) {
    const Region& r = it->second;
    if (r.type != n.type || r.ne != n.ne || r.backend != n.backend)
      return make_error("graph: persistent region '{}' exists as {} {} on {}, graph wants {} {} on {}", n.name,
                        dtype_name(r.type), shape_string(r.ne), backends_[static_cast<size_t>(r.backend)]->name(),
                        dtype_name(n.type), shape_string(n.ne), backends_[static_cast<size_t>(n.backend)]->name());
    return r.buf.base;
  }
  auto buf = backends_[static_cast<size_t>(n.backend)]->alloc(n.n_bytes());
  if (!buf) return make_error("graph: cannot allocate '{}' ({} bytes): {}", n.name, n.n_bytes(), buf.error().message);
  regions_.emplace(n.name, Region{n.backend, n.type, n.ne, *buf});
  return buf->base;
}

Expected<std::unique_ptr<PreparedGraph>> Scheduler::prepare(Graph g, const SchedulerOptions& opt) {
  auto pg = std::make_unique<PreparedGraph>();
  MINFER_TRY(assign_backends(g, backends_, opt.allow));
  if (opt.fuse) {
    pg->n_fused = fuse_graph(g, [&](const Node& f) {
      return backends_[static_cast<size_t>(f.backend)]->supports_op(g, f);
    });
  }
  auto with_copies = insert_copies(g);
  if (!with_copies) return with_copies.error();
  pg->graph = hoist_copies(*with_copies);
  const Graph& graph = pg->graph;
  const int nb = static_cast<int>(backends_.size());
  pg->plan = plan_memory(graph, nb);
  pg->owners = backends_;
  pg->scheduler = this;
  pg->arenas.resize(static_cast<size_t>(nb));
  for (int b = 0; b < nb; ++b) {
    const size_t bytes = pg->plan.arena_bytes[static_cast<size_t>(b)];
    if (bytes == 0) continue;
    auto buf = backends_[static_cast<size_t>(b)]->alloc(bytes);
    if (!buf) return make_error("graph: cannot allocate the {} activation arena ({} bytes): {}",
                                backends_[static_cast<size_t>(b)]->name(), bytes, buf.error().message);
    pg->arenas[static_cast<size_t>(b)] = *buf;
  }
  pg->addrs.assign(graph.nodes.size(), nullptr);
  for (const Node& n : graph.nodes) {
    const TensorMemory& m = pg->plan.nodes[static_cast<size_t>(n.id)];
    void*& a = pg->addrs[static_cast<size_t>(n.id)];
    switch (m.kind) {
      case TensorMemory::kArena:
        a = static_cast<uint8_t*>(pg->arenas[static_cast<size_t>(m.arena)].base) + m.offset;
        break;
      case TensorMemory::kExternal: a = const_cast<void*>(n.data); break;
      case TensorMemory::kPersistent:
        if (m.root == n.id) {
          auto p = persistent(n);
          if (!p) return p.error();
          a = *p;
        } else {
          a = pg->addrs[static_cast<size_t>(m.root)];
        }
        break;
      case TensorMemory::kNone: break;
    }
  }
  // Splits: contiguous runs of one backend; a copy runs before the split of its backend that
  // follows it (its source, on another backend, finished in an earlier split).
  for (const Node& n : graph.nodes) {
    if (n.dead || op_is_leaf(n.op)) continue;
    if (pg->splits.empty() || pg->splits.back().backend != n.backend) pg->splits.push_back(Split{n.backend, {}, {}});
    if (n.op == Op::kCopy) pg->splits.back().copies.push_back(n.id);
    else pg->splits.back().nodes.push_back(n.id);
  }
  for (int b = 0; b < nb; ++b) {
    std::vector<int> mine;
    for (const Split& s : pg->splits)
      if (s.backend == b) mine.insert(mine.end(), s.nodes.begin(), s.nodes.end());
    MINFER_TRY(backends_[static_cast<size_t>(b)]->prepare(graph, mine));
  }
  return pg;
}

Status Scheduler::set_input(PreparedGraph& pg, int node, const void* data, size_t n_bytes) {
  MINFER_ASSERT(node >= 0 && node < static_cast<int>(pg.graph.nodes.size()));
  const Node& n = pg.graph.nodes[static_cast<size_t>(node)];
  if (n.op != Op::kInput) return make_error("graph: '{}' is not an input", n.name);
  if (n_bytes != n.n_bytes())
    return make_error("graph: input '{}' takes {} bytes, got {}", n.name, n.n_bytes(), n_bytes);
  backends_[static_cast<size_t>(n.backend)]->write(pg.addrs[static_cast<size_t>(node)], data, n_bytes);
  return Status::ok();
}

Status Scheduler::compute(PreparedGraph& pg) {
  if (resident_ && resident_ != &pg) {
    for (size_t b = 0; b < resident_->arenas.size(); ++b)
      if (resident_->arenas[b].base) resident_->owners[b]->discard(resident_->arenas[b]);
  }
  resident_ = &pg;
  const Graph& g = pg.graph;
  std::vector<uint8_t> staging;
  for (const Split& s : pg.splits) {
    Backend* be = backends_[static_cast<size_t>(s.backend)];
    for (int c : s.copies) {
      const Node& cn = g.nodes[static_cast<size_t>(c)];
      const int src = cn.src[0];
      Backend* from = backends_[static_cast<size_t>(g.nodes[static_cast<size_t>(src)].backend)];
      from->synchronize();
      staging.resize(cn.n_bytes());
      from->read(staging.data(), pg.addrs[static_cast<size_t>(src)], staging.size());
      be->write(pg.addrs[static_cast<size_t>(c)], staging.data(), staging.size());
    }
    if (!observer_) {
      MINFER_TRY(be->compute(g, s.nodes, pg.addrs));
      continue;
    }
    for (int id : s.nodes) {
      MINFER_TRY(be->compute(g, std::span<const int>(&id, 1), pg.addrs));
      be->synchronize();
      const Node& n = g.nodes[static_cast<size_t>(id)];
      const void* a = pg.addrs[static_cast<size_t>(id)];
      if (!a) continue;
      staging.resize(n.n_bytes());
      be->read(staging.data(), a, staging.size());
      observer_(n, staging.data());
    }
  }
  for (Backend* be : backends_) be->synchronize();
  return Status::ok();
}

Status Scheduler::get_output(const PreparedGraph& pg, int node, void* dst, size_t n_bytes) {
  MINFER_ASSERT(node >= 0 && node < static_cast<int>(pg.graph.nodes.size()));
  const Node& n = pg.graph.nodes[static_cast<size_t>(node)];
  if (std::find(pg.graph.outputs.begin(), pg.graph.outputs.end(), node) == pg.graph.outputs.end())
    return make_error("graph: '{}' is not an output (its buffer may have been reused)", n.name);
  if (n_bytes > n.n_bytes()) return make_error("graph: output '{}' has {} bytes, asked {}", n.name, n.n_bytes(), n_bytes);
  backends_[static_cast<size_t>(n.backend)]->read(dst, pg.addrs[static_cast<size_t>(node)], n_bytes);
  return Status::ok();
}

}  // namespace minfer
