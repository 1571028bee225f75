#include "cli/graph-dump.h"

#include <cstdio>
#include <fstream>

#include "graph/export.h"
#include "graph/scheduler.h"
#include "viz/graph-json.h"

namespace minfer::cli {
namespace {

Status write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
  f.close();
  if (!f) return make_error("cannot write '{}'", path);
  return Status::ok();
}

}  // namespace

Status dump_graphs(Session& s, int n_tokens, int n_out, const std::string& dot_path,
                   const std::string& json_path) {
  auto pg = s.graph(n_tokens, n_out);
  if (!pg) return pg.error();
  const std::vector<std::string> backends = s.backend_names();
  if (!dot_path.empty()) {
    MINFER_TRY(write_file(dot_path, graph_to_dot((*pg)->graph, &(*pg)->plan, backends)));
    std::fprintf(stderr, "graph DOT written to %s (%zu nodes)\n", dot_path.c_str(), (*pg)->graph.nodes.size());
  }
  if (!json_path.empty()) {
    auto json = viz::session_graph_json(s, n_tokens, n_out);
    if (!json) return json.error();
    MINFER_TRY(write_file(json_path, *json));
    std::fprintf(stderr, "graph JSON written to %s (%zu nodes)\n", json_path.c_str(), (*pg)->graph.nodes.size());
  }
  return Status::ok();
}

}  // namespace minfer::cli
