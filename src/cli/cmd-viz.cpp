// `minfer viz MODEL [--host H] [--port N] [-c N] [-t N]`: the compute graph in the browser
// (docs/viz.md); `minfer viz --graph FILE.json` shows an export without a model.
#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/options.h"
#include "viz/viz-server.h"

namespace minfer::cli {

int cmd_viz(int argc, char** argv) {
  CLI::App app{"Serve the compute graph of MODEL in the browser, live while it generates", "minfer viz"};
  std::string model;
  viz::VizOptions o;
  app.add_option("MODEL", model, "a path, a cached name, hf:ORG/REPO[:QUANT] or ollama:MODEL[:TAG]");
  app.add_option("--graph", o.graph_file, "show this graph export (--dump-graph-json) instead of a model; nothing runs");
  app.add_option("--host", o.host, "address to listen on")->capture_default_str();
  app.add_option("--port", o.port, "port")->capture_default_str()->check(CLI::Range(0, 65535));
  add_ctx_size(app, o.n_ctx, "context size (at least 16), capped at the model's; 0 = the model's");
  add_threads(app, o.n_threads);
  OffloadOptions offload;
  add_offload_options(app, offload);
  if (auto rc = parse_command_line(app, argc, argv)) return *rc;
  auto off = offload.resolve();
  if (!off) return fail("viz", off.error().message);
  o.offload = *off;
  if (o.n_ctx != 0 && o.n_ctx < 16) return usage_fail("viz", "-c: the context needs at least 16 positions");
  if (model.empty() == o.graph_file.empty()) return usage_fail("viz", "give a MODEL or --graph FILE.json (one of them)");
  if (model.empty()) return viz::run_viz_server("", o);
  const std::string path = resolve_model(model);
  if (path.empty()) return 1;
  return viz::run_viz_server(path, o);
}

}  // namespace minfer::cli
