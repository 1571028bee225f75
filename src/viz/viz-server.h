// `minfer viz MODEL`: serves the embedded page and the visualizer's API (docs/viz.md):
//
//   GET  /, /graph.js, /operators.js, /app.js, /style.css   the page (embedded at build time)
//   GET  /viz/graph                 {"model", "prefill": graph JSON, "decode": graph JSON}
//   POST /viz/run                   {"prompt", "max_tokens", "temperature", "seed"} -> {"text",
//                                   "finish_reason", "completion_tokens"}; 400 on bad input,
//                                   409 while another run is going
//   GET  /viz/events                Server-Sent Events of the run (trace.h), "lagged" when slow
//   GET  /viz/trace?path=FILE       a MINFER_TRACE file, for the page to replay (/?trace=FILE)
//   GET  /viz/samples, /samples/N   the graph exports of --samples DIR (scripts/make-viz-samples.sh)
//
// Capture is armed only while a page listens on /viz/events: a run with nobody watching
// computes the graph as fast as the CLI does.
//
//   VizOptions o; o.port = 8081;
//   return run_viz_server(model_path, o);   // until SIGINT / SIGTERM
//   o.graph_files = {"g.json"}; run_viz_server("", o);  // exports (--dump-graph-json), no model
#pragma once

#include <string>
#include <vector>

#include "runtime/context.h"

namespace minfer::viz {

struct VizOptions {
  std::string host = "127.0.0.1";
  int port = 8081;
  int n_ctx = 2048;
  int n_threads = 0;
  Offload offload;  // -ngl, --device
  std::vector<std::string> graph_files;  // --graph: serve these exports instead of a model (nothing runs)
  std::string samples_dir;  // --samples: the graph exports the page offers as samples
};

int run_viz_server(const std::string& model_path, const VizOptions& opt);

}  // namespace minfer::viz
