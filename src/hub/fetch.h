// Downloads one file so that it appears under its final name only complete and verified:
// bytes go to a partial file (kept on failure or Ctrl-C, resumed next time with Range), then
// size and digest are checked, the file is fsync'ed and renamed. Redirects are followed by
// hand; the token goes only to the first URL's origin. Transient failures (refused, reset,
// stalled, 5xx, 408, 429) are retried with exponential backoff (MINFER_HTTP_RETRY_MS, default
// 1000 ms, doubling, 6 tries; a try that received bytes resets the count). The caller holds the
// lock that makes it the only writer of `partial_path`.
//
//   FetchSpec f{.url = cdn_or_hub_url, .partial_path = blob + ".incomplete", .final_path = blob,
//               .expected_size = n, .digest = {ExpectedDigest::kSha256, hex}, .label = "x.gguf"};
//   f.auth_header = "Authorization: Bearer " + token;
//   if (Status s = fetch_file(f); !s.is_ok()) report(s.error());
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/status.h"
#include "hub/digest.h"
#include "hub/http-client.h"

namespace minfer::hub {

struct FetchSpec {
  std::string url;
  std::vector<std::string> headers;  // to every hop
  std::string auth_header;           // to the first URL's origin only ("" for none)
  std::string partial_path;
  std::string final_path;
  int64_t expected_size = -1;        // -1: unknown (then no size check)
  ExpectedDigest digest;
  std::string label;                 // progress and messages
  // Called as bytes arrive, first with what the partial file already holds: bytes held, total
  // (-1: unknown). False stops the download (the partial file is kept), as a cancel does.
  std::function<bool(int64_t have, int64_t total)> on_bytes;
};

Status fetch_file(const FetchSpec& spec);

// Worth another try: no answer at all (refused, reset, stalled), or 408, 429, 5xx.
bool http_transient(const Expected<HttpResponse>& r);

// The text of a failed HTTP answer: status, the server's X-Error-Message or the start of its body.
std::string describe_http_error(const HttpResponse& r);

// Follows redirects from `url` with `req` as a template (method, headers); `auth_header` is sent
// only while the hop stays on the first origin. Returns the first non-3xx answer.
Expected<HttpResponse> http_request_following(HttpRequest req, const std::string& auth_header,
                                              const BodySink& sink = {});

}  // namespace minfer::hub
