#include "server/http-server.h"

#include <httplib.h>
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <ctime>
#include <deque>
#include <mutex>
#include <regex>
#include <set>
#include <thread>

#include <fmt/ranges.h>

#include "http/errors.h"
#include "http/listener.h"
#include "runtime/chat-prompt.h"
#include "server/api-anthropic.h"
#include "server/api-ollama.h"
#include "server/model-pool.h"
#include "server/server-state.h"

namespace minfer::server {
namespace {

// httplib's TaskQueue with a bounded backlog: when every thread is busy and max_pending
// connections wait, enqueue() blocks the accepting thread (back-pressure) instead of growing
// a queue without limit.
class BoundedTaskQueue final : public httplib::TaskQueue {
 public:
  BoundedTaskQueue(size_t n_threads, size_t max_pending) : max_pending_(std::max<size_t>(1, max_pending)) {
    for (size_t i = 0; i < n_threads; ++i) threads_.emplace_back([this] { work(); });
  }
  ~BoundedTaskQueue() override { shutdown(); }
  void enqueue(std::function<void()> fn) override {
    std::unique_lock<std::mutex> lk(mu_);
    room_.wait(lk, [&] { return pending_.size() < max_pending_ || stop_; });
    pending_.push_back(std::move(fn));
    ready_.notify_one();
  }
  void shutdown() override {
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (stop_ && threads_.empty()) return;
      stop_ = true;
    }
    ready_.notify_all();
    room_.notify_all();
    for (auto& t : threads_) t.join();
    threads_.clear();
  }

