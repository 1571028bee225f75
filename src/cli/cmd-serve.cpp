// `minfer serve MODEL`: the OpenAI-compatible HTTP server (docs/server-api.md) with --parallel
// slots decoded together (continuous batching). Runs until SIGTERM/SIGINT, then drains.
#include <CLI/CLI.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <vector>
#include <string>

#include "cli/commands.h"
#include "cli/load-model.h"
#include "cli/notice.h"
#include "cli/options.h"
#include "cli/serve-store.h"
#include "cli/sampling-options.h"
#include "cli/spec-options.h"
#include "core/thread-pool.h"
#include "hub/model-ref.h"
#include "models/model.h"
#include "server/http-server.h"
#include "tokenizer/tokenizer.h"

namespace minfer::cli {

namespace {

std::vector<std::string> split_list(const std::vector<std::string>& items) {
  std::vector<std::string> out;
  for (const std::string& item : items) {
    size_t start = 0;
    for (size_t i = 0; i <= item.size(); ++i)
      if (i == item.size() || item[i] == ',') {
        if (i > start) out.push_back(item.substr(start, i - start));
        start = i + 1;
      }
  }
  return out;
}

}  // namespace

int cmd_serve(int argc, char** argv) {
  CLI::App app{"Serve MODEL over an HTTP API: OpenAI's, llama-server's and Anthropic's (docs/server-api.md)", "minfer serve"};
  set_usage(app, "minfer serve [MODEL...] [OPTIONS]   (one MODEL, -m MODEL or -hf ORG/REPO[:QUANT]; several, or none: every "
                 "model `minfer list` shows, each loaded on its first request; llama-server's flags work)");
  std::string model_opt, hf_repo, hf_file, api_key_file, models_dir;
  std::vector<std::string> models_pos;
  int models_max = 4;
  std::string models_memory;
  std::vector<std::string> api_keys, aliases, tags;
  server::ServerParams sp;
  server::EngineParams ep;
  ContextOptions co;
  LogOptions lo;
  TemplateOptions to;
  SamplingOptions so;
  double max_body_mb = 8;
  SpecOptions spo;
  bool embeddings_flag = false;
  std::string pooling_name;
  bool no_slots = false, slots = false, no_webui = false, no_jinja = false, cont_batching = true, no_context_shift = false;
  bool kv_unified = false, offline = false, no_cache_prompt = false;
  std::optional<int> cache_ram;
  app.add_option("MODEL", models_pos, "GGUF path, a cached model name, hf:ORG/REPO[:QUANT] or ollama:MODEL[:TAG]; several, or "
                                      "none (every model `minfer list` shows): each loaded on its first request");
  app.add_option("--models-dir", models_dir, "serve the GGUF files of this folder too (with no MODEL: only those)")->check(CLI::ExistingDirectory);
  app.add_option("--models-max", models_max, "with several models: how many are loaded at once (the least recently used idle one is "
                                             "unloaded for another; 0: no limit)")->capture_default_str()->check(CLI::Range(0, 1024));
  app.add_option("--models-memory", models_memory, "with several models: the memory their weights and KV caches may hold at once, "
                                                   "e.g. 12G, 1536M (binary units; the least recently used idle one is unloaded for another)");
  app.add_option("-m,--model", model_opt, "the model, as MODEL");
  app.add_option("--hf-repo", hf_repo, "(-hf) ORG/REPO[:QUANT]: the model from Hugging Face, as MODEL hf:ORG/REPO[:QUANT]");
  app.add_option("--hf-file", hf_file, "(-hff) with -hf: the file in the repository");
  app.add_option("--host", sp.host, "address to listen on")->capture_default_str();
  app.add_option("--port", sp.port, "TCP port")->capture_default_str()->check(CLI::Range(1, 65535));
  app.add_option("--parallel", ep.n_slots, "(-np) slots: requests generated together in one batch")
      ->capture_default_str()->check(CLI::Range(1, 256));
  add_context_options(app, co, "context size (KV positions) of all slots together, as llama-server's -c: each slot gets -c / -np, "
                               "capped at the model's; 0 = the model's");
  add_log_options(app, lo, "a line per request on stderr, and replies carry \"__verbose\" (the prompt)");
  add_template_options(app, to);
  so.s.n_predict = sp.default_n_predict;  // -n: max_tokens of requests without one
  add_sampling_options(app, so, FieldSet::kSamplerAndLength);
  app.add_option("--api-key", api_keys, "require this key (Authorization: Bearer KEY or X-Api-Key) on every path but /health "
                                        "and the chat page; comma-separated or repeated for several");
  app.add_option("--api-key-file", api_key_file, "a file with one API key per line");
  app.add_option("-a,--alias", aliases, "the model names clients may use, comma-separated (default: the file name without "
                                        ".gguf); the id is the first in sorted order");
  app.add_option("--tags", tags, "tags listed with the model in /models, comma-separated");
  app.add_option("--queue", ep.max_queue, "requests waiting for a slot before 503 + Retry-After")
      ->capture_default_str()->check(CLI::Range(0, 1 << 16));
  app.add_option("--max-body-mb", max_body_mb, "largest request body (413 above)")->capture_default_str()->check(CLI::Range(0.001, 1024.0));
  app.add_option("--timeout", sp.timeout_s, "(-to) seconds: connection read/write timeout and longest generation")
      ->capture_default_str()->check(CLI::Range(1, 86400));
  app.add_option("--drain-timeout", sp.drain_timeout_s,
                 "seconds: on SIGTERM, how long in-flight requests may finish before they are ended (a second signal exits at once)")
      ->capture_default_str()->check(CLI::Range(0.0, 86400.0));
  app.add_option("--queue-timeout", ep.queue_timeout_s, "seconds a request may wait for a slot before it fails (0: no limit)")
      ->capture_default_str()->check(CLI::Range(0.0, 86400.0));
  app.add_option("--watchdog", ep.watchdog_s, "seconds without a finished step, while there is work, before /health says 503")
      ->capture_default_str()->check(CLI::Range(1.0, 86400.0));
  app.add_option("--threads-http", sp.n_http_threads, "HTTP threads (0: slots + queue + 64)")->check(CLI::Range(0, 4096));
  const char* e = "Endpoints";
  app.add_flag("--slots", slots, "GET /slots (the default)")->group(e);
  app.add_flag("--no-slots", no_slots, "GET /slots answers 501")->group(e);
  app.add_flag("--metrics", sp.endpoint_metrics, "GET /metrics: Prometheus text (llamacpp: and minfer_ names)")->group(e);
  app.add_flag("--props", sp.endpoint_props, "POST /props")->group(e);
  app.add_flag("--no-webui,--no-ui", no_webui, "no chat page at /")->group(e);
  app.add_option("--cors-origins", sp.cors_origins, "CORS: * (any origin; the default), localhost, or one origin")->group(e);
  app.add_option("--reasoning-format", sp.reasoning_format,
                 "where a reply's <think> block goes: auto or deepseek (reasoning_content, Anthropic thinking blocks), "
                 "none (left in content)")
      ->check(CLI::IsMember({"auto", "deepseek", "deepseek-legacy", "none"}))->capture_default_str()->group(e);
  app.add_option("--reasoning", sp.reasoning, "(-rea) thinking of templates that have it: on, off (enable_thinking false, "
                                              "a forced <think> closed), auto (as llama-server: enable_thinking true)")
      ->check(CLI::IsMember({"on", "off", "auto"}))->capture_default_str()->group(e);
  const char* em = "Embeddings (/v1/embeddings, /embeddings)";
  app.add_flag("--embedding,--embeddings", embeddings_flag,
               "accepted: embeddings are always served, beside completions")->group(em);
  app.add_option("--pooling", pooling_name, "how an input's token rows become one vector: last, mean, cls, none "
                                            "(default: the GGUF's pooling_type, else last)")
      ->check(CLI::IsMember({"none", "mean", "cls", "last", "rank"}))->group(em);
  app.add_option("--slot-save-path", sp.slot_save_path, "folder of slot files (POST /slots/ID?action=save|restore)")
      ->check(CLI::ExistingDirectory);
  app.add_flag("--spm-infill", sp.spm_infill, "/infill: the suffix before the prefix (models trained that way)");
  const char* g = "llama.cpp compatibility";
  app.add_flag("--cont-batching", cont_batching, "(-cb) accepted: slots are always decoded together")->group(g);
  app.add_flag("--no-jinja", no_jinja, "accepted with a warning: templates are always rendered by minfer's Jinja engine")->group(g);
  app.add_flag("--context-shift", ep.context_shift, "a generation that fills its slot drops the oldest positions after the request's "
                                                     "n_keep (half of them, or n_discard) and goes on")->group(g);
  app.add_flag("--no-context-shift", no_context_shift, "a generation that fills its slot ends with finish_reason length (the default)")->group(g);
  app.add_flag("--kv-unified", kv_unified, "accepted with a warning: each slot has its own cache of -c / -np positions")->group(g);
  app.add_option("--cache-ram", cache_ram, "accepted with a warning: prompt caches live in the slots' KV caches here")->group(g);
  app.add_option("--sleep-idle-seconds", sp.sleep_idle_s, "unload the model after this many seconds without a request that needs it; "
                                                          "the next one loads it again (0 or -1: never)")
      ->capture_default_str()->check(CLI::Range(-1.0, 1e9))->group(g);
  app.add_flag("--no-cache-prompt", no_cache_prompt, "requests reuse no slot's cached prefix unless they ask (cache_prompt)")->group(g);
  app.add_flag("--offline", offline, "never download: MODEL must be cached (as HF_HUB_OFFLINE=1)")->group(g);
  add_spec_options(app, spo);
  if (auto rc = parse_command_line(app, argc, argv)) return *rc;
  set_quiet(lo.quiet);
  sp.verbose = lo.verbose;
  if (!model_opt.empty() + !hf_repo.empty() + !models_pos.empty() > 1)
    return usage_fail("serve", "give the models one way: MODEL..., -m MODEL or -hf ORG/REPO");
  if (!hf_file.empty() && hf_repo.empty()) return usage_fail("serve", "--hf-file needs -hf ORG/REPO");
  if (slots && no_slots) return usage_fail("serve", "--slots and --no-slots: give one");
  if (ep.context_shift && no_context_shift) return usage_fail("serve", "--context-shift and --no-context-shift: give one");
  if (pooling_name == "rank")
    return usage_fail("serve", "--pooling rank: reranking models (/rerank) are not supported yet; use none, mean, cls or last");
  if (!model_opt.empty()) models_pos = {model_opt};
  if (!hf_repo.empty()) models_pos = {"hf:" + hf_repo + (hf_file.empty() ? "" : ":" + hf_file)};
  const bool pooled = models_pos.size() != 1 || !models_dir.empty();
  if (pooled && !spo.draft.empty()) return usage_fail("serve", "--model-draft works with one MODEL (a pool's models have no draft)");
  auto kv = co.kv.dtype();
  auto offload = co.offload.resolve();
  if (!offload) return fail("serve", offload.error().message);
  if (!kv) return usage_fail("serve", kv.error().message);
  if (Status st = finish_spec_options(spo); !st) return usage_fail("serve", st.error().message);
  if (auto p = so.to_params(INT32_MAX); !p) return usage_fail("serve", p.error().message);
  sp.default_n_predict = so.s.n_predict;
  sp.sampling_given = given_fields(app);
  sp.api_keys = split_list(api_keys);
  if (!api_key_file.empty()) {
    std::ifstream in(api_key_file);
    if (!in) return fail("serve", fmt::format("--api-key-file: cannot read '{}'", api_key_file));
    for (std::string line; std::getline(in, line);) {
      while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
      if (!line.empty()) sp.api_keys.push_back(line);
    }
  }
  sp.aliases = split_list(aliases);
  sp.tags = split_list(tags);
  sp.endpoint_slots = !no_slots;
  sp.webui = !no_webui;
  if (no_jinja) warning("--no-jinja: templates are always rendered by minfer's Jinja engine (the flag changes nothing)");
  if (kv_unified) warning("--kv-unified: each slot has its own KV cache of -c / -np positions here");
  if (cache_ram) warning("--cache-ram: minfer keeps prompt caches in the slots' KV caches only; the flag changes nothing");
  std::string template_label;
  auto tmpl = to.source(&template_label);
  if (!tmpl) return fail("serve", tmpl.error().message);
  sp.chat_template = *tmpl;
  if (!sp.chat_template.empty()) info("[server] chat template: " + template_label);
  if (offline) setenv("HF_HUB_OFFLINE", "1", 1);
  // Vertex AI runs a custom container with these variables: its predict route, its health
  // route, and the port it sends requests to.
  if (const char* mode = std::getenv("AIP_MODE"); mode && std::string(mode) == "PREDICTION") {
    const char* predict = std::getenv("AIP_PREDICT_ROUTE");
    const char* health = std::getenv("AIP_HEALTH_ROUTE");
    sp.vertex_predict_route = predict && *predict ? predict : "/predict";
    if (health && *health) sp.vertex_health_route = health;
    if (const char* port = std::getenv("AIP_HTTP_PORT"); port && *port) {
      const int p = std::atoi(port);
      if (p < 1 || p > 65535) return usage_fail("serve", fmt::format("AIP_HTTP_PORT '{}' is not a TCP port (1..65535)", port));
      if (p != sp.port) warning(fmt::format("AIP_HTTP_PORT {} replaces --port {} (Vertex AI prediction mode)", p, sp.port));
      sp.port = p;
    }
    info(fmt::format("[server] Vertex AI prediction mode: POST {}{}", sp.vertex_predict_route,
                     sp.vertex_health_route.empty() ? "" : ", GET " + sp.vertex_health_route));
  }
  co.compat.warn(co.n_threads);
  ep.n_batch = co.n_batch;
  ep.n_threads = co.n_threads;
  ep.kv_type = *kv;
  ep.swa_full = co.swa_full;
  ep.offload = *offload;
  sp.max_body = static_cast<size_t>(max_body_mb * 1024 * 1024);
  sp.cache_prompt = !no_cache_prompt;
  if (spo.on()) {
    sp.spec = spo.p;
    sp.spec->model = !spo.draft.empty();
  }
  // What each model needs of its own: its tokenizer, the sampling defaults and grammar over its
  // vocabulary, its pooling, its slots' share of -c.
  auto load = [&](const std::string& path) -> Expected<server::LoadedModel> {
    LoadProgress progress(path);
    auto m = Model::load(path);
    if (!m) {
      progress.abandon();
      return m.error();
    }
    auto tok = Tokenizer::from_gguf((*m)->file());
    if (!tok) {
      progress.abandon();
      return tok.error();
    }
    progress.done();
    server::LoadedModel lm{std::move(*m), std::make_unique<Tokenizer>(std::move(*tok)), ep, sp};
    const Model& model = *lm.model;
    auto sampling = so.to_params(lm.tok->n_vocab());
    if (!sampling) return sampling.error();
    lm.sp.sampling = *sampling;
    StepParams gp;  // --grammar / --json-schema: every request's default constraint
    if (Status st = so.set_grammar(*lm.tok, gp); !st) return st.error();
    lm.sp.grammar = gp.grammar;
    lm.sp.model_path = path;
    // Pooling: --pooling, else the GGUF's {arch}.pooling_type (an embedding model's), else last.
    std::string pooling_from = "--pooling";
    if (!pooling_name.empty()) {
      lm.sp.pooling = *server::parse_pooling(pooling_name);
    } else if (auto v = model.file().get_int(model.hparams().arch + ".pooling_type"); v) {
      if (auto p = server::pooling_from_gguf(*v)) {
        lm.sp.pooling = *p;
        pooling_from = "the model's pooling_type";
      } else {  // a reranker: completions still work; embeddings say why not
        lm.sp.embeddings_refusal = fmt::format("this model's {}.pooling_type is {} (rank: a reranker, or unknown), which is not "
                                               "supported; start the server with --pooling last|mean|cls|none",
                                               model.hparams().arch, *v);
        pooling_from = "the model's pooling_type is not supported";
      }
    } else {
      pooling_from = "the default for a model without pooling_type";
    }
    if (embeddings_flag)
      info(fmt::format("[server] embeddings: pooling {} ({})", server::pooling_name(lm.sp.pooling), pooling_from));
    // llama-server's -c is the context of all slots: each gets its share (0: the model's).
    const int64_t n_train = model.hparams().n_ctx_train;
    const int64_t total = co.n_ctx > 0 ? co.n_ctx : (n_train > 0 ? n_train : 4096);
    lm.ep.n_ctx_slot = static_cast<int>(std::max<int64_t>(1, total / ep.n_slots));
    if (n_train > 0) lm.ep.n_ctx_slot = static_cast<int>(std::min<int64_t>(lm.ep.n_ctx_slot, n_train));
    return lm;
  };
  auto stem = [](const std::string& path) {
    std::string name = std::filesystem::path(path).filename().string();
    if (name.ends_with(".gguf")) name.resize(name.size() - 5);
    return name;
  };
  if (pooled) {
    if (!sp.aliases.empty()) warning("--alias: ignored with several models (each is called by its names)");
    server::PoolParams pp;
    pp.load = load;
    pp.store = hub_model_store();  // Ollama's /api/pull, /api/delete, /api/copy
    pp.models_max = models_max;
    if (!models_memory.empty()) {
      auto bytes = parse_memory_size(models_memory);
      if (!bytes) return usage_fail("serve", fmt::format("--models-memory: {}", bytes.error().message));
      pp.models_memory = *bytes;
    }
    if (sp.sleep_idle_s != 0) pp.keep_alive_s = sp.sleep_idle_s;  // the default keep_alive (-1: for good)
    for (const std::string& ref : models_pos) {
      const std::string path = resolve_model(ref);
      if (path.empty()) return 1;
      // A path is called by its file name without .gguf; a name (hf:, ollama:, cached) by itself too.
      const bool is_path = ref.ends_with(".gguf") || (ref.find('/') != std::string::npos && !ref.starts_with("hf:") && !ref.starts_with("ollama:"));
      std::vector<std::string> names{is_path ? stem(path) : ref};
      if (names.front() != stem(path)) names.push_back(stem(path));
      pp.models.push_back({std::move(names), path});
    }
    if (models_pos.empty() && models_dir.empty())
      for (const hub::ListedModel& l : hub::list_models()) pp.models.push_back(pool_model(l));
    if (!models_dir.empty()) {
      std::vector<std::string> files;
      for (const auto& f : std::filesystem::directory_iterator(models_dir))
        if (f.is_regular_file() && f.path().extension() == ".gguf") files.push_back(f.path().string());
      std::sort(files.begin(), files.end());
      for (const std::string& f : files) {
        const std::string name = stem(f);
        // A split model is served by its first part; a vision projector is not a model.
        if (name.starts_with("mmproj") || (name.find("-of-0") != std::string::npos && name.find("-00001-of-") == std::string::npos)) continue;
        pp.models.push_back({{name}, f});
      }
    }
    return server::run_pool_server(pp, sp, ep);
  }
  const std::string path = resolve_model(models_pos.front());
  if (path.empty()) return 1;
  auto lm = load(path);
  if (!lm) return fail("serve", lm.error().message);
  co.compat.mlock();
  if (lm->sp.aliases.empty()) lm->sp.aliases = {stem(path)};
  server::EngineDraft draft;
  std::optional<LoadedDraft> loaded;
  if (!spo.draft.empty()) {
    auto d = load_draft(spo.draft, *lm->tok);
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
  // The model is the server's alone: --sleep-idle-seconds frees it.
  return server::run_server(std::move(lm->model), *lm->tok, lm->ep, lm->sp, draft);
}

}  // namespace minfer::cli
