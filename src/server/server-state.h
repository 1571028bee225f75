// What the route files of the HTTP server share (internal to src/server): the model, the engine,
// the parameters, the metrics, and the steps every completion-like request goes through
// (parse, queue, collect events). Each route file registers its endpoints:
//
//   add_openai_routes(http, state);      // routes-openai.cpp: /v1/chat/completions, /v1/completions
//   add_llama_routes(http, state);       // routes-llama.cpp: /completion, /tokenize, /props, /slots ...
//   add_anthropic_routes(http, state);   // routes-anthropic.cpp: /v1/messages
//   add_responses_routes(http, state);   // routes-responses.cpp: /v1/responses
//   add_embedding_routes(http, state);   // routes-embeddings.cpp: /v1/embeddings, /embedding(s)
//   add_ollama_routes(http, state);      // routes-ollama.cpp: /api/chat, /api/generate, /api/tags ...
//   add_vertex_routes(http, state);      // routes-vertex.cpp: Vertex AI's /predict (after the others)
#pragma once

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "models/model.h"
#include "runtime/kv-file.h"
#include "server/api-embeddings.h"
#include "server/api.h"
#include "server/engine.h"
#include "server/http-server.h"
#include "server/metrics.h"
#include "server/model-sleep.h"
#include "tokenizer/tokenizer.h"
#include "toolcall/tools.h"

namespace minfer::server {

using Clock = std::chrono::steady_clock;

std::string dump(const json& j);              // compact, invalid UTF-8 replaced
std::string random_id(const char* prefix);    // "chatcmpl-" + 24 alphanumerics

// llama-server's "timings" of a request (choice 0; draft counts over all choices), from its
// done events, or of one text or done event so far (timings_per_token).
struct Timings {
  int prompt_n = 0, cache_n = 0, predicted_n = 0;
  double prompt_ms = 0, predicted_ms = 0;
  int64_t draft_n = 0, draft_n_accepted = 0;
  void add(int index, const JobUsage& done);  // the prompt and generation figures from choice 0's
  json to_json() const;
  static json of(const JobUsage& u) {  // one event's own timings, whatever its choice
    Timings t;
    t.set(u);
    t.draft_n = u.n_draft;
    t.draft_n_accepted = u.n_draft_accepted;
    return t.to_json();
  }

 private:
  void set(const JobUsage& u);  // the prompt and generation figures of u
};

// A ProgressEvent as llama-server streams it: {"prompt_progress": {total, cache, processed,
// time_ms}, "timings": {...}} (merged into the route's chunk).
json progress_json(const ProgressEvent& p);

// The events of a one-choice request joined: its text, its done event and that event's choice,
// and the error text of an error event ("" for none). Anthropic's and the Responses API's
// non-streamed replies.
struct JoinedReply {
  std::string text, error;
  DoneEvent done;
  int index = 0;
};
JoinedReply join_events(std::vector<JobEvent>& events);

struct ServerState {
  // The model and its engine: null while asleep (--sleep-idle-seconds); a request that needs
  // them holds sleep->acquire() from routing to its last byte (http-server.cpp).
  std::shared_ptr<const Model> model;
  const Tokenizer* tok = nullptr;
  ServerParams sp;
  std::unique_ptr<Engine> engine;
  std::unique_ptr<ModelSleep> sleep;
  int n_slots = 0, n_ctx_slot = 0;  // the engine's, for the endpoints that answer while asleep
  ServerMetrics metrics;
  std::atomic<bool> draining{false};
  // Requests between routing and their last byte (the logger runs after it): with none, the
  // connections still open at shutdown only wait for a next request.
  std::atomic<int> in_flight{0};
  std::string chat_template;               // --chat-template(-file), or the model's
  toolcall::TemplateTools template_tools;  // what that template does with tools (probed at start)
  int64_t created = 0;
  std::string model_id;                    // the first alias, sorted (llama-server's rule)
  bool pooled = false;                     // one model of a pool: its requests' names matched there (aliases a pull added too)
  ModelIdentity identity;                  // of the weights, for slot files

  // The POST routes of plain paths, as registered with post(): Vertex AI's /predict runs its
  // instances through them, and a pool (model-pool.h) each request for this model.
  std::map<std::string, httplib::Server::Handler> post_routes;
  void post(httplib::Server& http, const std::string& path, httplib::Server::Handler h) {
    post_routes[path] = h;
    http.Post(path, std::move(h));
  }
  // The GET routes that answer for one model (/props, /slots), as registered with get(): a pool
  // runs them for the model its ?model= names (llama-server's router).
  std::map<std::string, httplib::Server::Handler> get_routes;
  void get(httplib::Server& http, const std::string& path, httplib::Server::Handler h) {
    get_routes[path] = h;
    http.Get(path, std::move(h));
  }

  ParseContext parse_context() const;
  // The body of an error reply: OpenAI's error_json, or Anthropic's anthropic_error_json on /v1/messages.
  using ErrorShape = json (*)(const ApiError&);
  void reply_error(httplib::Response& res, const ApiError& e, ErrorShape shape = error_json) const;
  void reply_json(httplib::Response& res, const json& j, int status = 200) const;
  // Parses a JSON body; on failure the 400 reply is set and nullopt returned.
  std::optional<json> parse_body(const httplib::Request& req, httplib::Response& res, ErrorShape shape = error_json) const;

