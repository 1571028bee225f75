#include "hub/hf-cache.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "hub/digest.h"
#include "hub/env.h"
#include "hub/file-lock.h"

namespace fs = std::filesystem;

namespace minfer::hub {

namespace {

std::string repo_from_folder(const std::string& folder) {
  // models--org--repo -> org/repo
  std::string rest = folder.substr(8);
  std::string out;
  for (size_t i = 0; i < rest.size(); ++i) {
    if (rest.compare(i, 2, "--") == 0) {
      out += '/';
      ++i;
    } else {
      out += rest[i];
    }
  }
  return out;
}

// Canonical target of a snapshot link (the blob), "" when dangling.
std::string link_target(const fs::path& link) {
  std::error_code ec;
  const fs::path t = fs::canonical(link, ec);
  return ec ? "" : t.string();
}

}  // namespace

std::string hf_home_dir() {
  if (std::string h = env_var("HF_HOME"); !h.empty()) return h;
  if (std::string x = env_var("XDG_CACHE_HOME"); !x.empty()) return (fs::path(x) / "huggingface").string();
  return (fs::path(home_dir()) / ".cache" / "huggingface").string();
}

std::string hf_hub_cache_dir() {
  if (std::string c = env_var("HF_HUB_CACHE"); !c.empty()) return c;
  if (std::string c = env_var("HUGGINGFACE_HUB_CACHE"); !c.empty()) return c;
  return (fs::path(hf_home_dir()) / "hub").string();
}

std::string hf_repo_dir(const std::string& repo_id) {
  std::string folder = "models--";
  for (char c : repo_id) {
    if (c == '/') folder += "--";
    else folder += c;
  }
  return (fs::path(hf_hub_cache_dir()) / folder).string();
}

std::string hf_token() {
  if (std::string t = env_var("HF_TOKEN"); !t.empty()) return t;
  if (std::string p = env_var("HF_TOKEN_PATH"); !p.empty()) return read_trimmed(p);
  return read_trimmed((fs::path(hf_home_dir()) / "token").string());
}

bool hf_offline() { return env_truthy("HF_HUB_OFFLINE") || env_truthy("TRANSFORMERS_OFFLINE"); }

std::string hf_cached_commit(const std::string& repo_id, const std::string& revision) {
  const fs::path dir = hf_repo_dir(repo_id);
  std::error_code ec;
  if (is_hex(revision, 40) && fs::is_directory(dir / "snapshots" / revision, ec)) return revision;
  if (!safe_relative_path(revision)) return "";
  const std::string c = read_trimmed((dir / "refs" / revision).string());
  return is_hex(c, 40) ? c : "";
}

std::vector<std::string> hf_snapshot_files(const std::string& repo_id, const std::string& commit) {
  std::vector<std::string> out;
  if (commit.empty()) return out;
  const fs::path root = fs::path(hf_repo_dir(repo_id)) / "snapshots" / commit;
  for (const fs::path& p : tree_files(root)) out.push_back(p.lexically_relative(root).generic_string());
  return out;
}

std::string hf_snapshot_path(const std::string& repo_id, const std::string& commit, const std::string& file) {
  return (fs::path(hf_repo_dir(repo_id)) / "snapshots" / commit / file).string();
}

std::string hf_blob_path(const std::string& repo_id, const std::string& etag) {
  return (fs::path(hf_repo_dir(repo_id)) / "blobs" / etag).string();
}

std::string hf_lock_path(const std::string& repo_id, const std::string& etag) {
  return (fs::path(hf_hub_cache_dir()) / ".locks" / fs::path(hf_repo_dir(repo_id)).filename() / (etag + ".lock")).string();
}

Status hf_link_snapshot(const std::string& repo_id, const std::string& commit, const std::string& file,
                        const std::string& etag) {
  if (!safe_relative_path(file) || !is_hex(commit, 40) || !safe_relative_path(etag) || etag.find('/') != std::string::npos)
    return make_error("refusing to link '{}' (commit '{}', blob '{}'): not a plain path in the cache", file, commit, etag);
  const fs::path link = hf_snapshot_path(repo_id, commit, file);
  std::error_code ec;
  fs::create_directories(link.parent_path(), ec);
  if (ec) return make_error("cannot create {}: {}", link.parent_path().string(), ec.message());
  std::string target = "../../";
  for (char c : file)
    if (c == '/') target += "../";
  target += "blobs/" + etag;
  const fs::path tmp = link.string() + ".tmp" + std::to_string(::getpid());
  fs::remove(tmp, ec);
  fs::create_symlink(target, tmp, ec);
  if (ec) return make_error("cannot create the snapshot link {}: {}", link.string(), ec.message());
  fs::rename(tmp, link, ec);
  if (ec) return make_error("cannot create the snapshot link {}: {}", link.string(), ec.message());
  return Status::ok();
}

Status hf_write_ref(const std::string& repo_id, const std::string& revision, const std::string& commit) {
  if (revision == commit) return Status::ok();
  if (!safe_relative_path(revision)) return make_error("bad revision name '{}'", revision);
  const fs::path ref = fs::path(hf_repo_dir(repo_id)) / "refs" / revision;
  std::error_code ec;
  fs::create_directories(ref.parent_path(), ec);
  if (ec) return make_error("cannot create {}: {}", ref.parent_path().string(), ec.message());
  const fs::path tmp = ref.string() + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream out(tmp);
    out << commit;  // no newline, as huggingface_hub writes it
    if (!out) return make_error("cannot write {}", tmp.string());
  }
  fs::rename(tmp, ref, ec);
  if (ec) return make_error("cannot write {}: {}", ref.string(), ec.message());
  return Status::ok();
}

