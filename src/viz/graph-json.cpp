#include "viz/graph-json.h"

#include "graph/export.h"
#include "graph/scheduler.h"
#include "models/model.h"

namespace minfer::viz {

Expected<std::string> session_graph_json(Session& s, int n_tokens, int n_out) {
  auto pg = s.graph(n_tokens, n_out);
  if (!pg) return pg.error();
  const ModelHparams& hp = s.model().hparams();
  GraphExportInfo info;
  info.model = hp.name;
  info.arch = hp.arch;
  info.kind = n_tokens > 1 ? "prefill" : "decode";
  info.params = {{"n_tokens", std::to_string(n_tokens)},
                 {"n_out", std::to_string(n_out)},
                 {"n_ctx", std::to_string(s.n_ctx())},
                 {"n_batch", std::to_string(s.n_batch())},
                 {"kv_type", fmt::format("\"{}\"", kv_type_name(s.params().kv_type))},
                 {"fuse", s.params().fuse ? "true" : "false"}};
  return graph_to_json((*pg)->graph, &(*pg)->plan, s.backend_names(), info);
}

}  // namespace minfer::viz
