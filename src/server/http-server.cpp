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
#include <set>
#include <thread>

#include "http/errors.h"
#include "http/listener.h"
#include "runtime/chat-prompt.h"
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

}  // namespace

int run_server(std::shared_ptr<const Model> model_in, const Tokenizer& tok, const EngineParams& ep, const ServerParams& sp_in,
               const EngineDraft& draft) {
  // Signals go to one thread (below), never to a worker in the middle of a write.
  http::StopSignals signals;

  ServerState s;
  s.model = std::move(model_in);  // the only reference but the engine's: sleeping frees the weights
  const Model& model = *s.model;
  s.tok = &tok;
  s.sp = sp_in;
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
  if (!engine) {
    std::fprintf(stderr, "error: %s\n", engine.error().message.c_str());
    return 1;
  }
  s.engine = std::move(*engine);
  s.n_slots = ep.n_slots;
  s.n_ctx_slot = s.engine->n_ctx_slot();

  httplib::Server web;
  // One thread per open connection (httplib): every slot and queue place, plus idle keep-alive
  // connections (a load balancer keeps some open per worker).
  const int n_threads = s.sp.n_http_threads > 0 ? s.sp.n_http_threads : ep.n_slots + ep.max_queue + 64;
  const size_t max_pending = static_cast<size_t>(std::max(1, s.sp.max_pending_connections));
  web.new_task_queue = [n_threads, max_pending] { return new BoundedTaskQueue(static_cast<size_t>(n_threads), max_pending); };
  web.set_payload_max_length(s.sp.max_body);
  web.set_read_timeout(s.sp.timeout_s, 0);
  web.set_write_timeout(s.sp.timeout_s, 0);
  // An idle keep-alive connection is closed after this; it also bounds how long SIGTERM waits
  // for idle connections (httplib notices the stop only between requests).
  web.set_keep_alive_timeout(5);
  web.set_keep_alive_max_count(10000);

  web.set_pre_routing_handler([&s](const httplib::Request& req, httplib::Response& res) {
    s.in_flight++;  // until the logger, which runs once the reply is written
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
      return httplib::Server::HandlerResponse::Handled;
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
        return httplib::Server::HandlerResponse::Handled;
      }
    }
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
    s.in_flight--;
    s.metrics.count(req.method, req.path, res.status);
    // -v: one line per request (a streamed reply is logged when its headers go out).
    if (s.sp.verbose) std::fprintf(stderr, "[http] %s %s %d\n", req.method.c_str(), req.path.c_str(), res.status);
  });

  add_openai_routes(web, s);
  add_llama_routes(web, s);
  add_anthropic_routes(web, s);
  add_responses_routes(web, s);
  add_embedding_routes(web, s);
  add_ollama_routes(web, s);
  if (s.sp.webui) add_webui_routes(web, s);
  auto health = [&s, watchdog_s = ep.watchdog_s](const httplib::Request&, httplib::Response& r) {
    if (s.draining) {
      r.status = 503;
      r.set_content(dump(error_json({503, "the server is shutting down", "unavailable_error", "", "unavailable"})), "application/json");
      return;
    }
    if (s.sleep->stalled()) {  // the watchdog: work waits or runs but no step finishes
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
  if (!s.sp.vertex_health_route.empty()) web.Get(s.sp.vertex_health_route, health);
  add_vertex_routes(web, s);  // last: it runs instances through the routes above
  const std::string start_time = std::to_string(static_cast<int64_t>(std::time(nullptr)));
  web.Get("/metrics", [&s, start_time](const httplib::Request&, httplib::Response& r) {
    if (!s.sp.endpoint_metrics)
      return s.reply_error(r, {501, "This server does not support metrics endpoint. Start it with `--metrics`", "not_supported_error", "", ""});
    r.set_header("Process-Start-Time-Unix", start_time);
    r.set_content(s.metrics.scrape(s.sleep->engine_metrics()), "text/plain; version=0.0.4");
  });

  // The idle watch (--sleep-idle-seconds) starts once the routes are set up: their setup reads
  // the model (routes-ollama.cpp describes it), which a sleep would free under it.
  s.sleep = std::make_unique<ModelSleep>(s, s.sp.sleep_idle_s, ep, draft);
  if (auto bound = http::bind_listener(web, s.sp.host, s.sp.port); !bound) {
    std::fprintf(stderr, "error: %s\n", bound.error().message.c_str());
    return 1;
  }
  // Signals: the first drains (stop accepting; in-flight requests get drain_timeout_s, then
  // are ended with an error), a second one exits at once.
  std::atomic<bool> finished{false};
  std::thread sig_thread([&] {
    const int sig = signals.wait(&finished);
    if (sig < 0) return;
    std::fprintf(stderr, "[server] signal %d: draining in-flight requests (at most %.0f s)\n", sig, s.sp.drain_timeout_s);
    s.draining = true;
    s.sleep->stop();  // asleep or awake, it stays so
    if (s.engine) s.engine->drain();
    web.stop();  // closes the listener; listen_after_bind() returns when every handler is done
    const auto deadline = Clock::now() + std::chrono::duration<double>(s.sp.drain_timeout_s);
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
      if (!cancelled && Clock::now() > deadline && s.engine && !s.engine->wait_idle(std::chrono::milliseconds(0))) {
        std::fprintf(stderr, "[server] drain timeout: ending the requests still running\n");
        s.engine->cancel_all(fmt::format("the server is shutting down (drain timeout of {} s passed)", s.sp.drain_timeout_s));
        cancelled = true;
      }
      // Every reply written and the engine idle: what keeps listen_after_bind() waiting are
      // connections that only wait for a next request (a client's pool; httplib reads a request
      // line for up to --timeout s): nothing is lost by closing them now.
      if (s.in_flight.load() == 0 && (!s.engine || s.engine->wait_idle(std::chrono::milliseconds(0))) &&
          Clock::now() > drained_check_at) {
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
  std::fprintf(stderr, "[server] tool calls: %s syntax%s\n", toolcall::syntax_name(s.template_tools.syntax),
               s.template_tools.syntax == toolcall::Syntax::kGeneric ? " (the template has no tool support: tools are described in a system message)" : "");
  std::fprintf(stderr, "[server] %s: %d slots x %d ctx, listening on http://%s:%d\n", s.model_id.c_str(), ep.n_slots,
               s.n_ctx_slot, s.sp.host.c_str(), s.sp.port);
  std::fflush(stderr);
  web.listen_after_bind();
  s.draining = true;
  s.sleep->stop();
  if (s.engine) {
    s.engine->wait_idle(std::chrono::milliseconds(100));
    s.engine->cancel_all("the server is shutting down");
    s.engine->wait_idle(std::chrono::seconds(10));
  }
  finished = true;
  sig_thread.join();
  std::fprintf(stderr, "[server] stopped\n");
  return 0;
}

}  // namespace minfer::server
