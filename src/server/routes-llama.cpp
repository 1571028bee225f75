// llama-server's native endpoints (docs/server-api.md#llama-server-endpoints): POST /completion
// (also /completions), /infill, /tokenize, /detokenize, /apply-template, /chat/completions/input_tokens,
// GET /props, /slots, /health, /models. Field names, defaults and error shapes are
// llama-server's, so its clients and test suite work against minfer.
#include <algorithm>
#include <cmath>
#include <ctime>
#include <set>

#include "api/fields-json.h"
#include "core/utf8.h"
#include "http/sse.h"
#include "server/api-infill.h"
#include "server/slot-files.h"
#include "server/server-state.h"
#include "template/chat.h"

namespace minfer::server {
namespace {

// The longest prefix of s that ends on a whole UTF-8 character.
std::string utf8_prefix(std::string s) {
  s.resize(utf8_valid_len(s));
  return s;
}

// completion_probabilities: per generated token its id, text, bytes, logprob and alternatives;
// with post_sampling_probs, "prob" and "top_probs" (after the sampler's chain) instead.
json completion_probabilities(const Tokenizer& tok, const std::vector<TokenLogprob>& lps) {
  json out = json::array();
  for (const TokenLogprob& lp : lps) {
    const char* value = lp.post_sampling ? "prob" : "logprob";
    const auto number = [&](float v) { return lp.post_sampling ? std::exp(v) : v; };
    const std::string piece(tok.piece(lp.id));
    json top = json::array();
    for (const auto& [id, v] : lp.top) {
      const std::string t(tok.piece(id));
      top.push_back({{"id", id}, {"token", utf8_prefix(t)}, {"bytes", bytes_array(t)}, {value, number(v)}});
    }
    out.push_back({{"id", lp.id}, {"token", utf8_prefix(piece)}, {"bytes", bytes_array(piece)}, {value, number(lp.logprob)},
                   {lp.post_sampling ? "top_probs" : "top_logprobs", top}});
  }
  return out;
}

json generation_settings(const CompletionRequest& r) {
  json g = api::sampling_json(r.sampling);
  g["n_predict"] = r.n_predict;
  g["max_tokens"] = r.n_predict;
  g["stop"] = r.stop;
  g["ignore_eos"] = r.ignore_eos;
  g["stream"] = r.stream;
  g["n_probs"] = r.n_probs;
  g["post_sampling_probs"] = r.post_sampling_probs;
  g["timings_per_token"] = r.timings_per_token;
  g["cache_prompt"] = r.cache_prompt;
  return g;
}

// response_fields ["content", "generation_settings/n_predict"]: only those, as flat keys.
json pick_fields(const json& full, const std::vector<std::string>& fields) {
  if (fields.empty()) return full;
  json out = json::object();
  for (const std::string& f : fields) {
    const json* at = &full;
    size_t start = 0;
    for (size_t i = 0; i <= f.size() && at; ++i) {
      if (i < f.size() && f[i] != '/') continue;
      const std::string key = f.substr(start, i - start);
      start = i + 1;
      at = at->is_object() && at->contains(key) ? &(*at)[key] : nullptr;
    }
    if (at) out[f] = *at;
  }
  return out;
}

// POST /completion: {"prompt": text | ids | [ids and text] | {"prompt_string"} | an array of
// those (one completion each: the reply is then an array), "n_predict", sampling fields,
// "cache_prompt", "id_slot", "n_probs", "post_sampling_probs", "return_tokens", "timings_per_token",
// "response_fields", "stream"}.
//
// POST /infill: the same with the prompt made from "input_prefix", "input_suffix", "input_extra"
// and "prompt" (api-infill.h).
void completion(ServerState& s, const httplib::Request& req, httplib::Response& res, bool infill) {
  const auto t0 = Clock::now();
  auto body = s.parse_body(req, res);
  if (!body) return;
  std::vector<std::string> fields;
  if (body->is_object() && body->contains("response_fields")) {
    const json& f = (*body)["response_fields"];
    if (!f.is_array() || !std::all_of(f.begin(), f.end(), [](const json& x) { return x.is_string(); }))
      return s.reply_error(res, invalid_param("response_fields", "'response_fields' must be an array of field names"));
    for (const json& x : f) fields.push_back(x.get<std::string>());
  }
  if (infill) {
    if (!body->is_object()) return s.reply_error(res, invalid_param("", "the request body must be a JSON object"));
    InfillLimits lim{.n_batch = s.engine->params().n_batch, .n_ctx = s.engine->n_ctx_slot(), .n_predict = s.sp.default_n_predict,
                     .spm = s.sp.spm_infill};
    for (const char* k : {"max_tokens", "max_completion_tokens", "n_predict"})  // the order the request is read in
      if (const auto it = body->find(k); it != body->end() && it->is_number_integer()) {
        lim.n_predict = static_cast<int>(std::clamp<int64_t>(it->get<int64_t>(), -1, 1 << 30));
        break;
      }
    auto ids = infill_prompt(*body, *s.tok, lim);
    if (auto* e = std::get_if<ApiError>(&ids)) return s.reply_error(res, *e);
    (*body)["prompt"] = std::get<std::vector<int32_t>>(ids);
  }
  auto [r, ch] = s.accept(*body, res, false, true);
  if (!r) return;
  // Every choice's text, tokens, probabilities and final event, gathered from the job events.
  struct Choices {
    std::vector<std::string> content;
    std::vector<std::vector<int32_t>> tokens;
    std::vector<std::vector<TokenLogprob>> probs;
    std::vector<DoneEvent> done;
    std::string error;
    bool keep_probs = true;  // a stream sends each event's probabilities as they come
    explicit Choices(size_t n) : content(n), tokens(n), probs(n), done(n) {}
    void add(const JobEvent& ev) {
      if (const auto* e = ev.as<ErrorEvent>()) error = e->message;
      const TextDelta* d = ev.delta();
      if (!d) return;
      const size_t k = static_cast<size_t>(ev.index);
      content[k] += d->text;
      tokens[k].insert(tokens[k].end(), d->tokens.begin(), d->tokens.end());
      if (keep_probs) probs[k].insert(probs[k].end(), d->logprobs.begin(), d->logprobs.end());
      if (const auto* fin = ev.as<DoneEvent>()) done[k] = *fin;
    }
  };
  const size_t n = static_cast<size_t>(r->n_choices());
  auto final_object = [&s, r, fields](const Choices& c, size_t k) {
    const int p = static_cast<int>(k) / r->n;
    const DoneEvent& done = c.done[k];
    json fin = {{"index", k},
                {"content", r->stream ? std::string() : c.content[k]},
                {"tokens", r->stream || !r->return_tokens ? json::array() : json(c.tokens[k])},
                {"id_slot", done.slot},
                {"stop", true},
                {"model", s.model_id},
                {"tokens_predicted", done.usage.n_gen},
                {"tokens_evaluated", static_cast<int>(r->prompt_ids(p).size())},
                {"generation_settings", generation_settings(*r)},
                {"prompt", r->prompt_string(p)},
                {"has_new_line", c.content[k].find('\n') != std::string::npos},
                {"truncated", done.truncated},
                {"stop_type", done.stop_type.empty() ? "limit" : done.stop_type},
                {"stopping_word", done.stop_word},
                {"tokens_cached", done.n_kv},
                {"timings", Timings::of(done.usage)}};
    if (r->n_probs > 0 && !r->stream) fin["completion_probabilities"] = completion_probabilities(*s.tok, c.probs[k]);
    if (s.sp.verbose || r->verbose) fin["__verbose"] = {{"prompt", r->prompt_string(p)}, {"n_prompt_tokens", r->prompt_ids(p).size()}};
    return pick_fields(fin, fields);
  };
  if (!r->stream) {  // one object (an array for several prompts or n > 1) once every choice ended
    return s.reply_when_done(res, ch, t0, [n, final_object](std::vector<JobEvent>& events) {
      Choices c(n);
      for (const JobEvent& ev : events) c.add(ev);
      if (!c.error.empty()) return dump(error_json(server_error(c.error)));
      json all = json::array();
      for (size_t k = 0; k < n; ++k) all.push_back(final_object(c, k));
      return dump(n == 1 ? all[0] : all);
    });
  }
  ServerState::stream_events(res, ch,
      [&s, r, ch, t0, n, final_object](size_t, httplib::DataSink& sink) {
        http::SseWriter sse(sink);
        auto send = [&](const json& j) { return sse.send(dump(j)); };
        Choices c(n);
        c.keep_probs = false;
        const auto error = ServerState::pump_events(*ch, sink, [&](JobEvent& ev) {
          c.add(ev);
          bool ok = true;
          if (const auto* p = ev.as<ProgressEvent>()) {  // return_progress
            json j = {{"index", ev.index}, {"content", ""}, {"tokens", json::array()}, {"stop", false}};
            j.update(progress_json(*p));
            ok = send(j);
          }
          // Text (a done event's last bytes too), then the done event's final object.
          const TextDelta* d = ev.delta();
          const DoneEvent* done = ev.as<DoneEvent>();
          if (ok && d && (!d->text.empty() || !d->tokens.empty())) {
            const size_t k = static_cast<size_t>(ev.index);
            // A text event's id_slot is -1: only the done event names the slot.
            json t = {{"index", k}, {"content", d->text}, {"tokens", d->tokens}, {"stop", false}, {"id_slot", done ? done->slot : -1},
                      {"tokens_predicted", c.tokens[k].size()},
                      {"tokens_evaluated", static_cast<int>(r->prompt_ids(static_cast<int>(k) / r->n).size())}};
            if (r->n_probs > 0) t["completion_probabilities"] = completion_probabilities(*s.tok, d->logprobs);
            if (r->timings_per_token) t["timings"] = Timings::of(*ev.usage());
            ok = send(t);
          }
          if (ok && done) ok = send(final_object(c, static_cast<size_t>(ev.index)));
          return ok;
        });
        if (!error) return false;  // the client went away
        if (!error->empty()) sse.add(dump(error_json(server_error(*error))));
        if (!sse.done()) return false;
        s.metrics.latency(std::chrono::duration<double>(Clock::now() - t0).count());
        return true;
      });
}

// POST /tokenize {"content", "add_special" (false), "parse_special" (true), "with_pieces" (false)}
// -> {"tokens": [ids]} or [{"id", "piece"}] (a piece that is not whole UTF-8: its bytes).
void tokenize(ServerState& s, const httplib::Request& req, httplib::Response& res) {
  auto body = s.parse_body(req, res);
  if (!body) return;
  json out = json::array();
  if (body->contains("content")) {
    const json& c = (*body)["content"];
    auto flag = [&](const char* name, bool def) -> std::optional<bool> {
      if (!body->contains(name) || (*body)[name].is_null()) return def;
      if (!(*body)[name].is_boolean()) return std::nullopt;
      return (*body)[name].get<bool>();
    };
    const auto add_special = flag("add_special", false), parse_special = flag("parse_special", true),
               with_pieces = flag("with_pieces", false);
    if (!add_special || !parse_special || !with_pieces)
      return s.reply_error(res, invalid_param("", "'add_special', 'parse_special' and 'with_pieces' must be booleans"));
    std::vector<int32_t> ids;
    if (c.is_string()) {
      ids = s.tok->encode(c.get<std::string>(), *add_special && s.tok->add_bos(), *parse_special);
    } else if (c.is_array()) {  // llama-server's mixed form: ids and strings
      for (const json& t : c) {
        if (t.is_string()) {
          auto more = s.tok->encode(t.get<std::string>(), *add_special && s.tok->add_bos() && ids.empty(), *parse_special);
          ids.insert(ids.end(), more.begin(), more.end());
        } else if (t.is_number_integer() && t.get<int64_t>() >= 0 && t.get<int64_t>() < s.tok->n_vocab()) {
          ids.push_back(t.get<int32_t>());
        } else {
          return s.reply_error(res, invalid_param("content", fmt::format("'content' item {} is neither text nor a token id", t.dump())));
        }
      }
    } else {
      return s.reply_error(res, invalid_param("content", "'content' must be a string or an array of token ids and strings"));
    }
    for (int32_t id : ids) {
      if (!*with_pieces) {
        out.push_back(id);
        continue;
      }
      const std::string piece(s.tok->piece(id, /*render_special=*/true));
      out.push_back({{"id", id}, {"piece", utf8_valid(piece) ? json(piece) : bytes_array(piece)}});
    }
  }
  s.reply_json(res, {{"tokens", out}});
}

// POST /detokenize {"tokens": [ids]} -> {"content": text}.
void detokenize(ServerState& s, const httplib::Request& req, httplib::Response& res) {
  auto body = s.parse_body(req, res);
  if (!body) return;
  std::vector<int32_t> ids;
  if (body->contains("tokens")) {
    const json& t = (*body)["tokens"];
    if (!t.is_array()) return s.reply_error(res, invalid_param("tokens", "'tokens' must be an array of token ids"));
    for (const json& x : t) {
      if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() >= s.tok->n_vocab())
        return s.reply_error(res, invalid_param("tokens", fmt::format("'tokens' item {} is not a token id in [0, {})", x.dump(), s.tok->n_vocab())));
      ids.push_back(x.get<int32_t>());
    }
  }
  s.reply_json(res, {{"content", s.tok->decode(ids)}});
}

// POST /apply-template {"messages", "tools", "add_generation_prompt" (true), "chat_template_kwargs"}
// -> {"prompt": the rendered text}, exactly what a chat completion would prefill.
void apply_template(ServerState& s, const httplib::Request& req, httplib::Response& res) {
  auto body = s.parse_body(req, res);
  if (!body) return;
  if (!body->is_object()) return s.reply_error(res, invalid_param("", "the request body must be a JSON object"));
  bool add_gen = true;
  if (body->contains("add_generation_prompt") && !(*body)["add_generation_prompt"].is_null()) {
    if (!(*body)["add_generation_prompt"].is_boolean())
      return s.reply_error(res, invalid_param("add_generation_prompt", "'add_generation_prompt' must be a boolean"));
    add_gen = (*body)["add_generation_prompt"].get<bool>();
  }
  auto rc = render_chat_request(*body, s.parse_context(), add_gen, false);
  if (auto* e = std::get_if<ApiError>(&rc)) return s.reply_error(res, *e);
  s.reply_json(res, {{"prompt", std::get<RenderedChat>(rc).text}});
}

// POST /chat/completions/input_tokens: the prompt tokens a chat request would take.
void count_chat_tokens(ServerState& s, const httplib::Request& req, httplib::Response& res) {
  auto body = s.parse_body(req, res);
  if (!body) return;
  if (!body->is_object()) return s.reply_error(res, invalid_param("", "the request body must be a JSON object"));
  auto rc = render_chat_request(*body, s.parse_context(), true, false);
  if (auto* e = std::get_if<ApiError>(&rc)) return s.reply_error(res, *e);
  s.reply_json(res, {{"object", "response.input_tokens"}, {"input_tokens", std::get<RenderedChat>(rc).tokens.size()}});
}

json props(const ServerState& s) {
  const Tokenizer& tok = *s.tok;
  return {{"default_generation_settings", {{"params", api::sampling_json(s.sp.sampling)}, {"n_ctx", s.n_ctx_slot}}},
          {"total_slots", s.n_slots},
          {"model_alias", s.model_id},
          {"model_path", s.sp.model_path},
          {"modalities", {{"vision", false}, {"audio", false}, {"video", false}}},
          {"endpoint_slots", s.sp.endpoint_slots},
          {"endpoint_props", s.sp.endpoint_props},
          {"endpoint_metrics", s.sp.endpoint_metrics},
          {"ui", s.sp.webui},
          {"webui", s.sp.webui},
          {"chat_template", s.chat_template},
          {"bos_token", tok.bos_id() >= 0 ? std::string(tok.token_text(tok.bos_id())) : std::string()},
          {"eos_token", tok.eos_id() >= 0 ? std::string(tok.token_text(tok.eos_id())) : std::string()},
          {"build_info", "minfer " MINFER_SERVER_VERSION},
          {"is_sleeping", s.sleep->sleeping()}};
}

// GET /slots (501 with --no-slots): what every slot holds and does; ?fail_on_no_slot=1 answers
// 503 when none is idle.
void slots(ServerState& s, const httplib::Request& req, httplib::Response& res) {
  if (!s.sp.endpoint_slots)
    return s.reply_error(res, {501, "This server does not support slots endpoint. Start it with `--slots`", "not_supported_error", "", ""});
  json out = json::array();
  int n_idle = 0;
  for (const Engine::SlotInfo& i : s.engine->slots()) {
    n_idle += i.processing ? 0 : 1;
    const int n_remain = i.processing && i.n_predict >= 0 ? std::max(i.n_predict - i.n_decoded, 0) : -1;
    out.push_back({{"id", i.id},
                   {"n_ctx", s.engine->n_ctx_slot()},
                   {"is_processing", i.processing},
                   {"n_cached", i.n_cached},
                   {"n_prompt_tokens", i.n_prompt},
                   {"speculative", s.sp.spec.has_value()},
                   {"next_token", json::array({{{"has_next_token", i.processing}, {"n_remain", n_remain},
                                                {"n_decoded", i.processing ? i.n_decoded : 0}}})}});
  }
  if (req.has_param("fail_on_no_slot") && n_idle == 0)
    return s.reply_error(res, {503, "no slot available", "unavailable_error", "", ""});
  s.reply_json(res, out);
}

json models(const ServerState& s) {
  const std::set<std::string> aliases(s.sp.aliases.begin(), s.sp.aliases.end());
  json m = {{"id", s.model_id}, {"object", "model"}, {"created", s.created}, {"owned_by", "minfer"},
            {"aliases", json(aliases)}, {"tags", s.sp.tags}};
  // llama-server's own list ("models") beside OpenAI's ("data").
  json native = {{"name", s.model_id}, {"model", s.model_id}, {"modified_at", ""}, {"size", ""}, {"digest", ""},
                 {"type", "model"}, {"description", ""}, {"tags", s.sp.tags}, {"capabilities", json::array({"completion"})}};
  return {{"object", "list"}, {"data", json::array({m})}, {"models", json::array({native})}};
}

}  // namespace