 private:
  void work() {
    for (;;) {
      std::function<void()> fn;
      {
        std::unique_lock<std::mutex> lk(mu_);
        ready_.wait(lk, [&] { return !pending_.empty() || stop_; });
        if (pending_.empty()) return;  // stopping, nothing left
        fn = std::move(pending_.front());
        pending_.pop_front();
      }
      room_.notify_one();
      fn();
    }
  }
  const size_t max_pending_;
  std::mutex mu_;
  std::condition_variable ready_, room_;
  std::deque<std::function<void()>> pending_;
  std::vector<std::thread> threads_;
  bool stop_ = false;
};

// "http://localhost:8080", "http://127.0.0.1", "http://[::1]:3000" (any scheme, any port).
bool origin_is_localhost(const std::string& origin) {
  std::string_view h(origin);
  if (const size_t p = h.find("://"); p != std::string_view::npos) h.remove_prefix(p + 3);
  if (h.starts_with("[")) {
    const size_t e = h.find(']');
    if (e == std::string_view::npos) return false;
    const std::string_view host = h.substr(1, e - 1), rest = h.substr(e + 1);
    return host == "::1" && (rest.empty() || rest.starts_with(":"));
  }
  const size_t c = h.find_first_of(":/");
  const std::string_view host = h.substr(0, c);
  return host == "localhost" || host == "127.0.0.1";
}

// Requests that need the model (and wake it, --sleep-idle-seconds): the POST routes but
// POST /props, and the slots. /health, /props, /models, /metrics and the chat page do not.
bool needs_model(const httplib::Request& req, const ServerState& s) {
  if (req.path.starts_with("/slots")) return true;
  return req.method == "POST" && req.path != "/props" && s.post_routes.count(req.path) > 0;
}
// Whether this thread's request holds the model (ModelSleep::acquire): httplib runs a request's
// routing, handler, body and logger on one thread.
thread_local bool t_holds_model = false;

// Paths that need no API key: health checks and the chat page's files.
bool is_public_path(const std::string& path, const ServerParams& sp) {
  if (path == "/health" || path == "/v1/health" || (!sp.vertex_health_route.empty() && path == sp.vertex_health_route)) return true;
  return sp.webui && (path == "/" || path == "/index.html" || path == "/chat.js" || path == "/chat.css");
}


// The server-wide settings of `web`: HTTP threads, body limit, timeouts, keep-alive.
void configure(httplib::Server& web, const ServerParams& sp, int n_threads) {
  const size_t max_pending = static_cast<size_t>(std::max(1, sp.max_pending_connections));
  web.new_task_queue = [n_threads, max_pending] { return new BoundedTaskQueue(static_cast<size_t>(n_threads), max_pending); };
  web.set_payload_max_length(sp.max_body);
  web.set_read_timeout(sp.timeout_s, 0);
  web.set_write_timeout(sp.timeout_s, 0);
  // An idle keep-alive connection is closed after this; it also bounds how long SIGTERM waits
  // for idle connections (httplib notices the stop only between requests).
  web.set_keep_alive_timeout(5);
  web.set_keep_alive_max_count(10000);
}

// What every request goes through first: CORS (a preflight is answered here) and API keys.
// True when the reply is set (the request goes no further).
bool cors_and_keys(ServerState& s, const httplib::Request& req, httplib::Response& res) {
  // CORS, as llama-server: any origin by default (echoed, with credentials), "localhost" for
  // localhost origins only, or one origin; a preflight (OPTIONS) is answered here.
  const std::string origin = req.get_header_value("Origin");
  if (s.sp.cors_origins == "*" && s.sp.cors_credentials) {
    if (!origin.empty()) res.set_header("Access-Control-Allow-Origin", origin);
  } else if (s.sp.cors_origins == "localhost") {
    if (!origin.empty() && origin_is_localhost(origin)) res.set_header("Access-Control-Allow-Origin", origin);
  } else {
    res.set_header("Access-Control-Allow-Origin", s.sp.cors_origins);
  }
  if (req.method == "OPTIONS") {
    res.set_header("Access-Control-Allow-Credentials", s.sp.cors_credentials ? "true" : "false");
    res.set_header("Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS");
    res.set_header("Access-Control-Allow-Headers", "*");
    res.set_content("", "text/html");
    return true;
  }
  // API keys: every path but /health and the chat page's files; Authorization: Bearer KEY, or
  // Anthropic's X-Api-Key.
  if (!s.sp.api_keys.empty() && !is_public_path(req.path, s.sp)) {
    std::string key = req.get_header_value("Authorization");
    if (key.empty()) key = req.get_header_value("X-Api-Key");
    if (key.starts_with("Bearer ")) key.erase(0, 7);
    if (std::find(s.sp.api_keys.begin(), s.sp.api_keys.end(), key) == s.sp.api_keys.end()) {
      s.reply_error(res, {401, key.empty() ? "You didn't provide an API key (Authorization: Bearer KEY, or X-Api-Key)."
                                           : "Invalid API Key",
                          "authentication_error", "", "invalid_api_key"});
      return true;
    }
  }
  return false;
}

// The end of every request (the logger): `counted` (front's, or in a pool the model's it reached)
// counts it; -v logs it.
void count_request(ServerState& front, const httplib::Request& req, const httplib::Response& res, ServerMetrics& counted) {
  front.in_flight--;
  counted.count(req.method, req.path, res.status);
  // -v: one line per request (a streamed reply is logged when its headers go out).
  if (front.sp.verbose) std::fprintf(stderr, "[http] %s %s %d\n", req.method.c_str(), req.path.c_str(), res.status);
}

// /health: 503 while draining or when an engine's watchdog fired.
void add_health_routes(httplib::Server& web, ServerState& front, double watchdog_s, std::function<bool()> stalled) {
  auto health = [&front, watchdog_s, stalled = std::move(stalled)](const httplib::Request&, httplib::Response& r) {
    if (front.draining) {
      r.status = 503;
      r.set_content(dump(error_json({503, "the server is shutting down", "unavailable_error", "", "unavailable"})), "application/json");
      return;
    }
    if (stalled()) {  // the watchdog: work waits or runs but no step finishes
      r.status = 503;
      r.set_content(dump(error_json({503, fmt::format("the engine has work but finished no step for {} s", watchdog_s),
                                     "unavailable_error", "", "engine_stalled"})),
                    "application/json");
      return;
    }
    r.set_content("{\"status\":\"ok\"}", "application/json");
  };
  web.Get("/health", health);
  web.Get("/v1/health", health);
  if (!front.sp.vertex_health_route.empty()) web.Get(front.sp.vertex_health_route, health);
}

void add_metrics_route(httplib::Server& web, ServerState& front, std::function<std::string()> scrape) {
  const std::string start_time = std::to_string(static_cast<int64_t>(std::time(nullptr)));
  web.Get("/metrics", [&front, start_time, scrape = std::move(scrape)](const httplib::Request&, httplib::Response& r) {
    if (!front.sp.endpoint_metrics)
      return front.reply_error(r, {501, "This server does not support metrics endpoint. Start it with `--metrics`", "not_supported_error", "", ""});
    r.set_header("Process-Start-Time-Unix", start_time);
    r.set_content(scrape(), "text/plain; version=0.0.4");
  });
}

// Binds, prints `banner`, serves until SIGTERM/SIGINT, then drains: the first signal stops
// accepting and lets in-flight requests run for drain_timeout_s (then ends them with an error),
// a second one exits at once. `front` counts the requests; `each` visits every model's state.
int listen_and_drain(httplib::Server& web, ServerState& front, http::StopSignals& signals, const std::function<void()>& stop_sleeping,
                     const std::function<void(const std::function<void(ServerState&)>&)>& each, const std::string& banner) {
  if (auto bound = http::bind_listener(web, front.sp.host, front.sp.port); !bound) {
    std::fprintf(stderr, "error: %s\n", bound.error().message.c_str());
    return 1;
  }
  auto all_idle = [&] {
    bool idle = true;
    each([&](ServerState& s) { idle = idle && (!s.engine || s.engine->wait_idle(std::chrono::milliseconds(0))); });
    return idle;
  };
  std::atomic<bool> finished{false};
  std::thread sig_thread([&] {
    const int sig = signals.wait(&finished);
    if (sig < 0) return;
    std::fprintf(stderr, "[server] signal %d: draining in-flight requests (at most %.0f s)\n", sig, front.sp.drain_timeout_s);
    front.draining = true;
    stop_sleeping();  // asleep or awake, each model stays so
    each([](ServerState& s) {
      s.draining = true;
      if (s.engine) s.engine->drain();
    });
    web.stop();  // closes the listener; listen_after_bind() returns when every handler is done
    const auto deadline = Clock::now() + std::chrono::duration<double>(front.sp.drain_timeout_s);
    const auto force_exit_at = deadline + std::chrono::seconds(10);
    const auto drained_check_at = Clock::now() + std::chrono::seconds(6);  // past the keep-alive timeout
    bool cancelled = false;
    while (!finished) {
      const int again = signals.poll(std::chrono::milliseconds(100));
      if (again > 0) {
        std::fprintf(stderr, "[server] signal %d again: exiting now\n", again);
        std::fflush(stderr);
        std::_Exit(128 + again);
      }
      if (!cancelled && Clock::now() > deadline && !all_idle()) {
        std::fprintf(stderr, "[server] drain timeout: ending the requests still running\n");
        each([&](ServerState& s) {
          if (s.engine) s.engine->cancel_all(fmt::format("the server is shutting down (drain timeout of {} s passed)", front.sp.drain_timeout_s));
        });
        cancelled = true;
      }
      // Every reply written and the engines idle: what keeps listen_after_bind() waiting are
      // connections that only wait for a next request (a client's pool; httplib reads a request
      // line for up to --timeout s): nothing is lost by closing them now.
      if (front.in_flight.load() == 0 && all_idle() && Clock::now() > drained_check_at) {
        std::fprintf(stderr, "[server] every request answered; closing idle connections\n[server] stopped\n");
        std::fflush(stderr);
        std::_Exit(0);
      }
      if (Clock::now() > force_exit_at) {  // a connection that never drains (a client not reading)
        std::fprintf(stderr, "[server] connections still open 10 s after the drain timeout: exiting\n");
        std::fflush(stderr);
        std::_Exit(1);
      }
    }
  });
  std::fprintf(stderr, "%s", banner.c_str());
  std::fflush(stderr);
  web.listen_after_bind();
  front.draining = true;
  stop_sleeping();
  each([](ServerState& s) {
    s.draining = true;
    if (s.engine) {
      s.engine->wait_idle(std::chrono::milliseconds(100));
      s.engine->cancel_all("the server is shutting down");
      s.engine->wait_idle(std::chrono::seconds(10));
    }
  });
  finished = true;
  sig_thread.join();
  std::fprintf(stderr, "[server] stopped\n");
  return 0;
}

}  // namespace

