// Anthropic's Messages API: POST /v1/messages (streaming or not: thinking, text and tool_use
// blocks) and /v1/messages/count_tokens (docs/server-api.md#anthropic-messages-api).
#include "http/sse.h"
#include "server/api-anthropic.h"
#include "server/reasoning.h"
#include "server/server-state.h"
#include "toolcall/parser.h"

namespace minfer::server {
namespace {

// A reply cut by max_tokens says so even when it had begun a tool call.
std::string stop_reason(const DoneEvent& done, bool called_tools) {
  if (done.finish_reason == "length") return "max_tokens";
  if (called_tools) return "tool_use";
  return done.stop_type == "word" ? "stop_sequence" : "end_turn";
}

json usage(const CompletionRequest& r, const DoneEvent& done) {
  return {{"input_tokens", static_cast<int>(r.prompt.size())}, {"output_tokens", done.usage.n_gen},
          {"cache_read_input_tokens", done.usage.n_cached}, {"cache_creation_input_tokens", 0}};
}

// The request as a chat completion; on refusal the reply is set and r is null.
std::shared_ptr<CompletionRequest> parse(ServerState& s, const httplib::Request& req, httplib::Response& res, bool count_only) {
  auto body = s.parse_body(req, res, anthropic_error_json);
  if (!body) return nullptr;
  auto chat = anthropic_to_chat(*body, count_only);
  auto refuse = [&](const ApiError& e) {
    s.reply_error(res, e, anthropic_error_json);
    return nullptr;
  };
  if (auto* e = std::get_if<ApiError>(&chat)) return refuse(*e);
  ParseContext pc = s.parse_context();
  pc.api = Api::kAnthropic;
  pc.allow_empty_messages = true;
  if (count_only) pc.n_ctx_slot = INT32_MAX;  // counting needs no room
  auto parsed = parse_completion_request(std::get<json>(chat), true, pc);
  if (auto* e = std::get_if<ApiError>(&parsed)) return refuse(*e);
  return std::make_shared<CompletionRequest>(std::move(std::get<CompletionRequest>(parsed)));
}

void messages(ServerState& s, const httplib::Request& req, httplib::Response& res) {
  const auto t0 = Clock::now();
  auto r = parse(s, req, res, false);
  if (!r) return;
  auto [rr, ch] = s.submit(r, res, anthropic_error_json);
  if (!rr) return;
  const std::string id = random_id("msg_");
  if (!r->stream) {
    s.reply_when_done(res, ch, t0, [&s, r, id](std::vector<JobEvent>& events) {
          const auto [text, error, done, index] = join_events(events);
          if (!error.empty()) return dump(anthropic_error_json(server_error(error)));
          ReplyReader reader = make_reply_reader(s.sp.reasoning_format, s.chat_template, r->prompt_text, r->tools.get());
          ReplyReader::Out o = reader.feed(text, true);
          json content = json::array();
          if (!o.thinking.empty()) content.push_back({{"type", "thinking"}, {"thinking", o.thinking}, {"signature", ""}});
          const bool called = reader.called();
          if (!o.text.empty() || !called) content.push_back({{"type", "text"}, {"text", o.text}});
          if (reader.tools)
            for (const auto& c : reader.tools->result().calls)
              content.push_back({{"type", "tool_use"}, {"id", c.id}, {"name", c.name}, {"input", tool_arguments_object(c.arguments)}});
          json out = {{"id", id}, {"type", "message"}, {"role", "assistant"}, {"model", s.model_id}, {"content", content},
                      {"stop_reason", stop_reason(done, called)},
                      {"stop_sequence", done.stop_type == "word" ? json(done.stop_word) : json(nullptr)},
                      {"usage", usage(*r, done)}};
          return dump(out);
        });
    return;
  }
  ServerState::stream_events(res, ch,
      [&s, r, ch, id, t0](size_t, httplib::DataSink& sink) {
        http::SseWriter sse(sink);
        auto send = [&](const json& j) { return sse.send(j["type"].get<std::string>(), dump(j)); };
        bool ok = send({{"type", "message_start"},
                        {"message", {{"id", id}, {"type", "message"}, {"role", "assistant"}, {"model", s.model_id},
                                     {"content", json::array()}, {"stop_reason", nullptr}, {"stop_sequence", nullptr},
                                     {"usage", {{"input_tokens", static_cast<int>(r->prompt.size())}, {"output_tokens", 0}}}}}});
        ReplyReader reader = make_reply_reader(s.sp.reasoning_format, s.chat_template, r->prompt_text, r->tools.get());
        // The open block: its index and kind ("thinking", "text" or "tool_use").
        int index = -1;
        std::string open;
        auto close = [&]() {
          if (open.empty()) return true;
          bool w = true;
          if (open == "thinking") w = send({{"type", "content_block_delta"}, {"index", index}, {"delta", {{"type", "signature_delta"}, {"signature", ""}}}});
          open.clear();
          return w && send({{"type", "content_block_stop"}, {"index", index}});
        };
        auto start = [&](const std::string& kind, json block) {
          if (!close()) return false;
          ++index;
          open = kind;
          return send({{"type", "content_block_start"}, {"index", index}, {"content_block", std::move(block)}});
        };
        auto emit = [&](const ReplyReader::Out& o) {
          bool w = true;
          if (!o.thinking.empty()) {
            if (open != "thinking") w = w && start("thinking", {{"type", "thinking"}, {"thinking", ""}});
            w = w && send({{"type", "content_block_delta"}, {"index", index}, {"delta", {{"type", "thinking_delta"}, {"thinking", o.thinking}}}});
          }
          if (!o.text.empty()) {
            if (open != "text") w = w && start("text", {{"type", "text"}, {"text", ""}});
            w = w && send({{"type", "content_block_delta"}, {"index", index}, {"delta", {{"type", "text_delta"}, {"text", o.text}}}});
          }
          for (const toolcall::CallDelta& c : o.calls) {
            if (c.start)
              w = w && start("tool_use", {{"type", "tool_use"}, {"id", c.id}, {"name", c.name}, {"input", json::object()}});
            if (!c.arguments.empty())
              w = w && send({{"type", "content_block_delta"}, {"index", index}, {"delta", {{"type", "input_json_delta"}, {"partial_json", c.arguments}}}});
          }
          return w;
        };
        if (!ok) {
          ch->cancel();
          return false;
        }
        DoneEvent done;
        const auto error = ServerState::pump_events(*ch, sink, [&](JobEvent& ev) {
          const TextDelta* d = ev.delta();  // none for progress: Anthropic's stream has no place for it
          if (const auto* fin = ev.as<DoneEvent>()) done = *fin;
          return emit(reader.feed(d ? d->text : std::string(), ev.is<DoneEvent>()));
        });
        if (!error) return false;  // the client went away
        if (!error->empty()) {
          send(anthropic_error_json(server_error(*error)));
        } else {
          const bool called = reader.called();
          if (index < 0) start("text", {{"type", "text"}, {"text", ""}});  // an empty reply is one empty text block
          close();
          send({{"type", "message_delta"},
                {"delta", {{"stop_reason", stop_reason(done, called)},
                           {"stop_sequence", done.stop_type == "word" ? json(done.stop_word) : json(nullptr)}}},
                {"usage", {{"output_tokens", done.usage.n_gen}}}});
          send({{"type", "message_stop"}});
        }
        sse.done();
        s.metrics.latency(std::chrono::duration<double>(Clock::now() - t0).count());
        return true;
      });
}

void count_tokens(ServerState& s, const httplib::Request& req, httplib::Response& res) {
  auto r = parse(s, req, res, true);
  if (!r) return;
  s.reply_json(res, {{"input_tokens", static_cast<int>(r->prompt.size())}});
}

}  // namespace

void add_anthropic_routes(httplib::Server& http, ServerState& s) {
  s.post(http, "/v1/messages", [&s](const httplib::Request& q, httplib::Response& r) { messages(s, q, r); });
  s.post(http, "/v1/messages/count_tokens", [&s](const httplib::Request& q, httplib::Response& r) { count_tokens(s, q, r); });
}

}  // namespace minfer::server
