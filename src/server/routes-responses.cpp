// OpenAI's Responses API: POST /v1/responses (also /responses), run as a chat completion, its
// reply as a response object or, streamed, as the typed events the openai clients read
// (docs/server-api.md#openai-responses-api).
#include <ctime>

#include "http/sse.h"
#include "server/api-responses.h"
#include "server/reasoning.h"
#include "server/server-state.h"
#include "toolcall/parser.h"

namespace minfer::server {
namespace {

// A reply cut by max_output_tokens (or the slot's context) is "incomplete".
std::string status_of(const DoneEvent& done) { return done.finish_reason == "length" ? "incomplete" : "completed"; }

// The events of one streamed response: each output item (reasoning, message, function_call) is
// opened, gets its deltas and is closed before the next one starts.
class ResponseStream {
 public:
  ResponseStream(httplib::DataSink& sink, const ResponseMeta& meta) : sse_(sink), meta_(meta) {}

  bool send(const std::string& type, json fields) {
    json j = {{"type", type}, {"sequence_number", seq_++}};
    j.update(fields);
    return sse_.send(type, dump(j));
  }
  bool done() { return sse_.done(); }
  json response(const std::string& status, json usage) const { return response_json(meta_, status, output_, std::move(usage)); }

  // One piece of the reply; `timings` (or null) goes on its delta events.
  bool emit(const ReplyReader::Out& o, const json& timings) {
    bool ok = true;
    auto with_timings = [&](json j) {
      if (!timings.is_null()) j["timings"] = timings;
      return j;
    };
    if (!o.thinking.empty()) {
      if (kind_ != "reasoning") ok = open("reasoning", random_id("rs_"), "", "");
      text_ += o.thinking;
      ok = ok && send("response.reasoning_text.delta",
                      with_timings({{"item_id", id_}, {"output_index", index_}, {"content_index", 0}, {"delta", o.thinking}}));
    }
    if (!o.text.empty()) {
      if (kind_ != "message") ok = ok && open("message", random_id("msg_"), "", "");
      text_ += o.text;
      ok = ok && send("response.output_text.delta",
                      with_timings({{"item_id", id_}, {"output_index", index_}, {"content_index", 0}, {"delta", o.text},
                                    {"logprobs", json::array()}}));
    }
    for (const toolcall::CallDelta& c : o.calls) {
      if (c.start) ok = ok && open("function_call", random_id("fc_"), c.id, c.name);
      text_ += c.arguments;
      if (!c.arguments.empty())
        ok = ok && send("response.function_call_arguments.delta",
                        with_timings({{"item_id", id_}, {"output_index", index_}, {"delta", c.arguments}}));
    }
    return ok;
  }

  // The open item's closing events; it joins the output.
  bool close() {
    if (kind_.empty()) return true;
    bool ok = true;
    json item;
    const json at = {{"item_id", id_}, {"output_index", index_}};
    if (kind_ == "message") {
      json part = output_text_part(text_);
      ok = send("response.output_text.done", json{{"item_id", id_}, {"output_index", index_}, {"content_index", 0}, {"text", text_},
                                                  {"logprobs", json::array()}});
      ok = ok && send("response.content_part.done", json{{"item_id", id_}, {"output_index", index_}, {"content_index", 0}, {"part", part}});
      item = message_item(id_, "completed", text_);
    } else if (kind_ == "reasoning") {
      ok = send("response.reasoning_text.done", json{{"item_id", id_}, {"output_index", index_}, {"content_index", 0}, {"text", text_}});
      item = reasoning_item(id_, "completed", text_);
    } else {
      ok = send("response.function_call_arguments.done", json{{"item_id", id_}, {"output_index", index_}, {"arguments", text_}});
      item = function_call_item(id_, "completed", call_id_, name_, text_);
    }
    ok = ok && send("response.output_item.done", json{{"output_index", index_}, {"item", item}});
    output_.push_back(std::move(item));
    kind_.clear();
    return ok;
  }
  // An empty reply is one message item with empty text.
  bool close_or_empty_message() { return output_.empty() && kind_.empty() ? open("message", random_id("msg_"), "", "") && close() : close(); }

 private:
  bool open(const std::string& kind, std::string id, std::string call_id, std::string name) {
    if (!close()) return false;
    kind_ = kind;
    id_ = std::move(id);
    call_id_ = std::move(call_id);
    name_ = std::move(name);
    text_.clear();
    index_ = static_cast<int>(output_.size());
    json item = kind == "message"     ? message_item(id_, "in_progress", "")
                : kind == "reasoning" ? reasoning_item(id_, "in_progress", "")
                                      : function_call_item(id_, "in_progress", call_id_, name_, "");
    bool ok = send("response.output_item.added", json{{"output_index", index_}, {"item", item}});
    if (kind == "message")
      ok = ok && send("response.content_part.added",
                      json{{"item_id", id_}, {"output_index", index_}, {"content_index", 0}, {"part", output_text_part("")}});
    return ok;
  }

