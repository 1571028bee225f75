#include "graph/graph.h"

#include <fmt/format.h>

namespace minfer {
namespace {

struct OpInfo {
  std::string_view name;
  bool in_place;
  bool view;
  std::string_view help;
};

constexpr OpInfo kOpInfo[] = {
#define MINFER_X(e, name, in_place, view, help) {name, in_place, view, help},
    MINFER_OPS(MINFER_X)
#undef MINFER_X
};

const OpInfo& info(Op op) { return kOpInfo[static_cast<int>(op)]; }

}  // namespace

std::string_view op_name(Op op) { return info(op).name; }
std::string_view op_help(Op op) { return info(op).help; }
bool op_in_place(Op op) { return info(op).in_place; }
bool op_is_view(Op op) { return info(op).view; }

std::optional<Op> op_from_name(std::string_view name) {
  for (int i = 0; i < kOpCount; ++i)
    if (kOpInfo[i].name == name) return static_cast<Op>(i);
  return std::nullopt;
}

int Graph::find(std::string_view name) const {
  for (const Node& n : nodes)
    if (!n.dead && n.name == name) return n.id;
  return -1;
}

bool Graph::same_structure(const Graph& o) const {
  if (nodes.size() != o.nodes.size() || inputs != o.inputs || outputs != o.outputs) return false;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& a = nodes[i];
    const Node& b = o.nodes[i];
    if (a.name != b.name || a.op != b.op || a.type != b.type || a.ne != b.ne || a.src != b.src ||
        !(a.params == b.params) || a.dead != b.dead)
      return false;
  }
  return true;
}

std::vector<int> use_counts(const Graph& g) {
  std::vector<int> uses(g.nodes.size(), 0);
  for (const Node& n : g.nodes) {
    if (n.dead) continue;
    for (int s : n.src) ++uses[static_cast<size_t>(s)];
  }
  for (int o : g.outputs) ++uses[static_cast<size_t>(o)];
  return uses;
}

std::string shape_string(const Shape& ne) {
  int n = kMaxDims;
  while (n > 1 && ne[static_cast<size_t>(n - 1)] == 1) --n;
  std::string s = "[";
  for (int i = 0; i < n; ++i) s += fmt::format("{}{}", i ? ", " : "", ne[static_cast<size_t>(i)]);
  return s + "]";
}

}  // namespace minfer
