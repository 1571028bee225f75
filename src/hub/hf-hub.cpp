#include "hub/hf-hub.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <thread>

#include <nlohmann/json.hpp>

#include "hub/digest.h"
#include "hub/env.h"
#include "hub/fetch.h"
#include "hub/file-lock.h"
#include "hub/gguf-pick.h"
#include "hub/hf-cache.h"
#include "hub/http-client.h"
#include "hub/url.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace minfer::hub {

namespace {

bool repo_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
}

std::string normalize_etag(std::string e) {
  if (e.starts_with("W/")) e = e.substr(2);
  if (e.size() >= 2 && e.front() == '"' && e.back() == '"') e = e.substr(1, e.size() - 2);
  for (char& c : e) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return e;
}

bool on_hub(const std::string& url) { return url_origin(url) == url_origin(hf_endpoint()); }

std::string auth_header() {
  const std::string t = hf_token();
  return t.empty() ? "" : "Authorization: Bearer " + t;
}

// The Hub's error in plain words.
Error hub_error(const HfName& n, const HttpResponse& r, const std::string& file = "") {
  const std::string code = r.headers.get("X-Error-Code");
  const std::string msg = r.headers.get("X-Error-Message");
  const std::string where = " (" + hf_endpoint() + ", HTTP " + std::to_string(r.status) + ")";
  if (code == "RevisionNotFound")
    return make_error("hf:{} has no revision '{}'{}", n.repo_id, n.revision, where);
  if (code == "EntryNotFound")
    return make_error("hf:{} has no file '{}' at revision '{}'{}", n.repo_id, file, n.revision, where);
  if (code == "GatedRepo")
    return make_error("hf:{} is a gated repository: accept its conditions at {}/{} and set HF_TOKEN to a token of "
                      "that account{}",
                      n.repo_id, hf_endpoint(), n.repo_id, where);
  if (r.status == 401 && msg == "Invalid credentials in Authorization header")
    return make_error("the Hub rejected the token in HF_TOKEN (invalid credentials){}", where);
  if (code == "RepoNotFound" || r.status == 401)
    return make_error("hf:{}: repository not found{}; if it is private or gated, {}", n.repo_id, where,
                      hf_token().empty() ? "set HF_TOKEN to a token with access"
                                         : "the token in HF_TOKEN has no access to it");
  return make_error("hf:{}: {}{}", n.repo_id, describe_http_error(r), where);
}

std::string failure(const HttpRequest& req, const Expected<HttpResponse>& r) {
  return r ? req.url + ": " + describe_http_error(*r) : r.error().message;
}

// A request to the Hub API, tried up to `tries` times on transient failures; the token goes to
// the Hub only.
Expected<HttpResponse> hub_call(const HttpRequest& req, int tries) {
  Expected<HttpResponse> r = make_error("unreached");
  with_retries(tries, [&](std::string* why) {
    r = http_request_following(req, on_hub(req.url) ? auth_header() : "");
    *why = failure(req, r);
    return !http_transient(r);
  });
  return r;
}

// "<url>; rel=\"next\"" in a Link header.
std::string next_link(const std::string& link) {
  for (size_t at = 0; (at = link.find('<', at)) != std::string::npos;) {
    const size_t close = link.find('>', at);
    if (close == std::string::npos) break;
    const size_t comma = link.find(',', close);
    const std::string params = link.substr(close + 1, comma == std::string::npos ? std::string::npos : comma - close - 1);
    if (params.find("rel=\"next\"") != std::string::npos) return link.substr(at + 1, close - at - 1);
    at = close;
  }
  return "";
}

struct RepoListing {
  std::string commit;
  std::vector<std::string> paths;
  std::map<std::string, int64_t> sizes;
};

