// A small blocking HTTP client over libcurl for the model downloaders. It never follows
// redirects on its own: callers see every 3xx and decide what the next hop may carry (the Hub
// token must not reach a CDN). Bodies of 2xx answers stream to a callback; other bodies are
// kept (up to 64 KiB) for error messages.
//
//   HttpRequest req = http_get("https://huggingface.co/api/models/org/repo");
//   req.headers.push_back("Authorization: Bearer " + token);
//   auto r = http_request(req);                 // body collected in r->body
//   if (r && r->status == 200) use(r->body);
//   r = http_request(get, [&](const HttpResponse&, const char* p, size_t n) { return write(p, n); });  // streamed
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace minfer::hub {

struct HttpHeaders {
  std::vector<std::pair<std::string, std::string>> items;  // in arrival order, names as sent
  // The last value of `name` (case-insensitive), or "" when absent.
  std::string get(std::string_view name) const;
  bool has(std::string_view name) const;
};

struct HttpRequest {
  std::string method = "GET";        // GET or HEAD
  std::string url;
  std::vector<std::string> headers;  // "Name: value"
  int64_t range_from = -1;           // >= 0: ask for bytes [range_from, end)
  int connect_timeout_s = 15;
  int stall_timeout_s = 30;          // give up when under 1 byte/s for this long
  size_t max_body = 64u << 20;       // for collected (non-streamed) 2xx bodies
};

inline HttpRequest http_get(std::string url) {
  HttpRequest r;
  r.url = std::move(url);
  return r;
}

struct HttpResponse {
  int status = 0;
  HttpHeaders headers;
  std::string body;  // collected 2xx body when no sink was given, or an error body (capped)
  std::string url;   // the URL asked
};

// Called with each piece of a 2xx body, with the answer's status and headers in `head`;
// returning false aborts the transfer.
using BodySink = std::function<bool(const HttpResponse& head, const char* data, size_t n)>;

// One request, one response (3xx included). A transport failure (refused, reset, timeout,
// truncated body, abort by the sink or by cancel) is an Error naming the URL.
Expected<HttpResponse> http_request(const HttpRequest& req, const BodySink& sink = {});

// Asks every transfer in flight, and every later one, to stop (safe in a signal handler).
void http_cancel_all();
bool http_cancelled();

// "minfer/<version>" for the User-Agent header.
void http_set_user_agent(std::string ua);

}  // namespace minfer::hub