std::vector<HfCachedRepo> hf_scan_cache() {
  std::vector<HfCachedRepo> repos;
  for (const fs::path& dir : dir_entries(hf_hub_cache_dir())) {
    const std::string name = dir.filename().string();
    std::error_code ec;
    if (!name.starts_with("models--") || !fs::is_directory(dir, ec)) continue;
    HfCachedRepo r;
    r.repo_id = repo_from_folder(name);
    r.dir = dir.string();
    std::vector<std::pair<std::string, std::string>> refs;  // (name, commit)
    const fs::path refs_dir = dir / "refs";
    for (const fs::path& ref : tree_files(refs_dir))
      refs.emplace_back(ref.lexically_relative(refs_dir).generic_string(), read_trimmed(ref.string()));
    for (const fs::path& s : dir_entries(dir / "snapshots")) {
      HfCachedRepo::Snapshot snap;
      snap.commit = s.filename().string();
      for (const auto& [ref, commit] : refs)
        if (commit == snap.commit) snap.refs.push_back(ref);
      snap.files = hf_snapshot_files(r.repo_id, snap.commit);
      r.snapshots.push_back(std::move(snap));
    }
    std::sort(r.snapshots.begin(), r.snapshots.end(), [](const auto& a, const auto& b) {
      return a.refs.size() != b.refs.size() ? a.refs.size() > b.refs.size() : a.commit < b.commit;
    });
    repos.push_back(std::move(r));
  }
  return repos;
}

Expected<std::vector<std::string>> hf_remove_files(const std::string& repo_id, const std::string& commit,
                                                   const std::vector<std::string>& files) {
  std::vector<std::string> removed;
  const fs::path repo = hf_repo_dir(repo_id);
  const fs::path snap = repo / "snapshots" / commit;
  std::set<std::string> blobs;
  std::error_code ec;
  for (const std::string& f : files) {
    const fs::path link = snap / f;
    if (const std::string t = link_target(link); !t.empty()) blobs.insert(t);
    if (!fs::remove(link, ec) || ec) return make_error("cannot remove {}: {}", link.string(), ec ? ec.message() : "not found");
    removed.push_back(link.string());
  }
  // Blobs still linked from any snapshot stay; one being written now is not ours to touch.
  std::set<std::string> used;
  for (const fs::path& p : tree_files(repo / "snapshots"))
    if (std::string t = link_target(p); !t.empty()) used.insert(t);
  for (const std::string& b : blobs) {
    if (used.count(b)) continue;
    auto lock = FileLock::acquire(hf_lock_path(repo_id, fs::path(b).filename().string()));
    if (!lock) return lock.error();
    std::error_code e2;
    if (fs::remove(b, e2)) removed.push_back(b);
    else if (e2) return make_error("cannot remove {}: {}", b, e2.message());
  }
  // Empty folders left in the snapshot, then the snapshot, refs to it, and the repo itself.
  for (const std::string& f : files) {
    for (fs::path d = (snap / f).parent_path(); d.string().size() >= snap.string().size(); d = d.parent_path()) {
      std::error_code e2;
      if (!fs::is_empty(d, e2) || e2 || !fs::remove(d, e2)) break;
      if (d == snap) break;
    }
  }
  std::error_code e3;
  if (!fs::exists(snap, e3)) {
    for (const fs::path& ref : tree_files(repo / "refs"))
      if (read_trimmed(ref.string()) == commit) fs::remove(ref, e3);
    bool busy = false;  // a download in progress keeps the repository folder
    for (const fs::path& b : dir_entries(repo / "blobs")) busy |= b.extension() == ".incomplete";
    if (dir_entries(repo / "snapshots").empty() && !busy) {
      fs::remove_all(repo, e3);
      removed.push_back(repo.string());
    }
  }
  return removed;
}

}  // namespace minfer::hub
