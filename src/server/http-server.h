// The HTTP server over the batching Engine: OpenAI's API, llama-server's native endpoints and
// Anthropic's Messages API (docs/server-api.md), with llama-server's flags and defaults.
//
//   ServerParams sp; sp.port = 8080; sp.aliases = {"smollm2"};
//   return run_server(model, tok, {.n_slots = 4, .n_ctx_slot = 2048}, sp);  // until SIGTERM
//   return run_pool_server({.models = {{{"smollm2"}, path}}, .load = load, .models_max = 2}, sp, ep);
//
// SIGTERM or SIGINT: stop accepting connections, let in-flight requests finish for up to
// drain_timeout_s seconds, then end the rest with an error event and exit 0. A second signal
// exits at once (128 + signal). Connections beyond the HTTP threads wait in a bounded queue;
// past it, accepting pauses (the kernel's listen backlog holds the rest).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "grammar/gbnf.h"
#include "models/model.h"
#include "sampling/params.h"
#include "server/embedding.h"
#include "server/engine.h"
#include "tokenizer/tokenizer.h"

namespace minfer::server {

struct ServerParams {
  std::string host = "127.0.0.1";
  int port = 8080;
  std::vector<std::string> api_keys;  // empty: no authentication (Authorization: Bearer KEY or X-Api-Key)
  std::vector<std::string> aliases;   // model names clients may use; the id is the first in sorted order
  std::vector<std::string> tags;      // llama-server's --tags, listed in /models
  std::string model_path;             // for /props and /models
  size_t max_body = 8u << 20;         // request bodies above this get 413
  int timeout_s = 600;                // read/write timeout of a connection, and the longest a generation runs
  int n_http_threads = 0;             // connections served at once; 0: slots + queue + 64
  int default_n_predict = -1;         // max_tokens of requests that give none
  double drain_timeout_s = 30;        // SIGTERM: how long in-flight requests may still run
  int max_pending_connections = 64;   // accepted connections waiting for an HTTP thread
  std::optional<SpecParams> spec;     // speculative decoding of requests that do not say (nullopt: off)
  std::string chat_template;          // Jinja source used instead of the model's template (empty: the model's)
  SamplerParams sampling;             // a request's sampling defaults (serve's --temp, --seed, --top-k ...)
  std::set<std::string> sampling_given;  // the field keys (sampling/fields.h) serve's command line set
  // Endpoints llama-server turns on and off: /slots (on unless --no-slots), /metrics (--metrics),
  // POST /props (--props), the chat page at / (on unless --no-webui).
  bool endpoint_slots = true, endpoint_metrics = false, endpoint_props = false, webui = true;
  // CORS: "*" (any origin; with credentials the request's Origin is echoed), "localhost" (only
  // localhost origins are echoed), or one origin.
  std::string cors_origins = "*";
  bool cors_credentials = true;
  // Reasoning (<think> ...): reasoning_format "auto"/"deepseek" puts it in reasoning_content,
  // "none" leaves it in content; reasoning "on"/"off"/"auto" turns a template's thinking on or
  // off (enable_thinking, a prompt that opens <think>).
  std::string reasoning_format = "auto";
  std::string reasoning = "auto";
  bool cache_prompt = true;  // a request's cache_prompt default (--no-cache-prompt: false)
  bool verbose = false;      // -v: replies carry "__verbose" {prompt, n_prompt_tokens} (llama-server's debug field)
  // Embeddings (/v1/embeddings, /embeddings): how a prompt's rows become one vector
  // (embedding.h; serve resolves --pooling, the GGUF's {arch}.pooling_type, else last).
  Pooling pooling = Pooling::kLast;
  std::string embeddings_refusal;  // non-empty: embedding requests get this 400 (a GGUF pooling we lack)
  bool spm_infill = false;  // /infill: suffix before prefix (--spm-infill)
  std::shared_ptr<const Grammar> grammar;  // --grammar(-file) / --json-schema(-file): the output of requests
                                           // without grammar, json_schema, response_format or tools
  std::string slot_save_path;  // POST /slots/ID?action=save|restore: their folder ("" : 501)
  // Vertex AI's custom-container protocol (serve reads AIP_MODE=PREDICTION, AIP_PREDICT_ROUTE,
  // AIP_HEALTH_ROUTE): POST vertex_predict_route runs {"instances": [...]} through the other
  // POST routes ("" : off); vertex_health_route is one more GET path of /health ("" : none).
  std::string vertex_predict_route, vertex_health_route;
  double sleep_idle_s = 0;  // --sleep-idle-seconds: unload the model after this long unused (0: never; model-sleep.h)
};

// Blocks until SIGTERM/SIGINT (then drains). Returns the process exit code.
int run_server(std::shared_ptr<const Model> model, const Tokenizer& tok, const EngineParams& ep, const ServerParams& sp,
               const EngineDraft& draft = {});

// Many models in one server (model-pool.h): each loaded on its first request by `load`, kept per
// keep_alive, at most models_max at once and within models_memory bytes (the least recently used
// idle one evicted).
struct PoolModel {
  std::vector<std::string> names;  // what requests may call it; names[0] is its id in the lists
  std::string path;
};
struct LoadedModel {  // what serve sets up per model
  std::shared_ptr<const Model> model;
  std::unique_ptr<Tokenizer> tok;
  EngineParams ep;  // n_ctx_slot: the model's share of -c
  ServerParams sp;  // model_path, sampling (its vocabulary), grammar, pooling set for it
};
// The model store behind Ollama's /api/pull, /api/delete and /api/copy in a pool (serve fills it
// from src/hub, the code of `minfer download`, `rm`; routes-ollama-store.cpp serves it). Errors
// name the model and why.
struct ModelStore {
  // A pull's progress in Ollama's terms: a status ("pulling manifest" ...), and for a file its
  // digest, total and completed bytes (digest "" for a status alone). False stops the pull.
  using Progress = std::function<bool(const std::string& status, const std::string& digest, int64_t total, int64_t completed)>;
  std::function<Expected<PoolModel>(const std::string& name, const Progress& progress)> pull;  // name as Ollama's clients send it
  std::function<Status(const PoolModel& model)> remove;                                         // its files
  std::function<Expected<PoolModel>(const PoolModel& source, const std::string& destination)> copy;
  std::function<std::optional<std::string>(const std::string& name)> check_name;  // why it cannot name a model (nullopt: it can)
};
struct PoolParams {
  std::vector<PoolModel> models;
  std::function<Expected<LoadedModel>(const std::string& path)> load;
  ModelStore store;          // empty members: those endpoints answer 501
  int models_max = 4;        // --models-max (0: no limit)
  uint64_t models_memory = 0;  // --models-memory: bytes for the loaded models' weights and KV caches (0: no limit)
  double keep_alive_s = 300;  // a request's keep_alive when it gives none (negative: for good)
};
// As run_server, with every model of pp; sp's server-wide fields (host, port, keys, CORS,
// timeouts, endpoints) hold for all.
int run_pool_server(const PoolParams& pp, const ServerParams& sp, const EngineParams& ep);

}  // namespace minfer::server
