// Ollama's API beside the others, on the same port: POST /api/chat and /api/generate (NDJSON
// streams or one object; thinking, tool calls, format), /api/embed and /api/embeddings, /api/show;
// GET /api/tags and /api/ps (docs/server-api.md#ollama-api; /api/version and the store's routes:
// routes-ollama-store.cpp). Errors are Ollama's
// {"error": "..."}.
#include <sys/stat.h>

#include "server/api-ollama.h"
#include "server/reasoning.h"
#include "server/server-state.h"

namespace minfer::server {

using SysClock = std::chrono::system_clock;

json ollama_model_entry(const GgufFile& file, const std::string& model_id, const ModelIdentity& identity) {
  const std::string name = model_id.find(':') == std::string::npos ? model_id + ":latest" : model_id;
  // An Ollama store blob is named by its SHA-256 ("sha256-<hex>"); another file gets minfer's
  // identity of its weights (model_identity: file size and a hash of metadata and tensors).
  const std::string& path = file.path();
  const size_t at = path.rfind("sha256-");
  const std::string digest = at != std::string::npos && path.size() - at == 7 + 64
                                 ? path.substr(at + 7)
                                 : fmt::format("{:016x}{:016x}", identity.hash, identity.file_size);
  struct stat st{};
  const std::string modified_at = ollama_time(::stat(path.c_str(), &st) == 0 ? SysClock::from_time_t(st.st_mtime) : SysClock::now());
  return {{"name", name}, {"model", name}, {"modified_at", modified_at}, {"size", file.total_file_size()}, {"digest", digest},
          {"details", ollama_details(file)}};
}

json ollama_running_entry(json entry, std::optional<std::chrono::system_clock::time_point> expires_at, int n_ctx_slot) {
  // Without an expiry it is kept for good (Ollama's keep_alive -1 shows this date).
  entry["expires_at"] = expires_at ? ollama_time(*expires_at) : std::string("2318-01-01T00:00:00Z");
  entry["size_vram"] = 0;
  entry["context_length"] = n_ctx_slot;
  return entry;
}

namespace {

std::string model_name_or_empty(const json& body) {
  return body.is_object() && body.contains("model") && body["model"].is_string() ? body["model"].get<std::string>() : "";
}

// A request's body naming the served model; on failure the reply (400, 404) is set and nullopt
// returned. Older clients name the model "name".
std::optional<json> read_body(ServerState& s, const httplib::Request& req, httplib::Response& res) {
  auto body = s.parse_body(req, res, ollama_error_json);
  if (!body) return std::nullopt;
  if (body->is_object() && !body->contains("model") && body->contains("name")) (*body)["model"] = (*body)["name"];
  if (auto e = ollama_check_model(*body, s.pooled ? std::vector<std::string>{model_name_or_empty(*body)} : s.sp.aliases)) {
    s.reply_error(res, *e, ollama_error_json);
    return std::nullopt;
  }
  return body;
}

std::string model_name(const json& body) { return body["model"].get<std::string>(); }

// A chunk of a reply: /api/chat's {"message": {role, content, thinking, tool_calls}}, or
// /api/generate's {"response", "thinking"}.
json chunk(const std::string& model, bool chat_endpoint, const std::string& text, const std::string& thinking,
           const std::vector<toolcall::ToolCall>* calls) {
  json c = {{"model", model}, {"created_at", ollama_time(SysClock::now())}};
  if (chat_endpoint) {
    json msg = {{"role", "assistant"}, {"content", text}};
    if (!thinking.empty()) msg["thinking"] = thinking;
    if (calls && !calls->empty()) msg["tool_calls"] = ollama_tool_calls(*calls);
    c["message"] = std::move(msg);
  } else {
    c["response"] = text;
    if (!thinking.empty()) c["thinking"] = thinking;
  }
  c["done"] = false;
  return c;
}

// The last chunk: done, why, and the statistics; /api/generate's also the conversation's ids
// (`context`: the prompt's and the reply's), which a next request may send back.
json final_chunk(json c, const CompletionRequest& r, const DoneEvent& done, Clock::time_point t0, const std::vector<int32_t>* reply_ids) {
  c["done"] = true;
  c["done_reason"] = done.finish_reason;
  if (reply_ids) {
    std::vector<int32_t> ids = r.prompt;
    ids.insert(ids.end(), reply_ids->begin(), reply_ids->end());
    c["context"] = std::move(ids);
  }
  c.update(ollama_stats(static_cast<int>(r.prompt.size()), done.usage, Clock::now() - t0));
  return c;
}

// POST /api/chat and /api/generate.
void generate(ServerState& s, const httplib::Request& req, httplib::Response& res, bool chat_endpoint) {
  const auto t0 = Clock::now();
  auto body = read_body(s, req, res);
  if (!body) return;
  auto t = ollama_to_request(*body, chat_endpoint);
  if (!t) return s.reply_error(res, t.error(), ollama_error_json);
  const std::string model = model_name(*body);
  if (t->think && !thinking_tags(s.chat_template, "").any())
    return s.reply_error(res, invalid_param("think", fmt::format("\"{}\" does not support thinking", model)), ollama_error_json);
  if (t->load_only) {  // no messages, no prompt: Ollama loads the model (a pool's, keep_alive 0: unloads it) and says so
    json c = chunk(model, chat_endpoint, "", "", nullptr);
    c["done"] = true;
    c["done_reason"] = s.sleep->pooled() && t->keep_alive_s == 0.0 ? "unload" : "load";
    return s.reply_json(res, c);
  }
  ParseContext pc = s.parse_context();
  pc.api = Api::kOllama;
  const SamplerParams defaults = ollama_sampling_defaults(s.sp.sampling, s.sp.sampling_given);
  pc.sampling = &defaults;
  auto parsed = parse_completion_request(t->body, t->chat, pc);
  if (auto* e = std::get_if<ApiError>(&parsed)) return s.reply_error(res, *e, ollama_error_json);
  auto r = std::make_shared<CompletionRequest>(std::move(std::get<CompletionRequest>(parsed)));
  if (!t->context.empty())
    if (auto e = ollama_prepend_context(*r, t->context, *s.tok, s.n_ctx_slot)) return s.reply_error(res, *e, ollama_error_json);
  auto [rr, ch] = s.submit(r, res, ollama_error_json);
  if (!rr) return;
  // The reply read as OpenAI's chat reads it: reasoning, then text and tool calls (a raw
  // generation is text only).
  auto reader = [&s, r] {
    return r->chat ? make_reply_reader(s.sp.reasoning_format, s.chat_template, r->prompt_text, r->tools.get()) : ReplyReader{};
  };
  if (!r->stream) {
    s.reply_when_done(res, ch, t0, [&s, r, model, chat_endpoint, t0, reader](std::vector<JobEvent>& events) {
      std::vector<int32_t> ids;
      std::vector<TokenLogprob> lps;
      for (JobEvent& ev : events)
        if (const TextDelta* d = ev.delta()) {
          if (!chat_endpoint) ids.insert(ids.end(), d->tokens.begin(), d->tokens.end());  // generate's context only
          lps.insert(lps.end(), d->logprobs.begin(), d->logprobs.end());
        }
      const auto [text, error, done, index] = join_events(events);
      if (!error.empty()) return dump(ollama_error_json(server_error(error)));
      ReplyReader rd = reader();
      const ReplyReader::Out o = rd.feed(text, true);
      const bool called = rd.called();
      json c = chunk(model, chat_endpoint, o.text, o.thinking, called ? &rd.tools->result().calls : nullptr);
      if (r->logprobs) c["logprobs"] = chat_logprobs_json(*s.tok, lps);
      return dump(final_chunk(std::move(c), *r, done, t0, chat_endpoint ? nullptr : &ids));
    });
    return;
  }
  ServerState::stream_events(
      res, ch,
      [&s, r, ch, model, chat_endpoint, t0, reader](size_t, httplib::DataSink& sink) {
        auto send = [&](const json& j) {
          const std::string line = dump(j) + "\n";
          return sink.write(line.data(), line.size());
        };
        ReplyReader rd = reader();
        DoneEvent done;
        std::vector<int32_t> ids;
        const auto error = ServerState::pump_events(*ch, sink, [&](JobEvent& ev) {
          const TextDelta* d = ev.delta();  // none for progress: Ollama's stream has no place for it
          if (!d) return true;
          if (!chat_endpoint) ids.insert(ids.end(), d->tokens.begin(), d->tokens.end());  // generate's context only
          if (const auto* fin = ev.as<DoneEvent>()) done = *fin;
          const ReplyReader::Out o = rd.feed(d->text, ev.is<DoneEvent>());
          const bool lp = r->logprobs && !d->logprobs.empty();  // a chunk's tokens, even while their text is held back
          if (o.text.empty() && o.thinking.empty() && !lp) return true;  // tool calls go out whole, at the end
          json c = chunk(model, chat_endpoint, o.text, o.thinking, nullptr);
          if (lp) c["logprobs"] = chat_logprobs_json(*s.tok, d->logprobs);
          return send(c);
        });
        if (!error) return false;  // the client went away
        if (!error->empty()) {
          send(ollama_error_json(server_error(*error)));
        } else {
          if (rd.called()) send(chunk(model, chat_endpoint, "", "", &rd.tools->result().calls));
          send(final_chunk(chunk(model, chat_endpoint, "", "", nullptr), *r, done, t0, chat_endpoint ? nullptr : &ids));
        }
        sink.done();
        s.metrics.latency(std::chrono::duration<double>(Clock::now() - t0).count());
        return true;
      },
      "application/x-ndjson");
}

// POST /api/embed {"input": text or [texts]} -> {"embeddings": [[...]]}, and the older
// /api/embeddings {"prompt": text} -> {"embedding": [...]} (not normalized, as Ollama's).
void embed(ServerState& s, const httplib::Request& req, httplib::Response& res, bool legacy) {
  const auto t0 = Clock::now();
  auto body = read_body(s, req, res);
  if (!body) return;
  auto oai = ollama_to_embedding(*body, legacy);
  if (!oai) return s.reply_error(res, oai.error(), ollama_error_json);
  const std::string model = model_name(*body);
  if (oai->is_null()) {  // nothing to embed: Ollama's empty answer
    if (legacy) return s.reply_json(res, {{"embedding", json::array()}});
    return s.reply_json(res, {{"model", model}, {"embeddings", json::array()}, {"total_duration", 0}, {"load_duration", 0},
                              {"prompt_eval_count", 0}});
  }
  if (legacy) (*oai)["embd_normalize"] = -1;
  s.embed(*oai, res, true, ollama_error_json, [model, legacy, t0](const EmbeddingRequest&, std::vector<DoneEvent::Embedding>& out) {
    if (legacy) return json{{"embedding", out.empty() || out[0].rows.empty() ? json::array() : json(out[0].rows[0])}};
    json vectors = json::array();
    int n_tokens = 0;
    for (const DoneEvent::Embedding& e : out) {
      vectors.push_back(e.rows.empty() ? json::array() : json(e.rows[0]));
      n_tokens += e.n_tokens;
    }
    return json{{"model", model}, {"embeddings", std::move(vectors)},
                {"total_duration", std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count()},
                {"load_duration", 0}, {"prompt_eval_count", n_tokens}};
  });
}

// POST /api/show: the model's details, metadata, template and the server's sampling settings.
void show(ServerState& s, const json& m, const httplib::Request& req, httplib::Response& res) {
  auto body = read_body(s, req, res);
  if (!body) return;
  const auto v = body->find("verbose");
  if (v != body->end() && !v->is_null() && !v->is_boolean())
    return s.reply_error(res, invalid_param("verbose", "'verbose' must be a boolean"), ollama_error_json);
  const bool verbose = v != body->end() && v->is_boolean() && v->get<bool>();
  const SamplerParams p = ollama_sampling_defaults(s.sp.sampling, s.sp.sampling_given);
  // Modelfile PARAMETER lines of the settings a request starts from.
  const std::string parameters = fmt::format("temperature {}\ntop_k {}\ntop_p {}\nmin_p {}\nrepeat_penalty {}\nrepeat_last_n {}",
                                             p.temp, p.top_k, p.top_p, p.min_p, p.repeat_penalty, p.repeat_last_n);
  json capabilities = json::array({"completion", "tools"});
  if (thinking_tags(s.chat_template, "").any()) capabilities.push_back("thinking");
  if (s.sp.embeddings_refusal.empty()) capabilities.push_back("embedding");
  s.reply_json(res, {{"modelfile", fmt::format("# minfer serves {}\nFROM {}\n", m["name"].get<std::string>(), s.sp.model_path)},
                     {"parameters", parameters},
                     {"template", s.chat_template},
                     {"details", m["details"]},
                     {"model_info", ollama_model_info(s.model->file(), verbose)},
                     {"capabilities", capabilities},
                     {"modified_at", m["modified_at"]}});
}

// GET /api/ps: the model while it is loaded (none while it sleeps), kept until
// --sleep-idle-seconds passes unused; without it, for good (Ollama's keep_alive -1).
json running(const ServerState& s, const json& m) {
  json models = json::array();
  if (!s.sleep->sleeping()) {
    std::optional<SysClock::time_point> expires;
    if (s.sp.sleep_idle_s > 0) expires = SysClock::now() + std::chrono::seconds(static_cast<int64_t>(s.sp.sleep_idle_s));
    models.push_back(ollama_running_entry(m, expires, s.n_ctx_slot));
  }
  return {{"models", models}};
}

}  // namespace

void add_ollama_routes(httplib::Server& http, ServerState& s) {
  // Taken at start, so that /api/tags and /api/ps answer while the model sleeps (--sleep-idle-seconds).
  auto m = std::make_shared<const json>(ollama_model_entry(s.model->file(), s.model_id, s.identity));
  s.post(http, "/api/chat", [&s](const httplib::Request& q, httplib::Response& r) { generate(s, q, r, true); });
  s.post(http, "/api/generate", [&s](const httplib::Request& q, httplib::Response& r) { generate(s, q, r, false); });
  s.post(http, "/api/embed", [&s](const httplib::Request& q, httplib::Response& r) { embed(s, q, r, false); });
  s.post(http, "/api/embeddings", [&s](const httplib::Request& q, httplib::Response& r) { embed(s, q, r, true); });
  s.post(http, "/api/show", [&s, m](const httplib::Request& q, httplib::Response& r) { show(s, *m, q, r); });
  http.Get("/api/tags", [&s, m](const httplib::Request&, httplib::Response& r) { s.reply_json(r, {{"models", json::array({*m})}}); });
  http.Get("/api/ps", [&s, m](const httplib::Request&, httplib::Response& r) { s.reply_json(r, running(s, *m)); });
}

}  // namespace minfer::server
