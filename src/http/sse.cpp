#include "http/sse.h"

namespace minfer::http {

void SseWriter::add(std::string_view type, std::string_view data) {
  if (!type.empty()) pending_.append("event: ").append(type).append("\n");
  size_t start = 0;
  for (;;) {  // the spec's framing: each line of the payload is a data: line
    const size_t nl = data.find('\n', start);
    pending_.append("data: ").append(data.substr(start, nl == std::string_view::npos ? nl : nl - start)).append("\n");
    if (nl == std::string_view::npos) break;
    start = nl + 1;
  }
  pending_ += '\n';
}

bool SseWriter::flush() {
  if (pending_.empty()) return true;
  const bool ok = sink_.write(pending_.data(), pending_.size());
  pending_.clear();
  return ok;
}

bool SseWriter::done() {
  if (!flush()) return false;
  sink_.done();
  return true;
}

void stream_chunks(httplib::Response& res, const char* content_type, httplib::ContentProviderWithoutLength provider,
                   std::function<void(bool ok)> on_close) {
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  res.set_chunked_content_provider(content_type, std::move(provider), [on_close = std::move(on_close)](bool ok) {
    if (on_close) on_close(ok);
  });
}

}  // namespace minfer::http
