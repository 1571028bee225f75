// Graph export: Graphviz DOT for a picture, JSON for tools and the browser view. The JSON
// format ("minfer-graph", version 1) is specified in docs/graph.md.
//
//   GraphExportInfo info{.model = "SmolLM2", .kind = "prefill", .params = {{"n_tokens", "8"}}};
//   std::string dot = graph_to_dot(pg.graph, &pg.plan, {"cpu"});
//   std::string json = graph_to_json(pg.graph, &pg.plan, {"cpu"}, info);
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "graph/graph.h"
#include "graph/planner.h"

namespace minfer {

struct GraphExportInfo {
  std::string model;  // general.name or the file name
  std::string arch;
  std::string kind;   // "prefill" (n_tokens > 1) or "decode"
  // The shape parameters of the graph: name and value as a JSON literal ("8", "\"f16\"").
  std::vector<std::pair<std::string, std::string>> params;
};

// plan may be null (no buffer information). backend_names[i] names backend index i.
std::string graph_to_dot(const Graph& g, const MemoryPlan* plan, const std::vector<std::string>& backend_names);
std::string graph_to_json(const Graph& g, const MemoryPlan* plan, const std::vector<std::string>& backend_names,
                          const GraphExportInfo& info);

}  // namespace minfer
