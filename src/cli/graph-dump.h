// --dump-graph / --dump-graph-json for commands that hold a Session: writes the prepared graph
// (backends assigned, fused, memory planned) of a batch shape as DOT and/or JSON.
#pragma once

#include <string>

#include "core/status.h"
#include "models/model.h"
#include "runtime/session.h"

namespace minfer::cli {

Status dump_graphs(Session& s, int n_tokens, int n_out, const std::string& dot_path,
                   const std::string& json_path);

}  // namespace minfer::cli
