#include "hub/ollama.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/atomic-file.h"
#include "hub/digest.h"
#include "hub/env.h"
#include "hub/fetch.h"
#include "hub/file-lock.h"
#include "hub/gguf-pick.h"
#include "hub/http-client.h"
#include "hub/url.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace minfer::hub {

namespace {

constexpr const char* kModelMedia = "application/vnd.ollama.image.model";
constexpr const char* kManifestAccept =
    "Accept: application/vnd.docker.distribution.manifest.v2+json, application/vnd.oci.image.manifest.v1+json";

bool name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
}

// The registry's host as Ollama writes it in manifests/ (port only when not the default).
std::string registry_host() {
  const Origin o = url_origin(ollama_registry());
  const int def = o.scheme == "https" ? 443 : 80;
  return o.port == def ? o.host : o.host + ":" + std::to_string(o.port);
}

Expected<std::string> read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return make_error("cannot read {}", p.string());
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Layer {
  std::string media, digest;
  int64_t size = 0;
};

Expected<std::vector<Layer>> parse_manifest(const std::string& text, const std::string& where) {
  std::vector<Layer> layers;
  try {
    const json m = json::parse(text);
    auto add = [&](const json& l) {
      Layer x{l.value("mediaType", ""), l.at("digest").get<std::string>(), l.value("size", int64_t{0})};
      for (char& c : x.digest) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (!x.digest.starts_with("sha256:") || !is_hex(x.digest.substr(7), 64))
        throw std::runtime_error("layer digest '" + x.digest + "' is not sha256:<64 hex>");
      layers.push_back(x);
    };
    if (m.contains("config")) add(m["config"]);
    for (const json& l : m.at("layers")) add(l);
  } catch (const std::exception& e) {
    return make_error("bad Ollama manifest {}: {}", where, e.what());
  }
  return layers;
}

fs::path blob_path(const fs::path& store, const std::string& digest) {
  return store / "blobs" / ("sha256-" + digest.substr(7));
}

// The manifest of `n` in `store`: under the configured registry's host first, then any host.
fs::path find_manifest(const fs::path& store, const OllamaName& n) {
  std::error_code ec;
  const fs::path preferred = store / "manifests" / registry_host() / n.ns / n.model / n.tag;
  if (fs::is_regular_file(preferred, ec)) return preferred;
  for (const fs::path& host : dir_entries(store / "manifests")) {
    const fs::path p = host / n.ns / n.model / n.tag;
    if (fs::is_regular_file(p, ec)) return p;
  }
  return {};
}

Expected<OllamaModel> model_in_store(const fs::path& store, const OllamaName& n, bool read_only) {
  const fs::path mp = find_manifest(store, n);
  if (mp.empty()) return make_error("{} is not in {}", n.text(), store.string());
  auto text = read_file(mp);
  if (!text) return text.error();
  auto layers = parse_manifest(*text, mp.string());
  if (!layers) return layers.error();
  for (const Layer& l : *layers) {
    if (l.media != kModelMedia) continue;
    const fs::path b = blob_path(store, l.digest);
    std::error_code ec;
    if (!fs::is_regular_file(b, ec)) return make_error("{}: its model blob {} is missing", n.text(), b.string());
    OllamaModel m;
    m.path = b.string();
    m.size = static_cast<int64_t>(fs::file_size(b, ec));
    m.store = store.string();
    m.manifest_path = mp.string();
    m.read_only = read_only;
    return m;
  }
  return make_error("{}: the manifest {} has no model layer ({})", n.text(), mp.string(), kModelMedia);
}

Error registry_error(const OllamaName& n, const HttpResponse& r, const std::string& what) {
  std::string detail;
  try {
    const json j = json::parse(r.body);
    for (const json& e : j.at("errors")) detail += (detail.empty() ? "" : "; ") + e.value("code", "") + ": " + e.value("message", "");
  } catch (...) {
  }
  if (r.status == 404)
    return make_error("{}: not found in the Ollama registry {} ({}{})", n.text(), ollama_registry(), what,
                      detail.empty() ? "" : ", " + detail);
  return make_error("{}: the Ollama registry {} answered {} for {}{}", n.text(), ollama_registry(), describe_http_error(r),
                    what, detail.empty() ? "" : " (" + detail + ")");
}

Status write_atomically(const fs::path& p, const std::string& text) {
  std::error_code ec;
  fs::create_directories(p.parent_path(), ec);
  if (ec) return make_error("cannot create {}: {}", p.parent_path().string(), ec.message());
  return write_file_atomic(p.string(), text);
}

}  // namespace

std::string OllamaName::text() const {
  return "ollama:" + (ns == "library" ? "" : ns + "/") + model + ":" + tag;
}

