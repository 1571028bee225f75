#include "hub/model-ref.h"

#include <algorithm>
#include <filesystem>

#include "hub/gguf-pick.h"
#include "hub/hf-cache.h"
#include "hub/hf-hub.h"
#include "hub/local-store.h"
#include "hub/ollama.h"

namespace fs = std::filesystem;

namespace minfer::hub {

namespace {

int64_t total_size(const std::vector<std::string>& files) {
  int64_t n = 0;
  for (const std::string& f : files) {
    std::error_code ec;
    const auto s = fs::file_size(f, ec);  // follows the snapshot link to the blob
    if (!ec) n += static_cast<int64_t>(s);
  }
  return n;
}

}  // namespace

Expected<ResolvedModel> resolve_model_ref(const std::string& ref, bool allow_network, const PullEvents* ev) {
  if (ref.starts_with("hf:")) {
    auto n = parse_hf_name(ref);
    if (!n) return n.error();
    auto r = hf_resolve(*n, allow_network, ev);
    if (!r) return r.error();
    return ResolvedModel{r->paths.front(), "hf", r->downloaded};
  }
  if (ref.starts_with("ollama:")) {
    auto n = parse_ollama_name(ref);
    if (!n) return n.error();
    auto m = ollama_resolve(*n, allow_network, ev);
    if (!m) return m.error();
    return ResolvedModel{m->path, m->read_only ? "ollama" : "ollama-minfer", m->downloaded};
  }
  std::error_code ec;
  if (fs::is_regular_file(ref, ec)) return ResolvedModel{ref, "path", false};
  auto p = local_find(ref);
  if (p) return ResolvedModel{*p, "minfer", false};
  if (const fs::file_status st = fs::status(ref, ec); !ec && fs::exists(st)) {
    // It exists but is no file: say what it is rather than "not found".
    const char* what = fs::is_directory(st)           ? "a directory"
                       : fs::is_character_file(st)    ? "a character device"
                       : fs::is_block_file(st)        ? "a block device"
                       : fs::is_fifo(st)              ? "a pipe"
                       : fs::is_socket(st)            ? "a socket"
                                                      : "not a regular file";
    return make_error("model '{}' is {}, not a GGUF file{}", ref, what,
                      fs::is_directory(st) ? " (give the path of a .gguf file inside it)" : "");
  }
  return p.error();
}

std::vector<ListedModel> list_models() {
  std::vector<ListedModel> out;
  for (const LocalModel& m : local_scan())
    out.push_back({m.name, "minfer", m.files.front(), m.files, m.size, false});
  for (const HfCachedRepo& repo : hf_scan_cache()) {
    for (const HfCachedRepo::Snapshot& snap : repo.snapshots) {
      std::string base = "hf:" + repo.repo_id;
      const bool main = std::find(snap.refs.begin(), snap.refs.end(), "main") != snap.refs.end();
      if (!main) base += "@" + (snap.refs.empty() ? snap.commit : snap.refs.front());
      for (const std::string& f : snap.files) {
        const GgufSplitName s = gguf_split_name(f);
        if (!gguf_is_model_file(f) || s.index != 1) continue;
        auto parts = pick_gguf(snap.files, f);
        if (!parts) continue;  // a split model with a part missing: not usable
        // The shortest name that picks this file: the quant tag when it does, else the path.
        std::string name = base + ":" + f;
        if (!s.tag.empty())
          if (auto by_tag = pick_gguf(snap.files, s.tag); by_tag && by_tag->files.front() == f) name = base + ":" + s.tag;
        ListedModel l;
        l.name = name;
        l.source = "hf";
        for (const std::string& p : parts->files) l.files.push_back(hf_snapshot_path(repo.repo_id, snap.commit, p));
        l.path = l.files.front();
        l.size = total_size(l.files);
        out.push_back(std::move(l));
      }
    }
  }
  for (const OllamaListed& o : ollama_scan())
    out.push_back({o.name.text(), o.model.read_only ? "ollama" : "ollama-minfer", o.model.path, {o.model.path}, o.model.size,
                   o.model.read_only});
  return out;
}

Expected<std::vector<std::string>> remove_model(const std::string& ref) {
  if (ref.starts_with("hf:")) {
    auto n = parse_hf_name(ref);
    if (!n) return n.error();
    auto c = hf_find_cached(*n);
    if (!c) return c.error();
    return hf_remove_files(n->repo_id, c->commit, c->files);
  }
  if (ref.starts_with("ollama:")) {
    auto n = parse_ollama_name(ref);
    if (!n) return n.error();
    return ollama_remove(*n);
  }
  std::error_code ec;
  const fs::path dir = fs::weakly_canonical(local_model_dir(), ec);
  if (fs::is_regular_file(ref, ec) && fs::weakly_canonical(fs::path(ref), ec).parent_path() != dir)
    return make_error("'{}' is a file outside minfer's caches; minfer rm only deletes cached models (delete it yourself)",
                      ref);
  return local_remove(fs::is_regular_file(ref, ec) ? fs::path(ref).filename().string() : ref);
}

}  // namespace minfer::hub
