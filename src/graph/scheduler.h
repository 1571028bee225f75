// The scheduler: assign -> fuse -> cross-backend copies -> plan -> allocate, then execute the
// graph as contiguous single-backend splits. One scheduler per session: it owns the persistent
// regions (the two KV caches of every layer), which survive across graphs, so a graph rebuilt
// for a new shape finds the cache it left.
//
//   CpuBackend cpu(n_threads);
//   Scheduler sched({&cpu});
//   auto pg = sched.prepare(std::move(graph), {.fuse = true});     // once per shape
//   sched.set_input(**pg, tokens_id, ids.data(), ids.size() * 4);  // every step
//   sched.compute(**pg);
//   sched.get_output(**pg, logits_id, out.data(), out.size() * 4);
//
// Backend choice per node: the highest priority() whose supports_op() accepts it; a node no
// backend accepts is an error naming it. There is no silent fallback at execution time.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "graph/backend.h"
#include "graph/graph.h"
#include "graph/planner.h"

namespace minfer {

struct SchedulerOptions {
  bool fuse = true;
  // Placement: whether node n may run on backend b (an index into backends()); null: any. A
  // node goes to the highest-priority backend that supports it and is allowed (e.g. -ngl: a
  // layer's nodes on a GPU only when that layer is offloaded).
  std::function<bool(const Node& n, int backend)> allow = nullptr;
};

// A contiguous run of nodes executed by one backend.
struct Split {
  int backend = -1;
  std::vector<int> nodes;   // live compute nodes, build order
  std::vector<int> copies;  // kCopy nodes run (by the scheduler) before this split
};

class Scheduler;

// Arenas: only the graph computed last keeps its activation memory resident; computing
// another graph first discards the previous one's arenas (Backend::discard), so a decode loop
// does not carry the prefill graph's scratch (tens of MiB at 512 tokens).
struct PreparedGraph {
  PreparedGraph() = default;
  ~PreparedGraph();  // frees the arenas
  PreparedGraph(const PreparedGraph&) = delete;
  PreparedGraph& operator=(const PreparedGraph&) = delete;

  Graph graph;
  MemoryPlan plan;
  std::vector<Split> splits;
  std::vector<BackendBuffer> arenas;  // [n_backends]
  std::vector<void*> addrs;           // [n_nodes] each node's data address in its backend
  int n_fused = 0;
  std::vector<Backend*> owners;  // [n_backends] who allocated the arenas
  Scheduler* scheduler = nullptr;  // who prepared it (told when this graph goes away)
};

// Called after each node is computed with its result copied to host memory (n.n_bytes()
// bytes). With an observer set, compute() runs node by node (slow): for debugging and
// op-by-op comparisons with another engine.
using NodeObserver = std::function<void(const Node& n, const void* host_data)>;

class Scheduler {
 public:
  explicit Scheduler(std::vector<Backend*> backends);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  const std::vector<Backend*>& backends() const { return backends_; }

  Expected<std::unique_ptr<PreparedGraph>> prepare(Graph g, const SchedulerOptions& opt);
  Status set_input(PreparedGraph& pg, int node, const void* data, size_t n_bytes);
  Status compute(PreparedGraph& pg);
  Status get_output(const PreparedGraph& pg, int node, void* dst, size_t n_bytes);
  void set_observer(NodeObserver obs) { observer_ = std::move(obs); }
  // Bytes held by persistent regions (KV caches).
  size_t persistent_bytes() const;
  // A persistent region by its kv_cache node name ("blk.3.cache_k"), for code that edits the KV
  // cache in place through the owning backend's read()/write() (shift, save, restore). base is
  // null when no prepared graph has created the region yet.
  struct RegionView {
    Backend* backend = nullptr;
    DType type = DType::F32;
    Shape ne{};
    void* base = nullptr;
    size_t size = 0;
  };
  RegionView persistent_region(const std::string& name) const;

 private:
  struct Region {
    int backend;
    DType type;
    Shape ne;
    BackendBuffer buf;
  };
  Expected<Graph> insert_copies(const Graph& g) const;
  Expected<void*> persistent(const Node& n);
  friend struct PreparedGraph;

  const PreparedGraph* resident_ = nullptr;  // computed last: its arenas hold pages
  std::vector<Backend*> backends_;
  std::map<std::string, Region> regions_;  // by kv_cache node name
  NodeObserver observer_;
};

// Shorthand used by the passes and tests: the first-consumer backend of each leaf, the
// highest-priority supporting backend of every other node.
Status assign_backends(Graph& g, const std::vector<Backend*>& backends,
                       const std::function<bool(const Node&, int)>& allow = nullptr);

}  // namespace minfer