Expected<OllamaName> parse_ollama_name(const std::string& s) {
  if (!s.starts_with("ollama:")) return make_error("'{}' is not an ollama: name", s);
  std::string rest = s.substr(7);
  OllamaName n;
  if (const size_t colon = rest.find(':'); colon != std::string::npos) {
    n.tag = rest.substr(colon + 1);
    rest = rest.substr(0, colon);
  }
  if (const size_t slash = rest.find('/'); slash != std::string::npos) {
    n.ns = rest.substr(0, slash);
    rest = rest.substr(slash + 1);
  }
  n.model = rest;
  auto valid = [](const std::string& x) {
    return !x.empty() && x != "." && x != ".." && std::all_of(x.begin(), x.end(), name_char);
  };
  if (!valid(n.ns) || !valid(n.model) || !valid(n.tag))
    return make_error("'{}': expected ollama:[NAMESPACE/]MODEL[:TAG], e.g. ollama:qwen2.5:0.5b", s);
  return n;
}

std::string ollama_registry() {
  std::string s = env_var("MINFER_OLLAMA_REGISTRY");
  if (s.empty()) s = "https://registry.ollama.ai";
  while (s.ends_with("/")) s.pop_back();
  return s;
}

std::string minfer_ollama_dir() {
  if (std::string d = env_var("MINFER_OLLAMA_DIR"); !d.empty()) return d;
  if (std::string x = env_var("XDG_CACHE_HOME"); !x.empty()) return (fs::path(x) / "minfer" / "ollama").string();
  return (fs::path(home_dir()) / ".cache" / "minfer" / "ollama").string();
}

std::string ollama_store_dir() {
  if (std::string d = env_var("OLLAMA_MODELS"); !d.empty()) return d;
  return (fs::path(home_dir()) / ".ollama" / "models").string();
}

Expected<OllamaModel> ollama_resolve(const OllamaName& n, bool allow_network, const PullEvents* ev) {
  const PullEvents none;
  if (!ev) ev = &none;
  if (auto m = model_in_store(minfer_ollama_dir(), n, false)) return m;
  if (auto m = model_in_store(ollama_store_dir(), n, true)) return m;
  if (!allow_network || !env_var("MINFER_OFFLINE").empty())
    return make_error("{} is in neither {} nor Ollama's store {}", n.text(), minfer_ollama_dir(), ollama_store_dir());
  const std::string base = ollama_registry() + "/v2/" + n.ns + "/" + n.model;
  ev->say("pulling manifest");
  HttpRequest req = http_get(base + "/manifests/" + n.tag);
  req.headers = {kManifestAccept};
  Expected<HttpResponse> r = make_error("unreached");
  with_retries(5, [&](std::string* why) {
    r = http_request_following(req, "");
    *why = r ? req.url + ": " + describe_http_error(*r) : r.error().message;
    return !http_transient(r);
  });
  if (!r) return make_error("{}: {}", n.text(), r.error().message);
  if (r->status != 200) return registry_error(n, *r, "manifest " + n.ns + "/" + n.model + ":" + n.tag);
  auto layers = parse_manifest(r->body, req.url);
  if (!layers) return layers.error();
  if (std::none_of(layers->begin(), layers->end(), [](const Layer& l) { return l.media == kModelMedia; }))
    return make_error("{}: the manifest has no model layer ({})", n.text(), kModelMedia);
  const fs::path store = minfer_ollama_dir();
  for (const Layer& l : *layers) {
    const fs::path b = blob_path(store, l.digest);
    auto lock = FileLock::acquire((store / ".locks" / (b.filename().string() + ".lock")).string(), [&] {
      std::fprintf(stderr, "waiting for another process that is downloading %s\n", b.filename().c_str());
    });
    if (!lock) return lock.error();
    std::error_code ec;
    if (fs::is_regular_file(b, ec)) {
      if (ev->bytes) ev->bytes(l.digest, l.size, l.size);
      continue;
    }
    FetchSpec f;
    f.url = base + "/blobs/" + l.digest;
    f.partial_path = b.string() + "-partial";
    f.final_path = b.string();
    f.expected_size = l.size > 0 ? l.size : -1;
    f.digest = {ExpectedDigest::kSha256, l.digest.substr(7)};
    f.label = n.text() + (l.media == kModelMedia ? "" : " (" + l.media.substr(l.media.rfind('.') + 1) + ")");
    if (ev->bytes) f.on_bytes = [&](int64_t have, int64_t total) { return ev->bytes(l.digest, total, have); };
    if (Status s = fetch_file(f); !s.is_ok()) return s.error();
  }
  ev->say("verifying sha256 digest");  // each layer was checked as it arrived (fetch_file)
  ev->say("writing manifest");
  const fs::path mp = store / "manifests" / registry_host() / n.ns / n.model / n.tag;
  if (Status s = write_atomically(mp, r->body); !s.is_ok()) return s.error();
  auto m = model_in_store(store, n, false);
  if (m) m->downloaded = true;
  return m;
}

