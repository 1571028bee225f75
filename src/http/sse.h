// Server-sent events, written one way for every streaming route (OpenAI's, llama-server's,
// Anthropic's and Responses' streams, viz's event feed): the headers, the framing, flushing,
// heartbeats and noticing a client that went away.
//
//   http::stream_sse(res, [ch](size_t, httplib::DataSink& sink) {
//     http::SseWriter sse(sink);
//     if (!sse.send(R"({"delta": "Hi"})")) return false;           // data: {...}\n\n
//     if (!sse.send("message_stop", "{}")) return false;           // event: message_stop\ndata: {}\n\n
//     sse.add("a"), sse.add("b");                                  // batched: one write
//     if (!sse.flush()) return false;                              // false: the client is gone
//     return sse.done();
//   }, [ch](bool ok) { if (!ok) ch->cancel(); });
#pragma once

#include <httplib.h>

#include <functional>
#include <string>
#include <string_view>

namespace minfer::http {

class SseWriter {
 public:
  explicit SseWriter(httplib::DataSink& sink) : sink_(sink) {}
  // Queue one event (`type` "": no event line); a multi-line payload gets a data: per line.
  void add(std::string_view data) { add("", data); }
  void add(std::string_view type, std::string_view data);
  void add_raw(std::string_view text) { pending_ += text; }  // a retry: line, a comment
  // Write what is queued in one chunk; false when the client is gone (nothing queued: true).
  bool flush();
  bool send(std::string_view data) { return add(data), flush(); }
  bool send(std::string_view type, std::string_view data) { return add(type, data), flush(); }
  // A comment line (": ping"): keeps proxies from timing out and finds a client that went away.
  bool heartbeat() { return add_raw(": ping\n\n"), flush(); }
  // Whether the client is still there, without writing (the sink's own check).
  bool alive() const { return !sink_.is_writable || sink_.is_writable(); }
  bool done();  // flush, then end the stream

 private:
  httplib::DataSink& sink_;
  std::string pending_;
};

// Answers `res` with a stream of `content_type` chunks (Ollama's application/x-ndjson lines ...):
// no caching, no proxy buffering (X-Accel-Buffering: no). on_close(ok) runs when the stream
// ends (ok false: cut short).
void stream_chunks(httplib::Response& res, const char* content_type, httplib::ContentProviderWithoutLength provider,
                   std::function<void(bool ok)> on_close = {});
// The same as an event stream (text/event-stream).
inline void stream_sse(httplib::Response& res, httplib::ContentProviderWithoutLength provider,
                       std::function<void(bool ok)> on_close = {}) {
  stream_chunks(res, "text/event-stream", std::move(provider), std::move(on_close));
}

}  // namespace minfer::http