void add_llama_routes(httplib::Server& http, ServerState& s) {
  s.post(http, "/completion", [&s](const httplib::Request& q, httplib::Response& r) { completion(s, q, r, false); });
  s.post(http, "/completions", [&s](const httplib::Request& q, httplib::Response& r) { completion(s, q, r, false); });
  s.post(http, "/infill", [&s](const httplib::Request& q, httplib::Response& r) { completion(s, q, r, true); });
  s.post(http, "/tokenize", [&s](const httplib::Request& q, httplib::Response& r) { tokenize(s, q, r); });
  s.post(http, "/detokenize", [&s](const httplib::Request& q, httplib::Response& r) { detokenize(s, q, r); });
  s.post(http, "/apply-template", [&s](const httplib::Request& q, httplib::Response& r) { apply_template(s, q, r); });
  s.post(http, "/chat/completions/input_tokens", [&s](const httplib::Request& q, httplib::Response& r) { count_chat_tokens(s, q, r); });
  s.post(http, "/v1/chat/completions/input_tokens", [&s](const httplib::Request& q, httplib::Response& r) { count_chat_tokens(s, q, r); });
  s.get(http, "/props", [&s](const httplib::Request&, httplib::Response& r) { s.reply_json(r, props(s)); });
  s.post(http, "/props", [&s](const httplib::Request&, httplib::Response& r) {
    if (!s.sp.endpoint_props)
      return s.reply_error(r, {501, "This server does not support changing global properties. Start it with `--props`",
                               "not_supported_error", "", ""});
    s.reply_json(r, {{"success", true}});
  });
  s.get(http, "/slots", [&s](const httplib::Request& q, httplib::Response& r) { slots(s, q, r); });
  // POST /slots/ID?action=save|restore|erase {"filename"}: slot files (slot-files.h). A pool
  // routes /slots/ID to post_routes["/slots/:id"] (its own pattern is ".*": the id is read from
  // the path).
  auto slot_file = [&s](const httplib::Request& q, httplib::Response& r) {
    json body = json::object();
    if (!q.body.empty()) {
      auto b = s.parse_body(q, r);
      if (!b) return;
      body = std::move(*b);
    }
    int id = -1;
    try {
      id = std::stoi(q.path.substr(q.path.rfind('/') + 1));
    } catch (const std::exception&) {
    }
    auto out = slot_action(*s.engine, s.identity, s.sp.slot_save_path, id, q.get_param_value("action"), body);
    if (auto* e = std::get_if<ApiError>(&out)) return s.reply_error(r, *e);
    s.reply_json(r, std::get<json>(out));
  };
  s.post_routes["/slots/:id"] = slot_file;
  http.Post(R"(/slots/(\d+))", slot_file);
  auto list = [&s](const httplib::Request&, httplib::Response& r) { s.reply_json(r, models(s)); };
  http.Get("/v1/models", list);
  http.Get("/models", list);
}

}  // namespace minfer::server