// `quick` (the cache holds an answer): one try with a 5 s connect timeout, so that a Hub out of
// reach costs a moment, not the backoff. `*unreachable`: the failure was the network's or a
// transient answer (http_transient), not the Hub saying no.
Expected<RepoListing> list_repo(const HfName& n, bool quick, bool* unreachable) {
  auto call = [&](const std::string& url) {
    HttpRequest req = http_get(url);
    if (quick) req.connect_timeout_s = 5;
    auto r = hub_call(req, quick ? 1 : 5);
    *unreachable = http_transient(r);
    return r;
  };
  RepoListing out;
  const std::string base = hf_endpoint() + "/api/models/" + n.repo_id;
  auto info = call(base + "/revision/" + url_escape(n.revision));
  if (!info) return info.error();
  if (info->status != 200) return hub_error(n, *info);
  try {
    out.commit = json::parse(info->body).at("sha").get<std::string>();
  } catch (const std::exception& e) {
    return make_error("hf:{}: the Hub's repository info has no commit ('sha'): {}", n.repo_id, e.what());
  }
  if (!is_hex(out.commit, 40)) return make_error("hf:{}: the Hub gave '{}' as the commit, not a 40-hex hash", n.repo_id, out.commit);
  std::string url = base + "/tree/" + out.commit + "?recursive=true&expand=false";
  for (int page = 0; !url.empty(); ++page) {
    if (page > 10000) return make_error("hf:{}: the file listing does not end", n.repo_id);
    auto r = call(url);
    if (!r) return r.error();
    if (r->status != 200) return hub_error(n, *r);
    try {
      for (const json& e : json::parse(r->body)) {
        if (e.value("type", "") != "file") continue;
        const std::string p = e.at("path").get<std::string>();
        if (!safe_relative_path(p)) continue;  // never a file name of ours
        out.paths.push_back(p);
        if (e.contains("lfs") && e["lfs"].contains("size")) out.sizes[p] = e["lfs"]["size"].get<int64_t>();
        else if (e.contains("size")) out.sizes[p] = e["size"].get<int64_t>();
      }
    } catch (const std::exception& e) {
      return make_error("hf:{}: bad file listing from {}: {}", n.repo_id, url, e.what());
    }
    url = next_link(r->headers.get("Link"));
    if (!url.empty()) url = url_resolve(r->url, url);
    if (!url.empty() && !on_hub(url))
      return make_error("hf:{}: the file listing continues on another host ({}); not following it", n.repo_id, url);
  }
  return out;
}

struct FileMeta {
  std::string etag, location, commit;
  int64_t size = -1;
};

// HEAD on resolve/: follows redirects that stay on the Hub; one to another host (the CDN) is
// where the bytes are, and its answer carries the metadata.
Expected<FileMeta> file_metadata(const HfName& n, const std::string& commit, const std::string& file) {
  const Origin hub = url_origin(hf_endpoint());
  HttpRequest req = http_get(hf_endpoint() + "/" + n.repo_id + "/resolve/" + commit + "/" + url_escape_path(file));
  req.method = "HEAD";
  for (int hop = 0; hop < 10; ++hop) {
    HttpRequest h = req;
    if (std::string a = auth_header(); !a.empty()) h.headers.push_back(a);
    Expected<HttpResponse> r = make_error("unreached");
    with_retries(5, [&](std::string* why) {
      r = http_request(h);
      *why = failure(h, r);
      return !http_transient(r);
    });
    if (!r) return r.error();
    const int st = r->status;
    const std::string loc = r->headers.get("Location");
    const bool redirect = st >= 300 && st < 400 && !loc.empty();
    if (!redirect && st >= 400) return hub_error(n, *r, file);
    const std::string target = redirect ? url_resolve(req.url, loc) : req.url;
    if (redirect && !url_is_http(target)) return make_error("hf:{}: refusing a redirect to '{}'", n.repo_id, target);
    if (redirect && url_origin(target) == hub) {
      req.url = target;
      continue;
    }
    FileMeta m;
    m.etag = normalize_etag(!r->headers.get("X-Linked-Etag").empty() ? r->headers.get("X-Linked-Etag") : r->headers.get("ETag"));
    m.commit = r->headers.get("X-Repo-Commit");
    m.location = target;
    std::string size = r->headers.get("X-Linked-Size");
    if (size.empty() && !redirect) size = r->headers.get("Content-Length");
    if (!size.empty()) m.size = std::atoll(size.c_str());
    if (m.etag.empty()) return make_error("hf:{}: the Hub sent no ETag for '{}', so it cannot be verified", n.repo_id, file);
    if (!is_hex(m.etag, 64) && !is_hex(m.etag, 40))
      return make_error("hf:{}: ETag '{}' for '{}' is neither a sha256 nor a git sha1, so it cannot be verified", n.repo_id,
                        m.etag, file);
    return m;
  }
  return make_error("hf:{}: too many redirects resolving '{}'", n.repo_id, file);
}

