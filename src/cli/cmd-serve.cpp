// `minfer serve MODEL`: the OpenAI-compatible HTTP server (docs/server-api.md) with --parallel
// slots decoded together (continuous batching). Runs until SIGTERM/SIGINT, then drains.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>

#include "cli/commands.h"
#include "cli/load-model.h"
#include "cli/notice.h"
#include "cli/options.h"
#include "cli/spec-options.h"
#include "core/thread-pool.h"
#include "models/model.h"
#include "server/http-server.h"
#include "tokenizer/tokenizer.h"

namespace minfer::cli {

int cmd_serve(int argc, char** argv) {
  CLI::App app{"Serve MODEL over an OpenAI-compatible HTTP API (docs/server-api.md)", "minfer serve"};
  set_usage(app, "minfer serve MODEL [OPTIONS]   (or -m MODEL, -hf ORG/REPO[:QUANT])");
  std::string model_pos, model_opt, hf_repo;
  server::ServerParams sp;
  server::EngineParams ep;
  ContextOptions co;
  co.n_ctx = 2048;
  LogOptions lo;
  TemplateOptions to;
  double max_body_mb = 8;
  SpecOptions spo;
  app.add_option("MODEL", model_pos, "GGUF path, a cached model name, hf:ORG/REPO[:QUANT] or ollama:MODEL[:TAG]");
  app.add_option("-m,--model", model_opt, "the model, as MODEL");
  app.add_option("--hf-repo", hf_repo, "(-hf) ORG/REPO[:QUANT]: the model from Hugging Face, as MODEL hf:ORG/REPO[:QUANT]");
  app.add_option("--host", sp.host, "address to listen on")->capture_default_str();
  app.add_option("--port", sp.port, "TCP port")->capture_default_str()->check(CLI::Range(1, 65535));
  app.add_option("--parallel", ep.n_slots, "(-np) slots: requests generated together in one batch")
      ->capture_default_str()->check(CLI::Range(1, 256));
  add_context_options(app, co, "context size (KV positions) of each slot, capped at the model's; 0 = the model's");
  add_log_options(app, lo, "more on stderr");
  add_template_options(app, to);
  app.add_option("--api-key", sp.api_key, "require 'Authorization: Bearer KEY' (all but /health)");
  app.add_option("-a,--alias", sp.alias, "model id reported to clients (default: the file name without .gguf)");
  app.add_option("--queue", ep.max_queue, "requests waiting for a slot before 503 + Retry-After")
      ->capture_default_str()->check(CLI::Range(0, 1 << 16));
  app.add_option("--max-body-mb", max_body_mb, "largest request body (413 above)")->capture_default_str()->check(CLI::Range(0.001, 1024.0));
  app.add_option("-n,--n-predict,--predict", sp.default_n_predict, "max_tokens of requests without one (-1: until end or context full)")
      ->capture_default_str()->check(CLI::Range(-1, 1 << 24));
  app.add_option("--timeout", sp.timeout_s, "(-to) seconds: connection read/write timeout and longest generation")
      ->capture_default_str()->check(CLI::Range(1, 86400));
  app.add_option("--drain-timeout", sp.drain_timeout_s,
                 "seconds: on SIGTERM, how long in-flight requests may finish before they are ended (a second signal exits at once)")
      ->capture_default_str()->check(CLI::Range(0.0, 86400.0));
  app.add_option("--queue-timeout", ep.queue_timeout_s, "seconds a request may wait for a slot before it fails (0: no limit)")
      ->capture_default_str()->check(CLI::Range(0.0, 86400.0));
  app.add_option("--watchdog", ep.watchdog_s, "seconds without a finished step, while there is work, before /health says 503")
      ->capture_default_str()->check(CLI::Range(1.0, 86400.0));
  bool cont_batching = true;
  app.add_flag("--cont-batching", cont_batching, "(-cb) accepted: slots are always decoded together")->group("llama.cpp compatibility");
  add_spec_options(app, spo);
  if (auto rc = parse_command_line(app, argc, argv)) return *rc;
  set_quiet(lo.quiet);
  if (!model_opt.empty() + !hf_repo.empty() + !model_pos.empty() != 1)
    return usage_fail("serve", "give the model once: MODEL, -m MODEL or -hf ORG/REPO");
  const std::string model = !model_opt.empty() ? model_opt : !hf_repo.empty() ? "hf:" + hf_repo : model_pos;
  auto kv = co.kv.dtype();
  if (!kv) return usage_fail("serve", kv.error().message);
  if (Status st = check_spec_options(spo); !st) return usage_fail("serve", st.error().message);
  std::string template_label;
  auto tmpl = to.source(&template_label);
  if (!tmpl) return fail("serve", tmpl.error().message);
  sp.chat_template = *tmpl;
  if (!sp.chat_template.empty()) info("[server] chat template: " + template_label);
  const std::string path = resolve_model(model);
  if (path.empty()) return 1;
  co.compat.warn(co.n_threads);
  LoadProgress progress(path);
  auto m = Model::load(path);
  if (!m) {
    progress.abandon();
    return fail("serve", m.error().message);
  }
  auto tok = Tokenizer::from_gguf((*m)->file());
  if (!tok) {
    progress.abandon();
    return fail("serve", tok.error().message);
  }
  progress.done();
  co.compat.mlock();
  if (sp.alias.empty()) {
    sp.alias = std::filesystem::path(path).filename().string();
    if (sp.alias.ends_with(".gguf")) sp.alias.resize(sp.alias.size() - 5);
  }
  ep.n_ctx_slot = context_for_model(co.n_ctx, (*m)->hparams().n_ctx_train);
  ep.n_batch = co.n_batch;
  ep.n_threads = co.n_threads;
  ep.kv_type = *kv;
  ep.swa_full = co.swa_full;
  sp.max_body = static_cast<size_t>(max_body_mb * 1024 * 1024);
  server::EngineDraft draft;
  std::optional<LoadedDraft> loaded;
  if (spo.on()) {
    sp.spec = spo.p;
    sp.spec->model = !spo.draft.empty();
  }
  if (!spo.draft.empty()) {
    auto d = load_draft(spo.draft, *tok);
    if (!d) {
      std::fprintf(stderr, "minfer: %s\n", d.error().message.c_str());
      return 1;
    }
    loaded = std::move(*d);
    draft = {loaded->model, &*loaded->tok};
    std::fprintf(stderr, "[spec] draft model %s, up to %d tokens%s%s\n", loaded->name.c_str(), spo.p.n_max,
                 spo.p.adaptive ? " (adaptive)" : "", spo.p.ngram ? " + n-gram" : "");
  } else if (spo.p.ngram) {
    std::fprintf(stderr, "[spec] n-gram drafting, up to %d tokens%s\n", spo.p.n_max, spo.p.adaptive ? " (adaptive)" : "");
  }
  return server::run_server(*m, *tok, ep, sp, draft);
}

}  // namespace minfer::cli
