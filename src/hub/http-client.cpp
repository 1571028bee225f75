#include "hub/http-client.h"

#include <curl/curl.h>

#include <atomic>
#include <cctype>
#include <mutex>

namespace minfer::hub {

namespace {

std::atomic<bool> g_cancel{false};
std::string g_user_agent = "minfer";

bool iequal(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  return true;
}

std::string trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && (s[b] == ' ' || s[b] == '\t')) ++b;
  while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\t' || s[e - 1] == '\r' || s[e - 1] == '\n')) --e;
  return std::string(s.substr(b, e - b));
}

constexpr size_t kMaxErrorBody = 64u << 10;

struct Transfer {
  HttpResponse* resp;
  const BodySink* sink;
  size_t max_body;
  bool sink_refused = false;
  bool too_big = false;
  bool error_capped = false;
};

size_t on_header(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const std::string_view line(data, size * n);
  if (line.starts_with("HTTP/")) {  // a new response (e.g. after 100 Continue): start over
    t->resp->headers.items.clear();
    const size_t sp = line.find(' ');
    t->resp->status = sp == std::string_view::npos ? 0 : std::atoi(std::string(line.substr(sp + 1, 3)).c_str());
  } else if (const size_t colon = line.find(':'); colon != std::string_view::npos) {
    t->resp->headers.items.emplace_back(trim(line.substr(0, colon)), trim(line.substr(colon + 1)));
  }
  return size * n;
}

size_t on_body(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t len = size * n;
  const int st = t->resp->status;
  if (st >= 200 && st < 300) {
    if (t->sink && *t->sink) {
      if (!(*t->sink)(*t->resp, data, len)) {
        t->sink_refused = true;
        return 0;  // aborts with CURLE_WRITE_ERROR
      }
      return len;
    }
    if (t->resp->body.size() + len > t->max_body) {
      t->too_big = true;
      return 0;
    }
  } else if (t->resp->body.size() + len > kMaxErrorBody) {
    // Enough of an error body for a message: keep the first 64 KiB and stop reading.
    t->resp->body.append(data, kMaxErrorBody - t->resp->body.size());
    t->error_capped = true;
    return 0;
  }
  t->resp->body.append(data, len);
  return len;
}

int on_progress(void*, curl_off_t, curl_off_t, curl_off_t, curl_off_t) { return g_cancel.load() ? 1 : 0; }

void global_init() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

}  // namespace

std::string HttpHeaders::get(std::string_view name) const {
  std::string v;
  for (const auto& [k, val] : items)
    if (iequal(k, name)) v = val;
  return v;
}

bool HttpHeaders::has(std::string_view name) const {
  for (const auto& kv : items)
    if (iequal(kv.first, name)) return true;
  return false;
}

void http_cancel_all() { g_cancel.store(true); }
bool http_cancelled() { return g_cancel.load(); }
void http_set_user_agent(std::string ua) { g_user_agent = std::move(ua); }

Expected<HttpResponse> http_request(const HttpRequest& req, const BodySink& sink) {
  global_init();
  if (g_cancel.load()) return make_error("{}: interrupted", req.url);
  CURL* c = curl_easy_init();
  if (!c) return make_error("{}: cannot start an HTTP transfer (curl_easy_init failed)", req.url);
  HttpResponse resp;
  resp.url = req.url;
  Transfer t{&resp, &sink, req.max_body};
  curl_slist* hdrs = nullptr;
  for (const std::string& h : req.headers) hdrs = curl_slist_append(hdrs, h.c_str());
  // Sizes and digests are of the bytes as stored: never ask for a compressed encoding.
  hdrs = curl_slist_append(hdrs, "Accept-Encoding: identity");
  char errbuf[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(c, CURLOPT_URL, req.url.c_str());
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
  curl_easy_setopt(c, CURLOPT_USERAGENT, g_user_agent.c_str());
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, static_cast<long>(req.connect_timeout_s));
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, static_cast<long>(req.stall_timeout_s));
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &t);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &t);
  curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
  if (req.method == "HEAD") curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
  std::string range;
  if (req.range_from >= 0) {
    range = std::to_string(req.range_from) + "-";
    curl_easy_setopt(c, CURLOPT_RANGE, range.c_str());
  }
  const CURLcode rc = curl_easy_perform(c);
  curl_slist_free_all(hdrs);
  curl_easy_cleanup(c);
  if (rc != CURLE_OK) {
    if (t.error_capped) return resp;
    if (t.sink_refused) return make_error("{}: transfer stopped by the receiver", req.url);
    if (t.too_big) return make_error("{}: answer larger than {} bytes", req.url, req.max_body);
    if (rc == CURLE_ABORTED_BY_CALLBACK) return make_error("{}: interrupted", req.url);
    return make_error("{}: {}", req.url, errbuf[0] ? errbuf : curl_easy_strerror(rc));
  }
  return resp;
}

}  // namespace minfer::hub