Status download_one(const HfName& n, const std::string& commit, const std::string& file, int64_t listed_size, const PullEvents& ev) {
  auto meta = file_metadata(n, commit, file);
  if (!meta) return meta.error();
  if (meta->size < 0) meta->size = listed_size;
  if (listed_size >= 0 && meta->size != listed_size)
    return make_error("hf:{}: '{}' is {} bytes in the listing but {} in its metadata", n.repo_id, file, listed_size, meta->size);
  const std::string blob = hf_blob_path(n.repo_id, meta->etag);
  auto lock = FileLock::acquire(hf_lock_path(n.repo_id, meta->etag), [&] {
    std::fprintf(stderr, "waiting for another process that is downloading %s\n", file.c_str());
  });
  if (!lock) return lock.error();
  std::error_code ec;
  const std::string digest = (is_hex(meta->etag, 64) ? "sha256:" : "sha1:") + meta->etag;
  if (fs::exists(blob, ec) && ev.bytes) ev.bytes(digest, meta->size, meta->size);
  if (!fs::exists(blob, ec)) {
    // Through resolve/ on every try: a signed CDN link may expire during retries; each try
    // gets a fresh one, and the token stays on the Hub.
    FetchSpec f;
    f.url = hf_endpoint() + "/" + n.repo_id + "/resolve/" + commit + "/" + url_escape_path(file);
    f.auth_header = auth_header();
    f.partial_path = blob + ".incomplete";
    f.final_path = blob;
    f.expected_size = meta->size;
    if (is_hex(meta->etag, 64)) f.digest = {ExpectedDigest::kSha256, meta->etag};
    else if (meta->size >= 0) f.digest = {ExpectedDigest::kGitBlobSha1, meta->etag};
    else return make_error("hf:{}: the Hub sent no size for '{}', so it cannot be verified", n.repo_id, file);
    f.label = fs::path(file).filename().string();
    if (ev.bytes) f.on_bytes = [&](int64_t have, int64_t total) { return ev.bytes(digest, total, have); };
    if (Status s = fetch_file(f); !s.is_ok()) return s;
  }
  return hf_link_snapshot(n.repo_id, commit, file, meta->etag);
}

}  // namespace

std::string HfName::text() const {
  std::string s = "hf:" + repo_id;
  if (revision != "main") s += "@" + revision;
  if (!tag.empty()) s += ":" + tag;
  return s;
}

std::string hf_endpoint() {
  const char* e = std::getenv("HF_ENDPOINT");
  std::string s = e && *e ? e : "https://huggingface.co";
  while (s.ends_with("/")) s.pop_back();
  return s;
}