std::optional<std::string> init_state(ServerState& s, std::shared_ptr<const Model> model_in, const Tokenizer& tok,
                                      const EngineParams& ep, const ServerParams& sp, const EngineDraft& draft) {
  s.model = std::move(model_in);  // the only reference but the engine's: sleeping frees the weights
  const Model& model = *s.model;
  s.tok = &tok;
  s.sp = sp;
  s.created = static_cast<int64_t>(std::time(nullptr));
  if (s.sp.aliases.empty()) s.sp.aliases = {"model"};
  s.model_id = *std::set<std::string>(s.sp.aliases.begin(), s.sp.aliases.end()).begin();
  s.identity = model_identity(model.file());
  if (s.sp.chat_template.empty()) {  // the model's, or the built-in fallback for its architecture
    ChatTemplateChoice choice = choose_chat_template(model.file());
    if (choice.fallback) std::fprintf(stderr, "[server] %s\n", chat_template_notice(model.file(), choice).c_str());
    s.chat_template = std::move(choice.source);
  } else {
    s.chat_template = s.sp.chat_template;
  }
  s.template_tools = toolcall::probe_template(s.chat_template);
  auto engine = Engine::create(s.model, tok, ep, draft);
  if (!engine) return engine.error().message;
  s.engine = std::move(*engine);
  s.n_slots = ep.n_slots;
  s.n_ctx_slot = s.engine->n_ctx_slot();
  return std::nullopt;
}

