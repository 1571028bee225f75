// `minfer serve MODEL`: the OpenAI-compatible HTTP server (docs/server-api.md) with --parallel
// slots decoded together (continuous batching). Runs until SIGTERM/SIGINT, then drains.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "cli/commands.h"
#include "cli/context-options.h"
#include "cli/spec-options.h"
#include "core/thread-pool.h"
#include "models/model.h"
#include "server/http-server.h"
#include "template/chat.h"
#include "template/template.h"
#include "tokenizer/tokenizer.h"

namespace minfer::cli {

int cmd_serve(int argc, char** argv) {
  CLI::App app{"Serve MODEL over an OpenAI-compatible HTTP API (docs/server-api.md)", "minfer serve"};
  std::string model, kv = "f16";
  bool swa_full = false;
  server::ServerParams sp;
  server::EngineParams ep;
  int n_ctx = 2048;
  double max_body_mb = 8;
  SpecOptions spo;
  app.add_option("MODEL", model, "GGUF path or the name of a model in the cache")->required();
  app.add_option("--host", sp.host, "address to listen on")->capture_default_str();
  app.add_option("--port", sp.port, "TCP port")->capture_default_str()->check(CLI::Range(1, 65535));
  app.add_option("--parallel", ep.n_slots, "slots: requests generated together in one batch")
      ->capture_default_str()->check(CLI::Range(1, 256));
  app.add_option("-c,--ctx-size", n_ctx, "context size (KV positions) of each slot, capped at the model's")
      ->capture_default_str()->check(CLI::Range(8, 1 << 24));
  app.add_option("--api-key", sp.api_key, "require 'Authorization: Bearer KEY' (all but /health)");
  app.add_option("--alias", sp.alias, "model id reported to clients (default: the file name without .gguf)");
  app.add_option("-t,--threads", ep.n_threads, "compute threads (default: all)")->check(CLI::Range(0, 1024));
  app.add_option("-b,--batch-size", ep.n_batch, "most prompt tokens of one slot per step")
      ->capture_default_str()->check(CLI::Range(1, 1 << 20));
  app.add_option("--queue", ep.max_queue, "requests waiting for a slot before 503 + Retry-After")
      ->capture_default_str()->check(CLI::Range(0, 1 << 16));
  app.add_option("--kv-type", kv, "KV cache element type")->capture_default_str()->check(CLI::IsMember({"f16", "f32"}));
  add_swa_full_flag(app, swa_full);
  app.add_option("--max-body-mb", max_body_mb, "largest request body (413 above)")->capture_default_str()->check(CLI::Range(0.001, 1024.0));
  app.add_option("-n,--n-predict", sp.default_n_predict, "max_tokens of requests without one (-1: until end or context full)")
      ->capture_default_str()->check(CLI::Range(-1, 1 << 24));
  app.add_option("--timeout", sp.timeout_s, "seconds: connection read/write timeout and longest generation")
      ->capture_default_str()->check(CLI::Range(1, 86400));
  app.add_option("--drain-timeout", sp.drain_timeout_s,
                 "seconds: on SIGTERM, how long in-flight requests may finish before they are ended (a second signal exits at once)")
      ->capture_default_str()->check(CLI::Range(0.0, 86400.0));
  app.add_option("--queue-timeout", ep.queue_timeout_s, "seconds a request may wait for a slot before it fails (0: no limit)")
      ->capture_default_str()->check(CLI::Range(0.0, 86400.0));
  app.add_option("--watchdog", ep.watchdog_s, "seconds without a finished step, while there is work, before /health says 503")
      ->capture_default_str()->check(CLI::Range(1.0, 86400.0));
  std::string template_file;
  app.add_option("--chat-template", sp.chat_template,
                 "Jinja chat template to use instead of the model's, or a built-in one by name ('chatml' for ChatML, "
                 "'gemma' for Gemma's turn format)");
  app.add_option("--chat-template-file", template_file, "file with the Jinja chat template to use instead of the model's")
      ->excludes(app.get_option("--chat-template"));
  add_spec_options(app, spo);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  if (!template_file.empty()) {
    std::ifstream in(template_file, std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "minfer: --chat-template-file: cannot read '%s'\n", template_file.c_str());
      return 1;
    }
    sp.chat_template.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    if (sp.chat_template.empty()) {
      std::fprintf(stderr, "minfer: --chat-template-file: '%s' is empty\n", template_file.c_str());
      return 1;
    }
  }
  if (const jinja::BuiltinTemplate* b = template_file.empty() ? jinja::find_builtin_template(sp.chat_template) : nullptr) {
    std::fprintf(stderr, "[server] chat template: the built-in %.*s template (--chat-template %.*s)\n",
                 static_cast<int>(b->title.size()), b->title.data(), static_cast<int>(b->name.size()), b->name.data());
    sp.chat_template = b->source;
  } else if (!sp.chat_template.empty() && sp.chat_template.find('{') == std::string::npos) {
    std::fprintf(stderr, "minfer: --chat-template '%s' is neither Jinja text nor a built-in name (%s)\n", sp.chat_template.c_str(),
                 jinja::builtin_template_names().c_str());
    return 1;
  }
  if (!sp.chat_template.empty()) {
    if (auto t = jinja::Template::parse(sp.chat_template); !t) {
      std::fprintf(stderr, "minfer: chat template: %s\n", t.error().message.c_str());
      return 1;
    }
  }
  const std::string path = resolve_model(model);
  if (path.empty()) return 1;
  auto m = Model::load(path);
  if (!m) {
    std::fprintf(stderr, "minfer: %s\n", m.error().message.c_str());
    return 1;
  }
  auto tok = Tokenizer::from_gguf((*m)->file());
  if (!tok) {
    std::fprintf(stderr, "minfer: %s\n", tok.error().message.c_str());
    return 1;
  }
  if (sp.alias.empty()) {
    sp.alias = std::filesystem::path(path).filename().string();
    if (sp.alias.ends_with(".gguf")) sp.alias.resize(sp.alias.size() - 5);
  }
  const int64_t n_train = (*m)->hparams().n_ctx_train;
  ep.n_ctx_slot = n_train > 0 ? static_cast<int>(std::min<int64_t>(n_ctx, n_train)) : n_ctx;
  ep.kv_type = kv == "f32" ? DType::F32 : DType::F16;
  ep.swa_full = swa_full;
  sp.max_body = static_cast<size_t>(max_body_mb * 1024 * 1024);
  server::EngineDraft draft;
  std::optional<LoadedDraft> loaded;
  if (Status st = check_spec_options(spo); !st) {
    std::fprintf(stderr, "minfer: %s\n", st.error().message.c_str());
    return 1;
  }
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