Expected<HfName> parse_hf_name(const std::string& s) {
  if (!s.starts_with("hf:")) return make_error("'{}' is not an hf: name", s);
  std::string rest = s.substr(3);
  while (rest.starts_with("/")) rest = rest.substr(1);  // hf://org/repo
  HfName n;
  const size_t slash = rest.find('/');
  const size_t colon = rest.find(':', slash == std::string::npos ? 0 : slash);
  std::string repo = rest.substr(0, colon);
  if (colon != std::string::npos) n.tag = rest.substr(colon + 1);
  if (const size_t at = repo.find('@'); at != std::string::npos) {
    n.revision = repo.substr(at + 1);
    repo = repo.substr(0, at);
    if (!safe_relative_path(n.revision)) return make_error("'{}': bad revision '{}'", s, n.revision);
  }
  const size_t sl = repo.find('/');
  const bool ok = sl != std::string::npos && sl > 0 && sl + 1 < repo.size() && repo.find('/', sl + 1) == std::string::npos &&
                  std::all_of(repo.begin(), repo.end(), [](char c) { return c == '/' || repo_char(c); }) &&
                  repo.find("..") == std::string::npos;
  if (!ok) return make_error("'{}': expected hf:ORG/REPO[@REVISION][:QUANT|:FILE.gguf], e.g. hf:bartowski/Qwen2.5-0.5B-Instruct-GGUF:Q4_K_M", s);
  if (colon != std::string::npos && !safe_relative_path(n.tag)) return make_error("'{}': bad quant or file '{}'", s, n.tag);
  n.repo_id = repo;
  return n;
}

Expected<HfCachedPick> hf_find_cached(const HfName& n) {
  const std::string commit = hf_cached_commit(n.repo_id, n.revision);
  if (commit.empty()) return make_error("{} is not in the Hugging Face cache ({})", n.text(), hf_hub_cache_dir());
  const std::vector<std::string> files = hf_snapshot_files(n.repo_id, commit);
  auto pick = pick_gguf(files, n.tag);
  if (!pick) return make_error("{} in the Hugging Face cache ({}): {}", n.text(), hf_repo_dir(n.repo_id), pick.error().message);
  return HfCachedPick{commit, pick->files};
}

Expected<HfResolved> hf_resolve(const HfName& n, bool allow_network, const PullEvents* ev_in) {
  const PullEvents none;
  const PullEvents& ev = ev_in ? *ev_in : none;
  // A quant or a file names one file, so the cache answers first. No tag names the repository's
  // default file, which only its listing knows: the Hub is asked even when another file of the
  // repository is cached, and the same rule over the cached files answers only without the Hub.
  auto cached = hf_find_cached(n);
  auto from_cache = [&](const std::string& why, const std::string& detail = "") {
    if (n.tag.empty())
      std::fprintf(stderr, "%s: %s; using the cached %s by the default-file rule over cached files%s\n", n.text().c_str(),
                   why.c_str(), cached->files.front().c_str(), detail.empty() ? "" : (" (" + detail + ")").c_str());
    HfResolved out;
    for (const std::string& f : cached->files) out.paths.push_back(hf_snapshot_path(n.repo_id, cached->commit, f));
    return out;
  };
  const char* no_network = hf_offline() ? "HF_HUB_OFFLINE is set" : !allow_network ? "downloads are off" : nullptr;
  if (cached && (!n.tag.empty() || no_network)) return from_cache(no_network ? no_network : "");
  if (no_network) return make_error("{} is not in the Hugging Face cache ({}) and {}", n.text(), hf_hub_cache_dir(), no_network);
  bool unreachable = false;
  ev.say("pulling manifest");  // the repository's listing is its manifest
  auto listing = list_repo(n, /*quick=*/bool(cached), &unreachable);
  if (!listing && unreachable && cached) return from_cache("the Hub is unreachable", listing.error().message);
  if (!listing) return listing.error();
  HfResolved out;
  auto pick = pick_gguf(listing->paths, n.tag);
  if (!pick) return make_error("{}: {}", n.text(), pick.error().message);
  for (const std::string& f : pick->files) {
    const std::string link = hf_snapshot_path(n.repo_id, listing->commit, f);
    std::error_code ec;
    if (!fs::exists(link, ec)) {
      const auto it = listing->sizes.find(f);
      if (Status s = download_one(n, listing->commit, f, it == listing->sizes.end() ? -1 : it->second, ev); !s.is_ok()) return s.error();
      out.downloaded = true;
    }
    out.paths.push_back(link);
  }
  ev.say("verifying sha256 digest");  // each file was checked as it arrived (fetch_file)
  ev.say("writing manifest");
  if (Status s = hf_write_ref(n.repo_id, n.revision, listing->commit); !s.is_ok()) return s.error();
  return out;
}

}  // namespace minfer::hub
