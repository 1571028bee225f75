// `minfer viz MODEL [--host H] [--port N] [-c N] [-t N]`: the compute graph in the browser
// (docs/viz.md); `minfer viz --graph FILE.json [--graph DECODE.json]` shows exports without a model.
#include <CLI/CLI.hpp>

#include <cstdlib>
#include <filesystem>

#include "cli/commands.h"
#include "cli/options.h"
#include "viz/viz-server.h"

namespace minfer::cli {

int cmd_viz(int argc, char** argv) {
  CLI::App app{"Serve the compute graph of MODEL in the browser, live while it generates", "minfer viz"};
  std::string model;
  viz::VizOptions o;
  app.add_option("MODEL", model, "a path, a cached name, hf:ORG/REPO[:QUANT] or ollama:MODEL[:TAG]");
  app.add_option("--graph", o.graph_files, "show this graph export (--dump-graph-json) instead of a model; nothing runs; "
                 "give it twice for a prefill and a decode export (minfer logits MODEL --tokens 1 --dump-graph-json)")
      ->allow_extra_args(false);  // one value per --graph: `--graph g.json MODEL` leaves MODEL positional
  // Samples: $MINFER_VIZ_DIR/samples, else those the build made beside the binary (BUILD/bin/minfer:
  // BUILD/viz-samples) or installed with it (PREFIX/bin/minfer: PREFIX/share/minfer/viz-samples).
  std::error_code ec;
  const auto prefix = std::filesystem::read_symlink("/proc/self/exe", ec).parent_path().parent_path();
  if (const char* d = std::getenv("MINFER_VIZ_DIR")) o.samples_dir = std::string(d) + "/samples";
  else if (!ec)
    for (const auto& dir : {prefix / "viz-samples", prefix / "share/minfer/viz-samples"})
      if (std::filesystem::is_directory(dir, ec)) { o.samples_dir = dir.string(); break; }
  app.add_option("--samples", o.samples_dir, "folder of graph exports the page offers as samples (scripts/make-viz-samples.sh; "
                 "default $MINFER_VIZ_DIR/samples, else BUILD/viz-samples or PREFIX/share/minfer/viz-samples)");
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
  if (model.empty() == o.graph_files.empty()) return usage_fail("viz", "give a MODEL or --graph FILE.json (one of them)");
  if (model.empty()) return viz::run_viz_server("", o);
  const std::string path = resolve_model(model);
  if (path.empty()) return 1;
  return viz::run_viz_server(path, o);
}

}  // namespace minfer::cli
