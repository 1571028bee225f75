#include "server/server-state.h"

#include <random>

#include "http/errors.h"
#include "http/sse.h"

namespace minfer::server {

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string random_id(const char* prefix) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  static const char* kAlnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::string s = prefix;
  for (int i = 0; i < 24; ++i) s += kAlnum[rng() % 62];
  return s;
}

void Timings::set(const JobUsage& u) {
  prompt_n = u.n_prompt - u.n_cached;
  cache_n = u.n_cached;
  predicted_n = u.n_gen;
  prompt_ms = u.prompt_ms;
  predicted_ms = u.predicted_ms;
}

void Timings::add(int index, const JobUsage& done) {
  if (index == 0) set(done);
  draft_n += done.n_draft;
  draft_n_accepted += done.n_draft_accepted;
}

json Timings::to_json() const {
  // The first token comes from the prompt's last logits: generation speed is over the decode
  // steps after it (llama-server's rule), so one token has no rate.
  const int steps = std::max(predicted_n - 1, 0);
  return {{"cache_n", cache_n},
          {"prompt_n", prompt_n},
          {"prompt_ms", prompt_ms},
          {"prompt_per_token_ms", prompt_n > 0 ? prompt_ms / prompt_n : 0.0},
          {"prompt_per_second", prompt_ms > 0 ? 1000.0 * prompt_n / prompt_ms : 0.0},
          {"predicted_n", predicted_n},
          {"predicted_ms", predicted_ms},
          {"predicted_per_token_ms", steps > 0 ? predicted_ms / steps : 0.0},
          {"predicted_per_second", steps > 0 && predicted_ms > 0 ? 1000.0 * steps / predicted_ms : 0.0},
          {"draft_n", draft_n},
          {"draft_n_accepted", draft_n_accepted}};
}

json progress_json(const ProgressEvent& p) {
  Timings t;
  t.prompt_n = p.processed - p.cache;
  t.cache_n = p.cache;
  t.prompt_ms = p.ms;
  return {{"prompt_progress", {{"total", p.total}, {"cache", p.cache}, {"processed", p.processed}, {"time_ms", p.ms}}},
          {"timings", t.to_json()}};
}

JoinedReply join_events(std::vector<JobEvent>& events) {
  JoinedReply j;
  for (JobEvent& ev : events) {
    if (const auto* e = ev.as<ErrorEvent>()) j.error = e->message;
    if (const TextDelta* d = ev.delta()) j.text += d->text;
    if (auto* d = ev.as<DoneEvent>()) {
      j.done = std::move(*d);
      j.index = ev.index;
    }
  }
  return j;
}

ParseContext ServerState::parse_context() const {
  ParseContext pc;
  pc.file = &model->file();
  pc.tok = tok;
  pc.n_ctx_slot = engine->n_ctx_slot();
  pc.default_n_predict = sp.default_n_predict;
  pc.spec = sp.spec ? &*sp.spec : nullptr;
  pc.has_draft_model = engine->has_draft_model();
  pc.chat_template = &chat_template;
  pc.template_tools = &template_tools;
  pc.sampling = &sp.sampling;
  pc.reasoning = sp.reasoning;
  pc.cache_prompt = sp.cache_prompt;
  pc.context_shift = engine->params().context_shift;
  pc.default_grammar = sp.grammar;
  return pc;
}

void ServerState::reply_error(httplib::Response& res, const ApiError& e, ErrorShape shape) const {
  res.status = e.status;
  res.set_content(dump(shape(e)), "application/json; charset=utf-8");
}

void ServerState::reply_json(httplib::Response& res, const json& j, int status) const {
  res.status = status;
  res.set_content(dump(j), "application/json; charset=utf-8");
}

std::optional<json> ServerState::parse_body(const httplib::Request& req, httplib::Response& res, ErrorShape shape) const {
  try {
    return json::parse(req.body);
  } catch (const std::exception& e) {
    reply_error(res, {400, fmt::format("the request body is not valid JSON: {}", e.what()), "invalid_request_error", "", ""}, shape);
    return std::nullopt;
  }
}

ServerState::Accepted ServerState::submit(std::shared_ptr<CompletionRequest> r, httplib::Response& res, ErrorShape shape) {
  auto ch = std::make_shared<EventChannel>(r->n_choices());
  std::vector<Job> jobs;
  for (int c = 0; c < r->n_choices(); ++c) {
    const int i = c % r->n;
    Job j;
    j.prompt = r->prompt_ids(c / r->n);
    j.sampling = r->sampling;
    if (r->sampling.seed != kSeedRandom) j.sampling.seed = r->sampling.seed + i;
    j.n_predict = r->n_predict;
    j.stop = r->stop;
    j.ignore_eog = r->ignore_eos;
    j.top_logprobs = r->logprobs ? r->top_logprobs : -1;
    j.post_sampling_probs = r->post_sampling_probs;
    j.grammar = r->grammar;
    j.grammar_triggers = r->grammar_triggers;
    j.spec = r->spec;
    j.cache_prompt = r->cache_prompt;
    j.return_progress = r->return_progress && r->stream;
    j.id_slot = r->id_slot;
    j.n_keep = r->n_keep;
    j.n_discard = r->n_discard;
    j.index = c;
    j.deadline = Clock::now() + std::chrono::seconds(sp.timeout_s);
    j.channel = ch;
    jobs.push_back(std::move(j));
  }
  if (!queue(std::move(jobs), res, shape)) return {};
  return {std::move(r), std::move(ch)};
}

