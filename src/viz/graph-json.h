// The prepared graph of a batch shape as the JSON of --dump-graph-json (docs/graph.md), with
// the shape parameters the session ran it under: what /viz/graph serves and traces embed.
//
//   auto prefill = session_graph_json(session, 16, 1);   // node ids as in any prefill
//   auto decode = session_graph_json(session, 1, 1);
#pragma once

#include <string>

#include "core/status.h"
#include "runtime/session.h"

namespace minfer::viz {

Expected<std::string> session_graph_json(Session& s, int n_tokens, int n_out);

}  // namespace minfer::viz
