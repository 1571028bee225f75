// OpenAI's API: POST /v1/chat/completions and /v1/completions (also without /v1), streaming
// (SSE chunks, [DONE]) or not, n choices, logprobs, tool calls (docs/server-api.md).
#include <ctime>

#include "http/sse.h"
#include "server/reasoning.h"
#include "server/server-state.h"
#include "toolcall/parser.h"

namespace minfer::server {
namespace {

json chunk_base(const ServerState& s, const std::string& id, bool chat, int64_t t) {
  return {{"id", id}, {"object", chat ? "chat.completion.chunk" : "text_completion"}, {"created", t},
          {"model", s.model_id}, {"system_fingerprint", "minfer-" MINFER_SERVER_VERSION}};
}

// OpenAI's message.tool_calls, and the delta.tool_calls items of a stream.
json tool_calls_json(const std::vector<toolcall::ToolCall>& calls) {
  json a = json::array();
  for (const auto& c : calls)
    a.push_back({{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
  return a;
}
json call_delta_json(const toolcall::CallDelta& d) {
  if (d.start)
    return {{"index", d.index}, {"id", d.id}, {"type", "function"}, {"function", {{"name", d.name}, {"arguments", d.arguments}}}};
  return {{"index", d.index}, {"function", {{"arguments", d.arguments}}}};
}
// A reply that called tools and ended by itself finishes with "tool_calls".
std::string finish_with_tools(const std::string& reason, bool called) {
  return called && reason == "stop" ? "tool_calls" : reason;
}

json usage_json(int n_prompt, int n_gen, int n_cached) {
  return {{"prompt_tokens", n_prompt}, {"completion_tokens", n_gen}, {"total_tokens", n_prompt + n_gen},
          {"prompt_tokens_details", {{"cached_tokens", n_cached}}}};
}

void stream(ServerState& s, httplib::Response& res, std::shared_ptr<CompletionRequest> r, std::shared_ptr<EventChannel> ch,
            const std::string& id, int64_t created_t, bool chat, Clock::time_point t0) {
  ServerState::stream_events(res, ch,
      [&s, r, ch, id, created_t, chat, t0](size_t, httplib::DataSink& sink) {
        http::SseWriter sse(sink);
        auto send = [&](const json& j) { return sse.send(dump(j)); };
        const JobUsage* current = nullptr;  // the usage of the event being sent (timings_per_token)
        auto chunk = [&](int index, json delta_or_text, json logprobs, json finish) {
          json c = chunk_base(s, id, chat, created_t);
          if (r->timings_per_token && current) c["timings"] = Timings::of(*current);
          json choice = {{"index", index}};
          if (chat) choice["delta"] = std::move(delta_or_text);
          else choice["text"] = std::move(delta_or_text);
          choice["logprobs"] = std::move(logprobs);
          choice["finish_reason"] = std::move(finish);
          c["choices"] = json::array({choice});
          if (r->include_usage) c["usage"] = nullptr;
          return c;
        };
        bool ok = true;
        if (chat)  // the first delta of each choice carries the role
          for (int i = 0; i < r->n && ok; ++i)
            ok = send(chunk(i, {{"role", "assistant"}, {"content", nullptr}, {"refusal", nullptr}}, nullptr, nullptr));
        int n_gen = 0, n_cached = 0;
        Timings timings;  // of the first choice, for the usage chunk
        std::vector<size_t> offsets(static_cast<size_t>(r->n_choices()), 0);
        // Chat replies are read for reasoning (reasoning_content) and tool calls (tool_calls).
        std::vector<ReplyReader> readers;
        if (chat)
          for (int i = 0; i < r->n; ++i)
            readers.push_back(make_reply_reader(s.sp.reasoning_format, s.chat_template, r->prompt_text, r->tools.get()));
        if (!ok) {
          ch->cancel();
          return false;
        }
        const auto error = ServerState::pump_events(*ch, sink, [&](JobEvent& ev) {
          if (const auto* p = ev.as<ProgressEvent>()) {  // return_progress: a chunk without choices
            json c = chunk_base(s, id, chat, created_t);
            c["choices"] = json::array();
            c.update(progress_json(*p));
            return send(c);
          }
          const TextDelta& delta = *ev.delta();  // a text or done event (pump_events keeps errors)
          const DoneEvent* done = ev.as<DoneEvent>();
          current = ev.usage();
          json lp = nullptr;
          if (r->logprobs && !delta.logprobs.empty()) {
            if (chat) {
              lp = {{"content", chat_logprobs_json(*s.tok, delta.logprobs)}, {"refusal", nullptr}};
            } else {
              append_completion_logprobs(*s.tok, delta.logprobs, lp, offsets[static_cast<size_t>(ev.index)]);
            }
          }
          std::string finish = done ? done->finish_reason : std::string();
          if (!readers.empty()) {  // chat: reasoning, content and delta.tool_calls, never the markup
            ReplyReader& reader = readers[static_cast<size_t>(ev.index)];
            ReplyReader::Out d = reader.feed(delta.text, done != nullptr);
            if (done) finish = finish_with_tools(finish, reader.called());
            if (!d.thinking.empty()) ok = send(chunk(ev.index, json{{"reasoning_content", d.thinking}}, nullptr, nullptr));
            if (ok && (!d.text.empty() || !lp.is_null())) ok = send(chunk(ev.index, json{{"content", d.text}}, lp, nullptr));
            for (const toolcall::CallDelta& cd : d.calls)
              if (ok) ok = send(chunk(ev.index, json{{"tool_calls", json::array({call_delta_json(cd)})}}, nullptr, nullptr));
          } else if (!delta.text.empty() || !lp.is_null()) {
            ok = send(chunk(ev.index, chat ? json{{"content", delta.text}} : json(delta.text), lp, nullptr));
          }
          if (ok && done) {
            n_gen += done->usage.n_gen;
            n_cached = done->usage.n_cached;
            json last = chunk(ev.index, chat ? json::object() : json(""), nullptr, finish);
            timings.add(ev.index, done->usage);
            last["timings"] = Timings::of(done->usage);
            ok = send(last);
          }
          return ok;
        });
        current = nullptr;
        if (!error) return false;  // the client went away: its jobs are cancelled, the slot is free
        if (!error->empty()) {
          send(error_json(server_error(*error)));
        } else if (r->include_usage) {
          json c = chunk_base(s, id, chat, created_t);
          c["choices"] = json::array();
          c["usage"] = usage_json(static_cast<int>(r->total_prompt_tokens()), n_gen, n_cached);
          c["timings"] = timings.to_json();  // llama-server's place for them in a stream with usage
          send(c);
        }
        sse.send("[DONE]");
        sse.done();
        s.metrics.latency(std::chrono::duration<double>(Clock::now() - t0).count());
        return true;
      });
}
void completions(ServerState& s, const httplib::Request& req, httplib::Response& res, bool chat) {
  const auto t0 = Clock::now();
  auto [r, ch] = s.accept(req, res, chat, false);
  if (!r) return;
  const std::string id = random_id(chat ? "chatcmpl-" : "cmpl-");
  const int64_t created_t = static_cast<int64_t>(std::time(nullptr));
  if (r->stream) return stream(s, res, r, ch, id, created_t, chat, t0);

  // Non-streaming: every choice collected, then one JSON body.
  s.reply_when_done(res, ch, t0, [&s, r, id, created_t, chat](std::vector<JobEvent>& events) {
        std::vector<std::string> text(static_cast<size_t>(r->n_choices()));
        std::vector<std::string> reason(static_cast<size_t>(r->n_choices()));
        std::vector<std::vector<TokenLogprob>> lps(static_cast<size_t>(r->n_choices()));
        int n_prompt = static_cast<int>(r->total_prompt_tokens()), n_gen = 0, n_cached = 0;
        Timings timings;
        std::string error;
        for (JobEvent& ev : events) {
          const size_t k = static_cast<size_t>(ev.index);
          if (const auto* e = ev.as<ErrorEvent>()) {
            error = e->message;
            continue;
          }
          if (const TextDelta* d = ev.delta()) {
            text[k] += d->text;
            lps[k].insert(lps[k].end(), d->logprobs.begin(), d->logprobs.end());
          }
          if (const auto* done = ev.as<DoneEvent>()) {
            reason[k] = done->finish_reason;
            n_gen += done->usage.n_gen;
            n_cached = done->usage.n_cached;
            timings.add(ev.index, done->usage);
          }
        }
        std::string reply;
        if (!error.empty()) {  // the status line is out already: the error object is the body
          reply = dump(error_json(server_error(error)));
        } else {
          json choices = json::array();
          for (int i = 0; i < r->n_choices(); ++i) {
            const size_t k = static_cast<size_t>(i);
            json c;
            c["index"] = i;
            if (chat) {
              ReplyReader reader = make_reply_reader(s.sp.reasoning_format, s.chat_template, r->prompt_text, r->tools.get());
              const ReplyReader::Out o = reader.feed(text[k], true);
              const bool called = reader.called();
              c["message"] = {{"role", "assistant"}, {"content", o.text.empty() && called ? json(nullptr) : json(o.text)}};
              if (!o.thinking.empty()) c["message"]["reasoning_content"] = o.thinking;
              if (called) c["message"]["tool_calls"] = tool_calls_json(reader.tools->result().calls);
              reason[k] = finish_with_tools(reason[k], called);
              c["message"]["refusal"] = nullptr;
              c["logprobs"] = r->logprobs ? json{{"content", chat_logprobs_json(*s.tok, lps[k])}, {"refusal", nullptr}} : json(nullptr);
            } else {
              c["text"] = text[k];
              json lp = nullptr;
              size_t off = 0;
              if (r->logprobs) append_completion_logprobs(*s.tok, lps[k], lp, off);
              c["logprobs"] = lp;
            }
            c["finish_reason"] = reason[k];
            choices.push_back(std::move(c));
          }
          json out = {{"id", id}, {"object", chat ? "chat.completion" : "text_completion"}, {"created", created_t},
                      {"model", s.model_id}, {"system_fingerprint", "minfer-" MINFER_SERVER_VERSION}, {"choices", choices},
                      {"usage", usage_json(n_prompt, n_gen, n_cached)}};
          out["timings"] = timings.to_json();
          if (s.sp.verbose || r->verbose) out["__verbose"] = {{"prompt", r->prompt_text}, {"n_prompt_tokens", r->prompt.size()}};
          reply = dump(out);
        }
        return reply;
      });
}

}  // namespace

void add_openai_routes(httplib::Server& http, ServerState& s) {
  s.post(http, "/v1/chat/completions", [&s](const httplib::Request& q, httplib::Response& r) { completions(s, q, r, true); });
  s.post(http, "/chat/completions", [&s](const httplib::Request& q, httplib::Response& r) { completions(s, q, r, true); });
  s.post(http, "/v1/completions", [&s](const httplib::Request& q, httplib::Response& r) { completions(s, q, r, false); });
}

}  // namespace minfer::server
