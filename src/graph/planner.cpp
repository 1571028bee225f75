#include "graph/planner.h"

#include <algorithm>
#include <climits>

#include "core/status.h"

namespace minfer {
namespace {

constexpr int kForever = INT_MAX;

size_t align_up(size_t n) { return (n + kTensorAlignment - 1) / kTensorAlignment * kTensorAlignment; }

// First-class free list over one arena: best fit among the holes, else grow the top (reusing
// a hole that touches the top).
class ArenaAllocator {
 public:
  size_t alloc(size_t size) {
    size_t best = free_.size();
    for (size_t i = 0; i < free_.size(); ++i) {
      if (free_[i].size >= size && (best == free_.size() || free_[i].size < free_[best].size)) best = i;
    }
    if (best < free_.size()) {
      const size_t off = free_[best].offset;
      free_[best].offset += size;
      free_[best].size -= size;
      if (free_[best].size == 0) free_.erase(free_.begin() + static_cast<ptrdiff_t>(best));
      return off;
    }
    if (!free_.empty() && free_.back().offset + free_.back().size == top_) {
      const size_t off = free_.back().offset;
      free_.pop_back();
      top_ = off + size;
      return off;
    }
    const size_t off = top_;
    top_ += size;
    return off;
  }

  void release(size_t offset, size_t size) {
    auto it = std::lower_bound(free_.begin(), free_.end(), offset,
                               [](const Hole& h, size_t o) { return h.offset < o; });
    it = free_.insert(it, Hole{offset, size});
    // Coalesce with the next, then with the previous hole.
    if (it + 1 != free_.end() && it->offset + it->size == (it + 1)->offset) {
      it->size += (it + 1)->size;
      free_.erase(it + 1);
    }
    if (it != free_.begin() && (it - 1)->offset + (it - 1)->size == it->offset) {
      (it - 1)->size += it->size;
      free_.erase(it);
    }
  }

  size_t peak() const { return top_; }

 private:
  struct Hole {
    size_t offset;
    size_t size;
  };
  std::vector<Hole> free_;  // sorted by offset, no two adjacent
  size_t top_ = 0;
};

}  // namespace

MemoryPlan plan_memory(const Graph& g, int n_backends) {
  const size_t n = g.nodes.size();
  MemoryPlan plan;
  plan.nodes.resize(n);
  plan.arena_bytes.assign(static_cast<size_t>(n_backends), 0);

  // Direct last reader of each node, in build order.
  std::vector<int> last_reader(n, -1);
  for (const Node& node : g.nodes) {
    if (node.dead) continue;
    for (int s : node.src) last_reader[static_cast<size_t>(s)] = std::max(last_reader[static_cast<size_t>(s)], node.id);
  }
  for (int o : g.outputs) last_reader[static_cast<size_t>(o)] = kForever;

  std::vector<ArenaAllocator> arenas(static_cast<size_t>(n_backends));
  std::vector<int> end(n, -1);  // per root: build index of its last reader so far
  std::vector<int> live;        // arena roots currently holding memory

  for (size_t i = 0; i < n; ++i) {
    const Node& node = g.nodes[i];
    TensorMemory& m = plan.nodes[i];
    m.size = node.n_bytes();
    const int id = static_cast<int>(i);
    if (node.dead) continue;

    if (node.op == Op::kWeight || node.op == Op::kKvCache) {
      m.kind = node.op == Op::kWeight ? TensorMemory::kExternal : TensorMemory::kPersistent;
      m.root = id;
      end[i] = kForever;
    } else if (op_is_view(node.op)) {
      const int r = plan.nodes[static_cast<size_t>(node.src[0])].root;
      const TensorMemory& rm = plan.nodes[static_cast<size_t>(r)];
      MINFER_ASSERT(r >= 0 && m.size <= rm.size);
      m.kind = rm.kind;
      m.arena = rm.arena;
      m.offset = rm.offset;
      m.root = r;
      end[static_cast<size_t>(r)] = std::max(end[static_cast<size_t>(r)], last_reader[i]);
    } else {
      MINFER_ASSERT(node.backend >= 0 && node.backend < n_backends);
      int alias = -1;
      if (op_in_place(node.op) && !node.src.empty()) {
        const int r = plan.nodes[static_cast<size_t>(node.src[0])].root;
        const TensorMemory& rm = plan.nodes[static_cast<size_t>(r)];
        if (rm.kind == TensorMemory::kArena && rm.arena == node.backend && end[static_cast<size_t>(r)] == id &&
            align_up(rm.size) == align_up(m.size) && g.nodes[static_cast<size_t>(r)].op != Op::kInput)
          alias = r;
      }
      if (alias >= 0) {
        const TensorMemory& rm = plan.nodes[static_cast<size_t>(alias)];
        m.kind = TensorMemory::kArena;
        m.arena = rm.arena;
        m.offset = rm.offset;
        m.root = alias;
        end[static_cast<size_t>(alias)] = std::max(id, last_reader[i]);
      } else {
        m.kind = TensorMemory::kArena;
        m.arena = node.backend;
        m.offset = arenas[static_cast<size_t>(node.backend)].alloc(align_up(m.size));
        m.root = id;
        m.first = id;
        end[i] = node.op == Op::kInput ? kForever : std::max(id, last_reader[i]);
        plan.naive_bytes += align_up(m.size);
        live.push_back(id);
      }
    }
    // Free every arena root whose last reader has run.
    for (size_t k = 0; k < live.size();) {
      const int r = live[k];
      if (end[static_cast<size_t>(r)] <= id) {
        const TensorMemory& rm = plan.nodes[static_cast<size_t>(r)];
        arenas[static_cast<size_t>(rm.arena)].release(rm.offset, align_up(rm.size));
        live[k] = live.back();
        live.pop_back();
      } else {
        ++k;
      }
    }
  }
  for (size_t i = 0; i < n; ++i) {
    TensorMemory& m = plan.nodes[i];
    if (m.root < 0) continue;
    const TensorMemory& rm = plan.nodes[static_cast<size_t>(m.root)];
    m.first = rm.first >= 0 ? rm.first : m.root;
    m.last = end[static_cast<size_t>(m.root)];
  }
  for (int b = 0; b < n_backends; ++b) plan.arena_bytes[static_cast<size_t>(b)] = arenas[static_cast<size_t>(b)].peak();
  return plan;
}

}  // namespace minfer