void add_model_routes(httplib::Server& http, ServerState& s) {
  add_openai_routes(http, s);
  add_llama_routes(http, s);
  add_anthropic_routes(http, s);
  add_responses_routes(http, s);
  add_embedding_routes(http, s);
  add_ollama_routes(http, s);
}

int run_server(std::shared_ptr<const Model> model_in, const Tokenizer& tok, const EngineParams& ep, const ServerParams& sp_in,
               const EngineDraft& draft) {
  // Signals go to one thread (below), never to a worker in the middle of a write.
  http::StopSignals signals;

  ServerState s;
  if (auto err = init_state(s, std::move(model_in), tok, ep, sp_in, draft)) {
    std::fprintf(stderr, "error: %s\n", err->c_str());
    return 1;
  }

  httplib::Server web;
  // One thread per open connection (httplib): every slot and queue place, plus idle keep-alive
  // connections (a load balancer keeps some open per worker).
  configure(web, s.sp, s.sp.n_http_threads > 0 ? s.sp.n_http_threads : ep.n_slots + ep.max_queue + 64);
  web.set_pre_routing_handler([&s](const httplib::Request& req, httplib::Response& res) {
    s.in_flight++;  // until the logger, which runs once the reply is written
    if (cors_and_keys(s, req, res)) return httplib::Server::HandlerResponse::Handled;
    // The model, loaded again if it sleeps (--sleep-idle-seconds), stays until the logger.
    if (needs_model(req, s)) {
      if (auto err = s.sleep->acquire()) {
        res.set_header("Retry-After", "1");
        s.reply_error(res, {503, *err, "unavailable_error", "", "unavailable"});
        return httplib::Server::HandlerResponse::Handled;
      }
      t_holds_model = true;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  // Errors httplib produces itself (404 no route, 413 body too large, 400 bad request line,
  // 405, an exception) get OpenAI's error shape too; bodies we set are kept.
  http::install_error_handlers(web, s.sp.max_body, [&s](httplib::Response& res, const ApiError& e) { s.reply_error(res, e); });
  web.set_logger([&s](const httplib::Request& req, const httplib::Response& res) {
    if (t_holds_model) {
      t_holds_model = false;
      s.sleep->release();
    }
    count_request(s, req, res, s.metrics);
  });

  add_model_routes(web, s);
  add_ollama_server_routes(web, s, nullptr, nullptr);
  if (s.sp.webui) add_webui_routes(web, s);
  add_health_routes(web, s, ep.watchdog_s, [&s] { return s.sleep->stalled(); });
  add_vertex_routes(web, s);  // last: it runs instances through the routes above
  add_metrics_route(web, s, [&s] { return s.metrics.scrape(s.sleep->engine_metrics()); });

  // The idle watch (--sleep-idle-seconds) starts once the routes are set up: their setup reads
  // the model (routes-ollama.cpp describes it), which a sleep would free under it.
  s.sleep = std::make_unique<ModelSleep>(s, s.sp.sleep_idle_s, ep, draft);
  std::string banner = fmt::format("[server] tool calls: {} syntax{}\n", toolcall::syntax_name(s.template_tools.syntax),
                                   s.template_tools.syntax == toolcall::Syntax::kGeneric
                                       ? " (the template has no tool support: tools are described in a system message)" : "");
  banner += fmt::format("[server] {}: {} slots x {} ctx, listening on http://{}:{}\n", s.model_id, ep.n_slots, s.n_ctx_slot,
                        s.sp.host, s.sp.port);
  return listen_and_drain(web, s, signals, [&s] { s.sleep->stop(); }, [&s](const std::function<void(ServerState&)>& f) { f(s); },
                          banner);
}

namespace {

// The reply shape of a path's API: Ollama's ({"error": "..."}), Anthropic's, else OpenAI's.
ServerState::ErrorShape error_shape(const std::string& path) {
  if (path.starts_with("/api/")) return ollama_error_json;
  if (path.starts_with("/v1/messages")) return anthropic_error_json;
  return error_json;
}

// The pool entry this thread's request holds (ModelPool::acquire) until the logger.
thread_local ModelPool::Entry* t_entry = nullptr;

// The entry a request names (its "model", or Ollama's older "name"; none: the only model there
// is); on failure the reply (400, 404 in the API's shape) is set and nullptr returned.
ModelPool::Entry* named_entry(ModelPool& pool, ServerState& front, const json& body, const std::string& path, httplib::Response& res) {
  const auto shape = error_shape(path);
  std::string name;
  for (const char* key : {"model", "name"})
    if (body.is_object() && body.contains(key) && body[key].is_string() && name.empty()) name = body[key].get<std::string>();
  if (name.empty()) {
    const std::vector<ModelPool::Entry*> all = pool.entries();
    if (all.size() == 1) return all.front();
    front.reply_error(res, invalid_param("model", fmt::format("'model' is required: this server serves {} models (GET /v1/models lists them)",
                                                              all.size())), shape);
    return nullptr;
  }
  if (ModelPool::Entry* e = pool.find(name)) return e;
  if (shape == ollama_error_json) {
    front.reply_error(res, *ollama_check_model(json{{"model", name}}, {}), shape);
  } else {
    front.reply_error(res, {404, fmt::format("The model '{}' does not exist (GET /v1/models lists those served)", name), "invalid_request_error",
                            "model", "model_not_found"}, shape);
  }
  return nullptr;
}

// GET /v1/models and /models: OpenAI's list, with llama-server's router status of each model.
json pool_models(ModelPool& pool, int64_t created) {
  json data = json::array();
  for (const ModelPool::Entry* e : pool.entries())
    data.push_back({{"id", e->info().names.front()}, {"object", "model"}, {"created", created}, {"owned_by", "minfer"},
                    {"aliases", e->info().names}, {"path", e->info().path}, {"status", {{"value", e->status()}}}});
  return {{"object", "list"}, {"data", std::move(data)}};
}

// GET /api/ps: the loaded models, each with when its keep_alive ends (none: kept for good).
json pool_running(ModelPool& pool) {
  json models = json::array();
  for (const ModelPool::Entry* e : pool.entries()) {
    const ServerState* s = e->state();
    if (!s || s->sleep->sleeping()) continue;  // (use() would wait for a load under way)
    const ModelSleep::Use u = s->sleep->use();
    if (u.asleep) continue;
    std::optional<std::chrono::system_clock::time_point> expires;
    if (u.idle_s) {
      const auto from = u.users > 0 ? Clock::now() : u.last_used;  // a request running: from now
      expires = std::chrono::system_clock::now() +
                std::chrono::duration_cast<std::chrono::system_clock::duration>(from + std::chrono::duration<double>(*u.idle_s) - Clock::now());
    }
    models.push_back(ollama_running_entry(e->tags_entry(), expires, u.n_ctx_slot));
  }
  return {{"models", std::move(models)}};
}

// Each model of the pool as /metrics shows it.
std::vector<PoolModelMetrics> pool_metrics(ModelPool& pool) {
  std::vector<PoolModelMetrics> out;
  for (const ModelPool::Entry* e : pool.entries()) {
    PoolModelMetrics& pm = out.emplace_back();
    pm.name = e->info().names.front();
    pm.waiting = e->waiting();
    if (ServerState* s = e->state()) {
      pm.loaded = !s->sleep->sleeping();
      pm.metrics = &s->metrics;
      pm.engine = s->sleep->engine_metrics();
      if (!pm.loaded) pm.engine.kv_size = 0;  // unloaded: no cache (one sleeping model keeps its snapshot, llama-server's rule)
    }
  }
  return out;
}

// POST /models/load and /models/unload {"model": NAME} (llama-server's router): {"success": true}.
void load_or_unload(ModelPool& pool, ServerState& front, const httplib::Request& req, httplib::Response& res, bool load) {
  auto body = front.parse_body(req, res);
  if (!body) return;
  if (!body->is_object() || !body->contains("model"))
    return front.reply_error(res, invalid_param("model", "'model' is required: the name of a model GET /models lists"));
  ModelPool::Entry* e = named_entry(pool, front, *body, req.path, res);
  if (!e) return;
  if (load) {
    if (auto err = pool.acquire(*e)) return front.reply_error(res, {503, *err, "unavailable_error", "", "unavailable"});
    pool.release(*e);
  } else if (!pool.unload(*e)) {
    return front.reply_error(res, {409, fmt::format("model '{}' has a request running: it is unloaded once idle (keep_alive)", e->info().names.front()),
                                   "invalid_request_error", "model", "model_busy"});
  }
  front.reply_json(res, {{"success", true}});
}

}  // namespace

int run_pool_server(const PoolParams& pp, const ServerParams& sp, const EngineParams& ep) {
  http::StopSignals signals;
  ServerState front;  // no model: the server-wide parameters, counters and reply helpers
  front.sp = sp;
  front.created = static_cast<int64_t>(std::time(nullptr));
  ModelPool pool(pp, front);
  if (pool.entries().empty()) {
    std::fprintf(stderr, "error: no model to serve (give MODEL, several, or --models-dir DIR; `minfer list` shows the cached ones)\n");
    return 1;
  }

  httplib::Server web;
  const int n_models = static_cast<int>(pool.entries().size());
  const int n_loaded = pp.models_max > 0 ? std::min(pp.models_max, n_models) : n_models;
  configure(web, sp, sp.n_http_threads > 0 ? sp.n_http_threads : (ep.n_slots + ep.max_queue) * n_loaded + 64);
  web.set_pre_routing_handler([&](const httplib::Request& req, httplib::Response& res) {
    front.in_flight++;  // until the logger
    if (cors_and_keys(front, req, res)) return httplib::Server::HandlerResponse::Handled;
    return httplib::Server::HandlerResponse::Unhandled;
  });
  http::install_error_handlers(web, sp.max_body, [&front](httplib::Response& res, const ApiError& e) { front.reply_error(res, e); });
  web.set_logger([&](const httplib::Request& req, const httplib::Response& res) {
    if (!t_entry) return count_request(front, req, res, front.metrics);  // it reached no model
    count_request(front, req, res, t_entry->state()->metrics);  // before the release: a scrape after it sees the count
    pool.release(*t_entry);
    t_entry = nullptr;
  });

  auto list = [&](const httplib::Request&, httplib::Response& r) { front.reply_json(r, pool_models(pool, front.created)); };
  web.Get("/v1/models", list);
  web.Get("/models", list);
  web.Post("/models/load", [&](const httplib::Request& q, httplib::Response& r) { load_or_unload(pool, front, q, r, true); });
  web.Post("/models/unload", [&](const httplib::Request& q, httplib::Response& r) { load_or_unload(pool, front, q, r, false); });
  add_ollama_server_routes(web, front, &pool, &pp.store);  // before POST .*: /api/pull and /api/copy name no served model
  // Every other POST goes to the model it names, loaded for it and held until the logger (the
  // body is read only once routed: the pre-routing handler cannot see it).
  web.Post(".*", [&](const httplib::Request& req, httplib::Response& res) {
    const auto shape = error_shape(req.path);
    auto body = front.parse_body(req, res, shape);
    if (!body) return;
    ModelPool::Entry* e = named_entry(pool, front, *body, req.path, res);
    if (!e) return;
    std::optional<double> keep_alive;
    std::optional<int> n_ctx;  // Ollama's: options.num_ctx, else serve's (0); the other APIs take what is loaded
    if (shape == ollama_error_json) {
      auto k = ollama_keep_alive(*body);
      if (!k) return front.reply_error(res, k.error(), shape);
      keep_alive = *k;
      // The endpoints that run the model (Ollama schedules a runner for these only: /api/show
      // and the like answer from what is loaded).
      if (req.path == "/api/chat" || req.path == "/api/generate" || req.path == "/api/embed" || req.path == "/api/embeddings") {
        auto c = ollama_num_ctx(*body);
        if (!c) return front.reply_error(res, c.error(), shape);
        n_ctx = c->value_or(0);
      }
    }
    if (auto err = pool.acquire(*e, keep_alive, n_ctx)) {
      res.set_header("Retry-After", "1");
      return front.reply_error(res, {503, *err, "unavailable_error", "", "unavailable"}, shape);
    }
    t_entry = e;
    const auto& routes = e->state()->post_routes;
    auto route = routes.find(req.path);
    static const std::regex slot_path(R"(/slots/\d+)");
    if (route == routes.end() && std::regex_match(req.path, slot_path)) route = routes.find("/slots/:id");
    if (route == routes.end()) {
      res.status = 404;  // the error handler says which route
      return;
    }
    route->second(req, res);
  });
  // llama-server's router: GET /props and /slots answer for the model ?model= names, loaded for
  // it unless ?autoload=false.
  for (const std::string path : {"/props", "/slots"})
    web.Get(path, [&, path](const httplib::Request& req, httplib::Response& res) {
      const std::string name = req.get_param_value("model");
      if (name.empty() && pool.entries().size() > 1)
        return front.reply_error(res, invalid_param("model", fmt::format("model name is missing from the request: {}?model=NAME "
                                                                         "(GET /models lists them)", path)));
      ModelPool::Entry* e = named_entry(pool, front, name.empty() ? json::object() : json{{"model", name}}, req.path, res);
      if (!e) return;
      if (req.get_param_value("autoload") == "false" && e->status() != "loaded")
        return front.reply_error(res, {503, fmt::format("model '{}' is not loaded (autoload=false)", e->info().names.front()),
                                       "unavailable_error", "", "unavailable"});
      if (auto err = pool.acquire(*e)) {
        res.set_header("Retry-After", "1");
        return front.reply_error(res, {503, *err, "unavailable_error", "", "unavailable"});
      }
      t_entry = e;
      e->state()->get_routes.at(path)(req, res);
    });
  web.Get("/api/tags", [&](const httplib::Request&, httplib::Response& r) {
    json models = json::array();
    for (const ModelPool::Entry* e : pool.entries()) models.push_back(e->tags_entry());
    front.reply_json(r, {{"models", std::move(models)}});
  });
  web.Get("/api/ps", [&](const httplib::Request&, httplib::Response& r) { front.reply_json(r, pool_running(pool)); });
  add_health_routes(web, front, ep.watchdog_s, [&pool] {
    bool stalled = false;
    pool.for_each_state([&](ServerState& s) { stalled = stalled || s.sleep->stalled(); });
    return stalled;
  });
  add_metrics_route(web, front, [&pool, &front] { return scrape_pool(front.metrics, pool_metrics(pool)); });

  std::string banner;
  for (const ModelPool::Entry* e : pool.entries())
    banner += fmt::format("[server] model {} ({})\n", fmt::join(e->info().names, ", "), e->info().path);
  banner += fmt::format("[server] {} models, loaded on first use, at most {} at once, keep_alive {} s; listening on http://{}:{}\n", n_models,
                        pp.models_max > 0 ? std::to_string(pp.models_max) : std::string("all"), pp.keep_alive_s, sp.host, sp.port);
  return listen_and_drain(web, front, signals, [&pool] { pool.stop(); },
                          [&pool](const std::function<void(ServerState&)>& f) { pool.for_each_state(f); }, banner);
}

}  // namespace minfer::server
