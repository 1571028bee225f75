#include "viz/viz-server.h"

#include <arpa/inet.h>
#include <sys/socket.h>

#include <httplib.h>
#include <signal.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include <nlohmann/json.hpp>

#include "api/fields-json.h"
#include "core/thread-pool.h"
#include "http/errors.h"
#include "http/listener.h"
#include "http/sse.h"
#include "models/model.h"
#include "runtime/chat-prompt.h"
#include "runtime/generate.h"
#include "runtime/session.h"
#include "sampling/sampler.h"
#include "tokenizer/tokenizer.h"
#include "viz/event-hub.h"
#include "viz/graph-json.h"
#include "viz/trace.h"

using nlohmann::json;

namespace minfer::viz {

std::string_view embedded_file(std::string_view name);  // viz-assets.cpp (generated)

namespace {

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

void reply_error(httplib::Response& res, int status, const std::string& message, const std::string& type,
                 const std::string& param = "") {
  http::reply_error(res, {status, message, type, param, ""});
}

struct RunRequest {
  std::string prompt;
  GenerationSettings settings;  // every field of the table, by the JSON names (max_tokens 32 unless given)
};

// The body of POST /viz/run, or the message of a 400 (and the field it is about).
Expected<RunRequest> parse_run(const std::string& body, const Tokenizer& tok, std::string* param) {
  api::json j;
  try {
    j = api::json::parse(body);
  } catch (const std::exception& e) {
    return make_error("the body is not JSON: {}", e.what());
  }
  if (!j.is_object()) return make_error("the body must be a JSON object");
  RunRequest r;
  *param = "prompt";
  if (!j.contains("prompt") || !j["prompt"].is_string() || j["prompt"].get<std::string>().empty())
    return make_error("'prompt' must be a non-empty string");
  r.prompt = j["prompt"].get<std::string>();
  r.settings.n_predict = 32;  // a short run to watch
  if (auto e = api::read_fields(j, Api::kJson, tok, r.settings)) {
    *param = e->param;
    return make_error("{}", e->message);
  }
  param->clear();
  return r;
}

struct State {
  std::atomic<bool> stopping{false};  // set on SIGINT/SIGTERM: runs end at the next token
  std::string model_name;
  std::shared_ptr<const Model> model;  // null with --graph: the page shows an export, nothing runs
  std::unique_ptr<Tokenizer> tok;
  std::unique_ptr<Session> session;
  std::string graphs;  // the /viz/graph body
  EventHub hub;
  std::mutex run_mu;   // one run at a time
};

void serve_asset(httplib::Response& res, std::string_view name, const char* type) {
  const std::string_view data = embedded_file(name);
  res.set_content(std::string(data), type);
  res.set_header("Cache-Control", "no-cache");
}

void handle_run(State& s, const httplib::Request& req, httplib::Response& res) {
  if (!s.model)
    return reply_error(res, 400, "no model: this page shows a graph export (--graph); start `minfer viz MODEL` to run",
                       "invalid_request_error");
  std::string param;
  auto rr = parse_run(req.body, *s.tok, &param);
  if (!rr) return reply_error(res, 400, rr.error().message, "invalid_request_error", param);
  std::unique_lock<std::mutex> lock(s.run_mu, std::try_to_lock);
  if (!lock.owns_lock()) return reply_error(res, 409, "a run is in progress; try again when it finishes", "busy");

  nlohmann::ordered_json msgs = nlohmann::ordered_json::array();
  msgs.push_back({{"role", "user"}, {"content", rr->prompt}});
  ChatRenderOptions ro;
  ro.quiet = true;
  auto text = render_chat_prompt(s.model->file(), *s.tok, msgs, ro);
  if (!text) return reply_error(res, 400, text.error().message, "invalid_request_error", "prompt");
  bool add_bos = s.tok->add_bos();
  if (add_bos && s.tok->bos_id() >= 0 && text->starts_with(s.tok->token_text(s.tok->bos_id()))) add_bos = false;
  const std::vector<int32_t> ids = s.tok->encode(*text, add_bos, true);
  if (static_cast<int>(ids.size()) + 1 >= s.session->n_ctx())
    return reply_error(res, 400, fmt::format("the prompt has {} tokens; the context holds {}", ids.size(), s.session->n_ctx()),
                       "invalid_request_error", "prompt");

  auto sampler = Sampler::create(rr->settings.sampling, s.tok->n_vocab());
  if (!sampler) return reply_error(res, 400, sampler.error().message, "invalid_request_error");

  // Capture only for a page that listens now; the recorder publishes as the run goes.
  const bool watched = s.hub.listening();
  TraceRecorder rec(*s.tok, [&](const json& e) { s.hub.publish(dump(e)); }, false);
  s.session->clear();
  // The observer points at `rec`: removed on every way out of this function.
  struct ObserverReset {
    Session* s;
    void run() { if (s) s->set_observer({}), s = nullptr; }
    ~ObserverReset() { run(); }
  } observer_reset{s.session.get()};
  if (watched) s.session->set_observer([&](const Node& n, const void* d) { rec.on_node(n, d); });
  rec.start(s.model->hparams().name, rr->prompt, static_cast<int>(ids.size()));
  GenerateParams gp;
  gp.n_predict = rr->settings.n_predict;
  gp.stop = rr->settings.stop;
  gp.ignore_eog = rr->settings.ignore_eos;
  std::string out;
  auto st = generate(*s.session, *s.tok, *sampler, ids, gp,
                     [&](std::string_view t) {
                       out += t;
                       return !s.stopping.load();
                     },
                     watched ? rec.hooks() : GenerateHooks{});
  observer_reset.run();
  if (!st) {
    rec.finish(out, "error", 0);
    return reply_error(res, 500, st.error().message, "server_error");
  }
  const std::string reason = st->reason == StopReason::kEog || st->reason == StopReason::kStopString ? "stop"
                             : st->reason == StopReason::kCancelled                                ? "cancelled"
                                                                                                   : "length";
  rec.finish(out, reason, st->n_gen);
  res.set_content(dump({{"text", out}, {"finish_reason", reason}, {"completion_tokens", st->n_gen}, {"captured", watched}}),
                  "application/json");
}

constexpr int kMaxPages = 24;  // event streams; the HTTP pool (32) keeps threads for the rest
constexpr size_t kMaxBody = 1 << 20;  // a /viz/run body

void handle_events(State& s, httplib::Response& res) {
  if (s.hub.n_subscribers() >= kMaxPages)
    return reply_error(res, 503, fmt::format("{} pages are listening already; close one", kMaxPages), "busy");
  auto sub = s.hub.subscribe();
  http::stream_sse(
      res,
      [&s, sub](size_t, httplib::DataSink& sink) {
        http::SseWriter sse(sink);
        sse.add_raw("retry: 1000\n");  // the page reconnects after 1 s
        if (!sse.send(dump({{"type", "hello"}, {"model", s.model_name}}))) return false;
        for (;;) {
          const auto events = s.hub.wait(*sub, std::chrono::milliseconds(1000));
          if (s.hub.closed()) return false;
          // One message per wake-up: the events since the last as a JSON array (a page gets tens
          // of messages a second, not thousands: one task each in the browser).
          if (!events.empty()) {
            std::string batch = "[";
            for (const std::string& e : events) (batch.size() > 1 ? batch += ',' : batch) += e;
            sse.add(batch += ']');
          }
          if (!(events.empty() ? sse.heartbeat() : sse.flush())) return false;  // a ping finds a page that went away
        }
      },
      [&s, sub](bool) { s.hub.unsubscribe(sub); });
}

// A string member of a JSON object, or "" (absent, or not a string: never a type_error).
std::string string_member(const json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// Up to `limit` + 1 bytes of a file (more than `limit`: too large, whatever its reported size:
// a growing file, a /proc file that says 0), or nullopt when it cannot be opened.
std::optional<std::string> read_file_bounded(const std::filesystem::path& path, size_t limit) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::string text;
  char buf[1 << 16];
  while (text.size() <= limit && in.read(buf, sizeof buf).gcount() > 0) text.append(buf, static_cast<size_t>(in.gcount()));
  return text;
}

bool loopback_peer(const httplib::Request& req) {
  return req.remote_addr == "127.0.0.1" || req.remote_addr == "::1" || req.remote_addr.starts_with("::ffff:127.");
}

// GET /viz/trace?path=FILE: reads a file of the machine the server runs on, so only for a page
// on that machine (a viz bound to another address answers other clients 403, not the host's
// files).
void handle_trace(const httplib::Request& req, httplib::Response& res) {
  if (!loopback_peer(req))
    return reply_error(res, 403, "trace files are served only to clients on this machine", "permission_error", "path");
  const std::string path = req.get_param_value("path");
  if (path.empty()) return reply_error(res, 400, "give ?path=FILE (a MINFER_TRACE file)", "invalid_request_error", "path");
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    return reply_error(res, 404, "no trace file '" + path + "'", "not_found_error", "path");
  constexpr size_t kMaxTrace = size_t{1} << 30;
  const auto text = read_file_bounded(path, kMaxTrace);
  if (!text) return reply_error(res, 404, "cannot read trace file '" + path + "'", "not_found_error", "path");
  if (text->size() > kMaxTrace) return reply_error(res, 400, "'" + path + "' is larger than 1 GiB", "invalid_request_error", "path");
  json j;
  try {
    j = json::parse(*text);
  } catch (const std::exception& e) {
    return reply_error(res, 400, "'" + path + "' is not JSON", "invalid_request_error", "path");
  }
  if (!j.is_object() || string_member(j, "format") != "minfer-trace")
    return reply_error(res, 400, "'" + path + "' is not a minfer trace (no \"format\": \"minfer-trace\")", "invalid_request_error", "path");
  res.set_content(*text, "application/json");
}

// The /viz/graph body of graph files: `--dump-graph-json` exports, each shown as the phase its
// "kind" says (a prefill export and a decode one, e.g. `minfer logits M --tokens 1
// --dump-graph-json`: a phase no file gives is absent, not faked from the other), or one saved
// /viz/graph answer ({"model", "prefill", "decode"}); "runnable": false tells the page.
Expected<std::string> graphs_from_files(const std::vector<std::string>& paths, std::string* model_name) {
  constexpr size_t kMaxGraph = size_t{256} << 20;
  auto phase_ok = [](const json& g) { return g.is_object() && g.contains("nodes") && g["nodes"].is_array(); };
  json out = json::object();
  for (const std::string& path : paths) {
    const auto text = read_file_bounded(path, kMaxGraph);
    if (!text) return make_error("cannot read graph file '{}'", path);
    if (text->size() > kMaxGraph) return make_error("graph file '{}' is larger than 256 MiB", path);
    json j;
    try {
      j = json::parse(*text);
    } catch (const std::exception& e) {
      return make_error("graph file '{}' is not JSON: {}", path, e.what());
    }
    if (j.is_object() && string_member(j, "format") == "minfer-graph" && phase_ok(j)) {
      const std::string phase = string_member(j, "kind") == "decode" ? "decode" : "prefill";
      if (out.contains(phase)) return make_error("graph file '{}': a second {} graph", path, phase);
      if (!out.contains("model")) out["model"] = string_member(j, "model").empty() ? path : string_member(j, "model");
      out[phase] = std::move(j);
      continue;
    }
    if (paths.size() != 1 || !j.is_object() || !j.contains("prefill") || !j.contains("decode") || !phase_ok(j["prefill"]) ||
        !phase_ok(j["decode"]))
      return make_error("'{}' is neither a graph export (\"format\": \"minfer-graph\", \"nodes\": [...]) nor a /viz/graph answer", path);
    out = std::move(j);
    if (string_member(out, "model").empty()) out["model"] = path;
  }
  *model_name = string_member(out, "model");
  out["runnable"] = false;
  return dump(out);
}

// Loads MODEL and its session and builds the /viz/graph body; 0, or the exit code after a message.
int load_model(State& s, const std::string& model_path, const VizOptions& opt) {
  auto m = Model::load(model_path);
  if (!m) {
    std::fprintf(stderr, "minfer viz: %s\n", m.error().message.c_str());
    return 1;
  }
  s.model = *m;
  auto tok = Tokenizer::from_gguf(s.model->file());
  if (!tok) {
    std::fprintf(stderr, "minfer viz: %s\n", tok.error().message.c_str());
    return 1;
  }
  s.tok = std::make_unique<Tokenizer>(std::move(*tok));
  SessionParams sp;
  const int64_t n_train = s.model->hparams().n_ctx_train;
  sp.n_ctx = n_train > 0 ? static_cast<int>(std::min<int64_t>(opt.n_ctx, n_train)) : opt.n_ctx;
  sp.n_threads = opt.n_threads > 0 ? opt.n_threads : hardware_threads();
  sp.offload = opt.offload;
  auto session = Session::create(s.model, sp);
  if (!session) {
    std::fprintf(stderr, "minfer viz: %s\n", session.error().message.c_str());
    return 1;
  }
  s.session = std::move(*session);
  // A prefill of 16 tokens has the node ids of every prefill (n_tokens > 1, one output row).
  auto prefill = session_graph_json(*s.session, std::min(16, s.session->n_batch()), 1);
  auto decode = session_graph_json(*s.session, 1, 1);
  if (!prefill || !decode) {
    std::fprintf(stderr, "minfer viz: %s\n", (!prefill ? prefill : decode).error().message.c_str());
    return 1;
  }
  s.model_name = s.model->hparams().name;
  s.graphs = "{\"model\":" + dump(s.model_name) + ",\"prefill\":" + *prefill + ",\"decode\":" + *decode + "}";
  return 0;
}

// GET /viz/samples: the graph exports in the samples folder ({"samples": [names]}, sorted);
// GET /samples/NAME: one of them (a plain name: no '/', no "..").
// A name /samples/NAME serves and /viz/samples lists: NAME.json, no path separator, not hidden,
// no control characters.
bool plain_sample_name(const std::string& name) {
  return !name.empty() && name[0] != '.' && name.ends_with(".json") &&
         std::none_of(name.begin(), name.end(), [](char c) { return c == '/' || c == '\\' || static_cast<unsigned char>(c) < 0x20; });
}

void handle_samples(const std::string& dir, httplib::Response& res) {
  std::vector<std::string> names;
  std::error_code ec;
  if (!dir.empty())
    for (const auto& e : std::filesystem::directory_iterator(dir, ec))
      if (e.is_regular_file(ec) && plain_sample_name(e.path().filename().string())) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  res.set_content(dump({{"samples", names}}), "application/json");
}

void handle_sample(const std::string& dir, const std::string& name, httplib::Response& res) {
  if (!plain_sample_name(name)) return reply_error(res, 400, "sample name '" + name + "' must be a plain NAME.json file name", "invalid_request_error");
  const std::filesystem::path file = std::filesystem::path(dir) / name;
  std::error_code ec;
  if (dir.empty() || !std::filesystem::is_regular_file(file, ec)) return reply_error(res, 404, "no sample '" + name + "'", "not_found_error");
  constexpr size_t kMaxSample = size_t{64} << 20;
  const auto text = read_file_bounded(file, kMaxSample);
  if (!text || text->size() > kMaxSample) return reply_error(res, 404, "no readable sample '" + name + "' (64 MiB at most)", "not_found_error");
  res.set_content(*text, "application/json");
}

// DNS-rebinding guard: a page of another site whose name an attacker points at 127.0.0.1 reaches
// this server with its own name in Host. Accepted: loopback names (localhost, *.localhost), IP
// literals (a rebinding needs a name; a page bound to 0.0.0.0 is opened by its address) and the
// --host given; anything else, or no Host, is refused before any handler runs.
bool allowed_host(const httplib::Request& req, const std::string& bind_host) {
  std::string host = req.get_header_value("Host");
  if (host.starts_with('[')) {  // [v6]:port, a real IPv6 literal (not any [name])
    const size_t end = host.find(']');
    if (end == std::string::npos || (end + 1 != host.size() && host[end + 1] != ':')) return false;
    in6_addr addr;
    return inet_pton(AF_INET6, host.substr(1, end - 1).c_str(), &addr) == 1;
  }
  if (const size_t colon = host.rfind(':'); colon != std::string::npos) host.resize(colon);
  const auto lower = [](std::string t) {
    std::transform(t.begin(), t.end(), t.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return t;
  };
  host = lower(std::move(host));
  if (host.empty()) return false;
  if (host == "localhost" || host.ends_with(".localhost") || host == lower(bind_host)) return true;
  int a, b, c, d;
  char tail;
  return std::sscanf(host.c_str(), "%d.%d.%d.%d%c", &a, &b, &c, &d, &tail) == 4 &&
         std::all_of(host.begin(), host.end(), [](char x) { return x == '.' || (x >= '0' && x <= '9'); });
}

}  // namespace

int run_viz_server(const std::string& model_path, const VizOptions& opt) {
  // SIGINT / SIGTERM are taken by sigwait below: blocked before any thread starts, so every
  // thread (backend workers, HTTP) inherits the mask.
  http::StopSignals signals;
  State s;
  if (!opt.graph_files.empty()) {
    auto g = graphs_from_files(opt.graph_files, &s.model_name);
    if (!g) {
      std::fprintf(stderr, "minfer viz: %s\n", g.error().message.c_str());
      return 1;
    }
    s.graphs = std::move(*g);
  } else if (int rc = load_model(s, model_path, opt)) {
    return rc;
  }

  httplib::Server web;
  web.new_task_queue = [] { return new httplib::ThreadPool(32); };
  web.set_payload_max_length(kMaxBody);
  // A fixed send buffer (accepted sockets inherit it): what a page does not read piles up in its
  // EventHub queue, where it is counted and reported as "lagged", instead of in a kernel buffer
  // that autotuning may grow to megabytes on one machine and not on another.
  // A page that stops reading (a background tab, a paused debugger) keeps its stream for 30 s
  // of blocked writes, not httplib's 5 s: when it reads again it gets "lagged" and goes on,
  // instead of finding the stream cut whenever a run outlasts 5 s.
  web.set_write_timeout(30, 0);
  web.set_socket_options([](socket_t sock) {
    httplib::default_socket_options(sock);
    const int sndbuf = 256 * 1024;
    setsockopt(sock, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
  });
  web.set_pre_routing_handler([&opt](const httplib::Request& req, httplib::Response& res) {
    if (allowed_host(req, opt.host)) return httplib::Server::HandlerResponse::Unhandled;
    reply_error(res, 403, "Host '" + req.get_header_value("Host") + "' is not this server's (a loopback name, an IP address or --host " +
                opt.host + ")", "permission_error");
    return httplib::Server::HandlerResponse::Handled;
  });
  // The page's files (assets/, embedded at build time), each with its type; "/" is index.html.
  static constexpr std::pair<const char*, const char*> kAssets[] = {
      {"index.html", "text/html; charset=utf-8"}, {"graph.js", "text/javascript; charset=utf-8"},
      {"operators.js", "text/javascript; charset=utf-8"}, {"app.js", "text/javascript; charset=utf-8"},
      {"style.css", "text/css; charset=utf-8"}};
  for (const auto& asset : kAssets) {
    const char *name = asset.first, *type = asset.second;
    web.Get(std::string("/") + name, [name, type](const httplib::Request&, httplib::Response& res) { serve_asset(res, name, type); });
  }
  web.Get("/", [](const httplib::Request&, httplib::Response& res) { serve_asset(res, "index.html", "text/html; charset=utf-8"); });
  web.Get("/favicon.ico", [](const httplib::Request&, httplib::Response& res) { res.status = 204; });
  web.Get("/viz/graph", [&s](const httplib::Request&, httplib::Response& res) { res.set_content(s.graphs, "application/json"); });
  web.Post("/viz/run", [&s](const httplib::Request& req, httplib::Response& res) { handle_run(s, req, res); });
  web.Get("/viz/events", [&s](const httplib::Request&, httplib::Response& res) { handle_events(s, res); });
  web.Get("/viz/trace", [](const httplib::Request& req, httplib::Response& res) { handle_trace(req, res); });
  web.Get("/viz/samples", [&opt](const httplib::Request&, httplib::Response& res) { handle_samples(opt.samples_dir, res); });
  web.Get(R"(/samples/(.+))", [&opt](const httplib::Request& req, httplib::Response& res) {
    handle_sample(opt.samples_dir, req.matches[1], res);
  });
  http::install_error_handlers(web, kMaxBody, http::reply_error);

  auto port = http::bind_listener(web, opt.host, opt.port);  // --port 0: the system picks
  if (!port) {
    std::fprintf(stderr, "minfer viz: %s\n", port.error().message.c_str());
    return 1;
  }
  std::thread server([&] { web.listen_after_bind(); });
  std::fprintf(stderr, "minfer viz: %s on http://%s:%d/\n", s.model_name.c_str(), opt.host.c_str(), *port);
  signals.wait();  // then: end a run at its next token, wake the event streams, exit
  s.stopping.store(true);
  signals.exit_on_next();  // a second signal ends the process at once
  s.hub.close_all();
  web.stop();
  server.join();
  return 0;
}

}  // namespace minfer::viz