Expected<OllamaModel> ollama_copy(const std::string& gguf_path, const OllamaName& dst) {
  const std::string base = fs::path(gguf_path).filename().string();
  if (gguf_split_name(base).count > 1)
    return make_error("{}: '{}' is part of a split model, which one Ollama model layer cannot hold", dst.text(), gguf_path);
  std::error_code ec;
  const fs::path real = fs::canonical(gguf_path, ec);
  if (ec) return make_error("{}: cannot read '{}': {}", dst.text(), gguf_path, ec.message());
  // The file's SHA-256: an Ollama blob's name, a Hugging Face LFS blob's name (its etag), else hashed.
  std::string hex = real.filename().string();
  if (hex.starts_with("sha256-")) hex.erase(0, 7);
  if (!is_hex(hex, 64)) {
    auto d = file_digest(real.string(), {ExpectedDigest::kSha256, ""});
    if (!d) return d.error();
    hex = *d;
  }
  const fs::path store = minfer_ollama_dir();
  const std::string digest = "sha256:" + hex;
  const fs::path b = blob_path(store, digest);
  if (!fs::is_regular_file(b, ec)) {
    fs::create_directories(b.parent_path(), ec);
    fs::create_hard_link(real, b, ec);  // another file system: a copy, renamed into place once whole
    if (ec) {
      const fs::path partial = b.string() + "-partial";
      if (!fs::copy_file(real, partial, fs::copy_options::overwrite_existing, ec) || ec)
        return make_error("{}: cannot copy '{}' to {}: {}", dst.text(), real.string(), partial.string(), ec.message());
      fs::rename(partial, b, ec);
      if (ec) return make_error("{}: cannot rename {}: {}", dst.text(), partial.string(), ec.message());
    }
  }
  const json manifest = {{"schemaVersion", 2}, {"mediaType", "application/vnd.docker.distribution.manifest.v2+json"},
                         {"layers", json::array({{{"mediaType", kModelMedia}, {"digest", digest}, {"size", fs::file_size(b, ec)}}})}};
  const fs::path mp = store / "manifests" / registry_host() / dst.ns / dst.model / dst.tag;
  if (Status s = write_atomically(mp, manifest.dump()); !s.is_ok()) return s.error();
  return model_in_store(store, dst, false);
}

std::vector<OllamaListed> ollama_scan() {
  std::vector<OllamaListed> out;
  for (const auto& [store, ro] : {std::pair{fs::path(minfer_ollama_dir()), false}, std::pair{fs::path(ollama_store_dir()), true}}) {
    for (const fs::path& host : dir_entries(store / "manifests")) {
      for (const fs::path& manifest : tree_files(host)) {
        const fs::path rel = manifest.lexically_relative(host);
        const std::vector<std::string> parts(rel.begin(), rel.end());
        if (parts.size() != 3 || parts[2].find(".tmp") != std::string::npos) continue;
        const OllamaName n{parts[0], parts[1], parts[2]};
        auto m = model_in_store(store, n, ro);
        if (!m || m->manifest_path != manifest.string()) continue;
        if (std::any_of(out.begin(), out.end(), [&](const OllamaListed& o) { return o.name.text() == n.text(); })) continue;
        out.push_back({n, *m});
      }
    }
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.name.text() < b.name.text(); });
  return out;
}

Expected<std::vector<std::string>> ollama_remove(const OllamaName& n) {
  const fs::path store = minfer_ollama_dir();
  const fs::path mp = find_manifest(store, n);
  if (mp.empty()) {
    if (auto m = model_in_store(ollama_store_dir(), n, true))
      return make_error("{} is in Ollama's store ({}), which minfer only reads; remove it with `ollama rm {}`", n.text(),
                        ollama_store_dir(), n.text().substr(7));
    return make_error("{} is not in {}", n.text(), store.string());
  }
  auto text = read_file(mp);
  if (!text) return text.error();
  auto layers = parse_manifest(*text, mp.string());
  std::vector<std::string> removed;
  std::error_code ec;
  fs::remove(mp, ec);
  if (ec) return make_error("cannot remove {}: {}", mp.string(), ec.message());
  removed.push_back(mp.string());
  for (fs::path d = mp.parent_path(); d != store / "manifests" && fs::is_empty(d, ec); d = d.parent_path()) fs::remove(d, ec);
  // Blobs still named by another manifest in the store stay.
  std::set<std::string> used;
  for (const fs::path& m : tree_files(store / "manifests")) {
    auto t = read_file(m);
    if (!t) continue;
    if (auto ls = parse_manifest(*t, m.string()))
      for (const Layer& l : *ls) used.insert(l.digest);
  }
  if (layers)
    for (const Layer& l : *layers) {
      if (used.count(l.digest)) continue;
      const fs::path b = blob_path(store, l.digest);
      auto lock = FileLock::acquire((store / ".locks" / (b.filename().string() + ".lock")).string());
      if (!lock) return lock.error();
      std::error_code e2;
      if (fs::remove(b, e2)) removed.push_back(b.string());
    }
  return removed;
}

}  // namespace minfer::hub