bool ServerState::queue(std::vector<Job> jobs, httplib::Response& res, ErrorShape shape) {
  if (draining || !engine->submit(std::move(jobs))) {
    res.set_header("Retry-After", "1");
    reply_error(res, {503, draining ? "the server is shutting down" : "the server is busy: every slot and queue place is taken; retry later",
                      "unavailable_error", "", "server_busy"},
                shape);
    return false;
  }
  return true;
}

ServerState::Accepted ServerState::accept(const httplib::Request& req, httplib::Response& res, bool chat, bool one_choice) {
  auto body = parse_body(req, res);
  if (!body) return {};
  return accept(*body, res, chat, one_choice);
}

ServerState::Accepted ServerState::accept(const json& body, httplib::Response& res, bool chat, bool one_choice, Api api) {
  ParseContext pc = parse_context();
  pc.api = api;
  auto parsed = parse_completion_request(body, chat, pc);
  if (auto* e = std::get_if<ApiError>(&parsed)) {
    reply_error(res, *e);
    return {};
  }
  auto r = std::make_shared<CompletionRequest>(std::move(std::get<CompletionRequest>(parsed)));
  if (one_choice && r->n != 1) {
    reply_error(res, invalid_param("n", "/completion generates one completion ('n' must be 1)"));
    return {};
  }
  if (r->id_slot >= engine->params().n_slots) {
    reply_error(res, invalid_param("id_slot", fmt::format("'id_slot' {} is not a slot (0 .. {})", r->id_slot, engine->params().n_slots - 1)));
    return {};
  }
  return submit(std::move(r), res);
}

void ServerState::reply_when_done(httplib::Response& res, std::shared_ptr<EventChannel> ch, Clock::time_point t0,
                                  std::function<std::string(std::vector<JobEvent>& events)> body) {
  // Most replies are ready within the grace period: sent whole, with their real status.
  auto early = std::make_shared<std::vector<JobEvent>>();
  const auto grace_end = Clock::now() + kHeaderGrace;
  bool failed = false;
  for (JobEvent ev;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(grace_end - Clock::now());
    if (left.count() <= 0) {
      // While draining the reply stays here to the end (the drain timeout bounds it): the
      // listener is stopped, and cpp-httplib never calls a chunked provider after that (the
      // client would get the status line and a cut body).
      if (!draining) break;
      left = std::chrono::milliseconds(200);
    }
    const auto pr = ch->pop(ev, left);
    if (pr == EventChannel::kClosed) {
      const std::string reply = body(*early);
      res.status = failed ? 500 : 200;
      res.set_content(reply, "application/json");
      metrics.latency(std::chrono::duration<double>(Clock::now() - t0).count());
      return;
    }
    if (pr != EventChannel::kEvent) continue;
    if (ev.is<ErrorEvent>()) {
      failed = true;
      ch->cancel();  // the reply is that error: the other jobs stop
    }
    early->push_back(std::move(ev));
  }
  res.set_chunked_content_provider(
      "application/json",
      [this, ch, t0, early, body = std::move(body)](size_t, httplib::DataSink& sink) {
        std::vector<JobEvent> events = std::move(*early);
        JobEvent ev;
        auto last_write = Clock::now();
        for (;;) {
          const auto pr = ch->pop(ev, std::chrono::milliseconds(200));
          if (pr == EventChannel::kClosed) break;
          if (Clock::now() - last_write >= std::chrono::milliseconds(200)) {
            last_write = Clock::now();
            if (!sink.write(" ", 1)) {  // the client went away
              ch->cancel();
              return false;
            }
          }
          if (pr != EventChannel::kEvent) continue;
          if (ev.is<ErrorEvent>()) ch->cancel();  // the reply is that error: the other jobs stop
          events.push_back(std::move(ev));
        }
        return finish_body(sink, body(events), t0);
      },
      [ch](bool success) {
        if (!success) ch->cancel();
      });
}

std::optional<std::string> ServerState::pump_events(EventChannel& ch, httplib::DataSink& sink,
                                                    const std::function<bool(JobEvent& ev)>& on_event) {
  std::string error;
  JobEvent ev;
  for (;;) {
    const auto pr = ch.pop(ev, std::chrono::milliseconds(200));
    if (pr == EventChannel::kClosed) return error;
    bool ok = true;
    if (pr == EventChannel::kTimeout)
      ok = !sink.is_writable || sink.is_writable();
    else if (const auto* e = ev.as<ErrorEvent>())
      error = e->message;
    else
      ok = on_event(ev);
    if (!ok) {
      ch.cancel();
      return std::nullopt;
    }
  }
}

void ServerState::stream_events(httplib::Response& res, std::shared_ptr<EventChannel> ch, httplib::ContentProviderWithoutLength body,
                                const char* content_type) {
  http::stream_chunks(res, content_type, std::move(body), [ch](bool ok) {
    if (!ok) ch->cancel();
  });
}

bool ServerState::finish_body(httplib::DataSink& sink, const std::string& reply, Clock::time_point t0) {
  if (!sink.write(reply.data(), reply.size())) return false;
  sink.done();
  metrics.latency(std::chrono::duration<double>(Clock::now() - t0).count());
  return true;
}

}  // namespace minfer::server
