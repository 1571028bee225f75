#include "hub/fetch.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

#include "hub/env.h"
#include "hub/progress.h"
#include "hub/url.h"

namespace fs = std::filesystem;

namespace minfer::hub {

namespace {

constexpr int kMaxRedirects = 10;
constexpr int kMaxTries = 6;


// Expected<T> needs a value type; the reason a try failed and whether trying again can help.
struct TryResult {
  bool done = false;       // the file is complete in the partial
  bool retry = false;      // worth another try
  std::string error;
};

int64_t free_bytes(const std::string& dir) {
  struct statvfs s{};
  if (::statvfs(dir.c_str(), &s) != 0) return -1;
  return static_cast<int64_t>(s.f_bavail) * static_cast<int64_t>(s.f_frsize);
}

void fsync_dir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

}  // namespace

bool http_transient(const Expected<HttpResponse>& r) {
  return !r || r->status == 408 || r->status == 429 || r->status >= 500;
}

std::string describe_http_error(const HttpResponse& r) {
  std::string msg = "HTTP " + std::to_string(r.status);
  std::string detail = r.headers.get("X-Error-Message");
  if (detail.empty()) {
    detail = r.body.substr(0, 300);
    for (char& c : detail)
      if (c == '\n' || c == '\r') c = ' ';
  }
  if (!detail.empty()) msg += ": " + detail;
  return msg;
}

Expected<HttpResponse> http_request_following(HttpRequest req, const std::string& auth_header, const BodySink& sink) {
  const Origin first = url_origin(req.url);
  const std::vector<std::string> base_headers = req.headers;
  for (int hop = 0; hop <= kMaxRedirects; ++hop) {
    req.headers = base_headers;
    if (!auth_header.empty() && url_origin(req.url) == first) req.headers.push_back(auth_header);
    auto r = http_request(req, sink);
    if (!r) return r;
    const int st = r->status;
    const std::string loc = r->headers.get("Location");
    if (st >= 300 && st < 400 && !loc.empty()) {
      const std::string next = url_resolve(req.url, loc);
      if (!url_is_http(next)) return make_error("{}: refusing a redirect to '{}'", req.url, next);
      req.url = next;
      continue;
    }
    return r;
  }
  return make_error("{}: more than {} redirects", req.url, kMaxRedirects);
}

Status fetch_file(const FetchSpec& spec) {
  const std::string dir = fs::path(spec.partial_path).parent_path().string();
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return make_error("cannot create {}: {}", dir, ec.message());
  const int fd = ::open(spec.partial_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return make_error("cannot write {}: {}", spec.partial_path, std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};

  const int64_t want = spec.expected_size;  // -1: unknown
  const bool git_blob = spec.digest.kind == ExpectedDigest::kGitBlobSha1;
  Digest digest(git_blob ? Digest::kSha1 : Digest::kSha256);
  int64_t have = 0;  // bytes in the partial file, all hashed into `digest`
  auto reset_digest = [&] {
    digest.reset();
    if (git_blob) {
      const std::string head = "blob " + std::to_string(want);
      digest.update(head.data(), head.size() + 1);  // with its NUL
    }
  };
  auto start_over = [&]() -> Status {
    if (::ftruncate(fd, 0) != 0) return make_error("cannot truncate {}: {}", spec.partial_path, std::strerror(errno));
    have = 0;
    reset_digest();
    return Status::ok();
  };
  auto interrupted = [&] {
    return make_error("download of {} interrupted; {} of it kept in {} for the next try", spec.label, human_bytes(have),
                      spec.partial_path);
  };

  // Continue the partial file when it can be the start of this one.
  reset_digest();
  struct stat st{};
  if (::fstat(fd, &st) != 0) return make_error("cannot stat {}: {}", spec.partial_path, std::strerror(errno));
  if (st.st_size > 0 && (want < 0 || st.st_size <= want)) {
    std::vector<char> buf(1 << 20);
    while (have < st.st_size) {
      if (http_cancelled()) return interrupted();
      const size_t len = static_cast<size_t>(std::min<int64_t>(st.st_size - have, static_cast<int64_t>(buf.size())));
      const ssize_t r = ::pread(fd, buf.data(), len, have);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return make_error("cannot read {}: {}", spec.partial_path, r < 0 ? std::strerror(errno) : "file shrank");
      digest.update(buf.data(), static_cast<size_t>(r));
      have += r;
    }
  } else if (st.st_size > 0) {
    if (Status s = start_over(); !s.is_ok()) return s;
  }
  if (want > 0) {
    const int64_t free = free_bytes(dir);
    if (free >= 0 && free < want - have)
      return make_error("not enough disk space for {}: it needs {} more, {} has {} free", spec.label,
                        human_bytes(want - have), dir, human_bytes(free));
  }

  Progress progress(spec.label, want, have);
  bool stopped = false;  // by spec.on_bytes
  auto report = [&] {
    if (spec.on_bytes && !spec.on_bytes(have, want)) stopped = true;
    return !stopped;
  };
  if (!report()) return interrupted();
  int64_t best = have;  // the most the partial file ever held: a try helps only if it gets past it
  int tries_left = kMaxTries;
  int backoff_ms = retry_base_ms();
  for (;;) {
    if (want >= 0 && have == want) break;  // complete (or nothing to fetch)
    TryResult t;
    const int64_t have_before = have;
    bool first_chunk = true;
    bool overflow = false;
    std::string range_error, write_error;
    HttpRequest req = http_get(spec.url);
    req.headers = spec.headers;
    req.range_from = have > 0 ? have : -1;
    auto sink = [&](const HttpResponse& head, const char* p, size_t n) -> bool {
      if (http_cancelled()) return false;
      if (first_chunk) {
        first_chunk = false;
        if (have_before > 0 && head.status == 200) {
          // Asked for the rest, got the whole file: discard what we had and take this one.
          if (Status s = start_over(); !s.is_ok()) {
            write_error = s.error().message;
            return false;
          }
          progress.restart();
        } else if (head.status == 206) {
          const std::string cr = head.headers.get("Content-Range");
          const std::string from = "bytes " + std::to_string(have_before) + "-";
          const size_t slash = cr.rfind('/');
          const std::string total = slash == std::string::npos ? "" : cr.substr(slash + 1);
          if (!cr.starts_with(from) || (want >= 0 && total != "*" && total != std::to_string(want))) {
            range_error = "the server answered range " + std::to_string(have_before) + "- with '" + cr + "'";
            return false;
          }
        }
      }
      if (want >= 0 && have + static_cast<int64_t>(n) > want) {
        overflow = true;
        return false;
      }
      size_t done = 0;
      while (done < n) {
        const ssize_t w = ::pwrite(fd, p + done, n - done, have);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
          write_error = std::strerror(w < 0 ? errno : ENOSPC);
          return false;
        }
        done += static_cast<size_t>(w);
        have += w;
      }
      digest.update(p, n);
      progress.add(static_cast<int64_t>(n));
      return report();
    };
    Expected<HttpResponse> resp = http_request_following(req, spec.auth_header, sink);
    if (http_cancelled() || stopped) {
      progress.abandon();
      return interrupted();
    }
    if (!write_error.empty()) {
      progress.abandon();
      return make_error("cannot write {} ({} written): {}", spec.partial_path, human_bytes(have), write_error);
    }
    if (!range_error.empty() || overflow) {
      t.error = overflow ? "the server sent more than the " + std::to_string(want) + " bytes the file has" : range_error;
      if (Status s = start_over(); !s.is_ok()) return s;
      t.retry = true;
    } else if (!resp) {
      t.retry = true;
      t.error = resp.error().message;
    } else if (resp->status == 200 || resp->status == 206) {
      if (want < 0 || have == want) {
        t.done = true;
      } else {
        t.error = "the transfer ended at " + std::to_string(have) + " of " + std::to_string(want) + " bytes";
        t.retry = true;
      }
    } else if (resp->status == 416 && have > 0) {
      if (want < 0) {
        t.done = true;  // nothing past what we have; the digest decides
      } else {
        t.error = "the server refused the range " + std::to_string(have) + "- (HTTP 416)";
        if (Status s = start_over(); !s.is_ok()) return s;
        t.retry = true;
      }
    } else {
      t.error = describe_http_error(*resp) + " from " + resp->url;
      t.retry = http_transient(resp);
    }
    if (t.done) break;
    if (have > best) {
      best = have;
      tries_left = kMaxTries;
      backoff_ms = retry_base_ms();
    }
    progress.abandon();
    if (!t.retry || --tries_left <= 0) {
      return make_error("cannot download {}: {}{}", spec.label, t.error,
                        have > 0 ? "; " + human_bytes(have) + " kept in " + spec.partial_path + " for the next try" : "");
    }
    std::fprintf(stderr, "%s: %s; retrying in %.1f s\n", spec.label.c_str(), t.error.c_str(), backoff_ms / 1000.0);
    backoff_sleep(backoff_ms);
    backoff_ms = std::min(backoff_ms * 2, 30000);
  }

  progress.finish();
  if (spec.digest.kind != ExpectedDigest::kNone) {
    const std::string got = digest.hex();
    if (got != spec.digest.hex) {
      ::unlink(spec.partial_path.c_str());
      return make_error("checksum mismatch for {}: expected {} {}, got {}; the partial file was deleted, run again to "
                        "download it anew",
                        spec.label, git_blob ? "git sha1" : "sha256", spec.digest.hex, got);
    }
  }
  if (::fsync(fd) != 0) return make_error("cannot flush {}: {}", spec.partial_path, std::strerror(errno));
  if (::rename(spec.partial_path.c_str(), spec.final_path.c_str()) != 0)
    return make_error("cannot rename {} to {}: {}", spec.partial_path, spec.final_path, std::strerror(errno));
  fsync_dir(fs::path(spec.final_path).parent_path().string());
  return Status::ok();
}

}  // namespace minfer::hub