  // A parsed completion request and the channel its jobs' events come on.
  struct Accepted {
    std::shared_ptr<CompletionRequest> r;
    std::shared_ptr<EventChannel> ch;
  };
  // Queues the request's jobs (n choices); on refusal (503: busy or draining) the reply is set
  // and r is null.
  Accepted submit(std::shared_ptr<CompletionRequest> r, httplib::Response& res, ErrorShape shape = error_json);
  // Queues jobs; on refusal (503: busy or draining) the reply is set and false returned.
  bool queue(std::vector<Job> jobs, httplib::Response& res, ErrorShape shape = error_json);
  // parse_completion_request + submit.
  Accepted accept(const httplib::Request& req, httplib::Response& res, bool chat, bool one_choice);
  // A parsed body, its fields named as `api` names them (the Responses route's translation).
  Accepted accept(const json& body, httplib::Response& res, bool chat, bool one_choice, Api api = Api::kJson);
  // A non-streamed reply to jobs on `ch`. Jobs that end within kHeaderGrace (or, once the
  // server drains, at all) get a plain reply with its own status (500 when an error event came). Past that the status line (200) goes
  // out and the body follows chunked, with a space (JSON whitespace, ignored by every parser)
  // written every 200 ms while they run, so a client that went away makes that write fail,
  // which cancels them and frees their slots (cpp-httplib 0.11 has no other way to see a
  // closed connection); an error then arrives as the body of that 200. An error event cancels
  // the request's other jobs. Once every job has ended, body(events) makes the reply from all
  // their events in order (error events included).
  static constexpr std::chrono::milliseconds kHeaderGrace{1000};
  void reply_when_done(httplib::Response& res, std::shared_ptr<EventChannel> ch, Clock::time_point t0,
                       std::function<std::string(std::vector<JobEvent>& events)> body);
  // The loop of every streamed reply: each event of `ch` until every job ended goes to
  // on_event (which returns false when a write failed), except error events, whose text is
  // kept. Returns that error text ("" for none), or nullopt when the client went away (a
  // failed write, or the socket no longer writable): the jobs are then cancelled.
  static std::optional<std::string> pump_events(EventChannel& ch, httplib::DataSink& sink,
                                                const std::function<bool(JobEvent& ev)>& on_event);
  // A server-sent-events reply (every stream's; Ollama's: content_type application/x-ndjson): no
  // caching, nginx passes the chunks through as they come (X-Accel-Buffering), `body` writes
  // them; a reply cut short cancels ch's jobs.
  static void stream_events(httplib::Response& res, std::shared_ptr<EventChannel> ch, httplib::ContentProviderWithoutLength body,
                            const char* content_type = "text/event-stream");
  // An embedding request (OpenAI's body, or llama-server's with oai false) run over the slots;
  // reply(r, vectors) makes the body once every input has its vectors (out[i]: input i's).
  void embed(const json& body, httplib::Response& res, bool oai, ErrorShape shape,
             std::function<json(const EmbeddingRequest& r, std::vector<DoneEvent::Embedding>& out)> reply);
  // The last bytes of a reply; the request's latency is recorded.
  bool finish_body(httplib::DataSink& sink, const std::string& reply, Clock::time_point t0);
};

// Sets s up for one model (http-server.cpp): its chat template and what that does with tools,
// its id (the first alias, sorted), identity and engine; the error says why the engine could not
// start. The routes that need the model are add_model_routes' (the openai, llama, anthropic,
// responses, embedding and ollama ones); s.sleep is the caller's to make once they are set up.
std::optional<std::string> init_state(ServerState& s, std::shared_ptr<const Model> model, const Tokenizer& tok,
                                      const EngineParams& ep, const ServerParams& sp, const EngineDraft& draft);
void add_model_routes(httplib::Server& http, ServerState& s);

// A model as Ollama's /api/tags lists it (routes-ollama.cpp): its name with Ollama's tag
// (":latest" when it has none), size, digest, modified_at and details; and as /api/ps lists it
// once loaded (expires_at: nullopt for good).
json ollama_model_entry(const GgufFile& file, const std::string& model_id, const ModelIdentity& identity);
json ollama_running_entry(json entry, std::optional<std::chrono::system_clock::time_point> expires_at, int n_ctx_slot);

void add_openai_routes(httplib::Server& http, ServerState& s);     // routes-openai.cpp
void add_llama_routes(httplib::Server& http, ServerState& s);      // routes-llama.cpp
void add_anthropic_routes(httplib::Server& http, ServerState& s);  // routes-anthropic.cpp
void add_responses_routes(httplib::Server& http, ServerState& s);  // routes-responses.cpp
void add_embedding_routes(httplib::Server& http, ServerState& s);  // routes-embeddings.cpp
void add_ollama_routes(httplib::Server& http, ServerState& s);     // routes-ollama.cpp
void add_webui_routes(httplib::Server& http, ServerState& s);      // webui.cpp
// routes-ollama-store.cpp: GET /api/version; /api/pull, /api/delete, /api/copy over a pool's
// store (pool null, one model: 501).
class ModelPool;
struct ModelStore;
void add_ollama_server_routes(httplib::Server& http, ServerState& front, ModelPool* pool, const ModelStore* store);
void add_vertex_routes(httplib::Server& http, ServerState& s);     // routes-vertex.cpp (with sp.vertex_predict_route)

}  // namespace minfer::server