  http::SseWriter sse_;
  const ResponseMeta& meta_;
  int seq_ = 0;
  json output_ = json::array();
  std::string kind_, id_, call_id_, name_, text_;  // the open item ("" kind: none) and its text so far
  int index_ = 0;
};

// The output items of a whole reply (non-streamed).
json output_items(const ReplyReader::Out& o, ReplyReader& reader) {
  json out = json::array();
  if (!o.thinking.empty()) out.push_back(reasoning_item(random_id("rs_"), "completed", o.thinking));
  const bool called = reader.called();
  if (!o.text.empty() || !called) out.push_back(message_item(random_id("msg_"), "completed", o.text));
  if (called)
    for (const auto& c : reader.tools->result().calls)
      out.push_back(function_call_item(random_id("fc_"), "completed", c.id, c.name, c.arguments));
  return out;
}

void responses(ServerState& s, const httplib::Request& req, httplib::Response& res) {
  const auto t0 = Clock::now();
  auto body = s.parse_body(req, res);
  if (!body) return;
  auto chat = responses_to_chat(*body);
  if (auto* e = std::get_if<ApiError>(&chat)) return s.reply_error(res, *e);
  auto [r, ch] = s.accept(std::get<json>(chat), res, true, false, Api::kResponses);
  if (!r) return;
  auto meta = std::make_shared<ResponseMeta>(
      ResponseMeta{random_id("resp_"), static_cast<int64_t>(std::time(nullptr)), s.model_id, std::move(*body)});
  if (!r->stream) {
    s.reply_when_done(res, ch, t0, [&s, r, meta](std::vector<JobEvent>& events) {
      const auto [text, error, done, index] = join_events(events);
      if (!error.empty()) return dump(error_json(server_error(error)));
      ReplyReader reader = make_reply_reader(s.sp.reasoning_format, s.chat_template, r->prompt_text, r->tools.get());
      const ReplyReader::Out o = reader.feed(text, true);
      const JobUsage& u = done.usage;
      json out = response_json(*meta, status_of(done), output_items(o, reader), response_usage_json(u.n_prompt, u.n_gen, u.n_cached));
      Timings t;
      t.add(index, done.usage);
      out["timings"] = t.to_json();
      return dump(out);
    });
    return;
  }
  ServerState::stream_events(res, ch,
      [&s, r, ch, meta, t0](size_t, httplib::DataSink& sink) {
        ResponseStream rs(sink, *meta);
        bool ok = rs.send("response.created", {{"response", rs.response("in_progress", nullptr)}});
        ok = ok && rs.send("response.in_progress", {{"response", rs.response("in_progress", nullptr)}});
        if (!ok) {
          ch->cancel();
          return false;
        }
        ReplyReader reader = make_reply_reader(s.sp.reasoning_format, s.chat_template, r->prompt_text, r->tools.get());
        DoneEvent done;
        int done_index = 0;
        const auto error = ServerState::pump_events(*ch, sink, [&](JobEvent& ev) {
          if (const auto* p = ev.as<ProgressEvent>()) {  // return_progress: llama-server's prompt_progress on an in_progress event
            json j = {{"response", rs.response("in_progress", nullptr)}};
            j.update(progress_json(*p));
            return rs.send("response.in_progress", std::move(j));
          }
          if (const auto* fin = ev.as<DoneEvent>()) {
            done = *fin;
            done_index = ev.index;
          }
          // A text or done event (pump_events keeps errors).
          return rs.emit(reader.feed(ev.delta()->text, ev.is<DoneEvent>()),
                         r->timings_per_token ? Timings::of(*ev.usage()) : json(nullptr));
        });
        if (!error) return false;  // the client went away
        if (!error->empty()) {
          const ApiError e = server_error(*error);
          rs.send("error", {{"code", e.type}, {"message", e.message}, {"param", nullptr}});
          json failed = rs.response("failed", nullptr);
          failed["error"] = {{"code", e.type}, {"message", e.message}};
          rs.send("response.failed", {{"response", failed}});
        } else {
          rs.close_or_empty_message();
          Timings t;
          t.add(done_index, done.usage);
          const JobUsage& u = done.usage;
          rs.send("response.completed", {{"response", rs.response(status_of(done), response_usage_json(u.n_prompt, u.n_gen, u.n_cached))},
                                         {"timings", t.to_json()}});
        }
        rs.done();
        s.metrics.latency(std::chrono::duration<double>(Clock::now() - t0).count());
        return true;
      });
}

}  // namespace

void add_responses_routes(httplib::Server& http, ServerState& s) {
  s.post(http, "/v1/responses", [&s](const httplib::Request& q, httplib::Response& r) { responses(s, q, r); });
  s.post(http, "/responses", [&s](const httplib::Request& q, httplib::Response& r) { responses(s, q, r); });
}

}  // namespace minfer::server
