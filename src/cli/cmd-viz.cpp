// `minfer viz MODEL [--host H] [--port N] [-c N] [-t N]`: the compute graph in the browser
// (docs/viz.md).
#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "viz/viz-server.h"

namespace minfer::cli {

int cmd_viz(int argc, char** argv) {
  CLI::App app{"Serve the compute graph of MODEL in the browser, live while it generates", "minfer viz"};
  std::string model;
  viz::VizOptions o;
  app.add_option("MODEL", model, "a path, a cached name, hf:ORG/REPO[:QUANT] or ollama:MODEL[:TAG]")->required();
  app.add_option("--host", o.host, "address to listen on")->capture_default_str();
  app.add_option("--port", o.port, "port")->capture_default_str()->check(CLI::Range(0, 65535));
  app.add_option("-c,--ctx-size", o.n_ctx, "context size")->capture_default_str()->check(CLI::Range(16, 1 << 20));
  app.add_option("-t,--threads", o.n_threads, "threads (default: all)")->check(CLI::Range(0, 1024));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  const std::string path = resolve_model(model);
  if (path.empty()) return 1;
  return viz::run_viz_server(path, o);
}

}  // namespace minfer::cli
