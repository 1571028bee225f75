// The standard Hugging Face hub cache, shared with huggingface_hub, `hf` and llama.cpp:
//
//   $HF_HUB_CACHE (else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub)
//     models--ORG--REPO/
//       refs/main                          the commit hash "main" pointed to when last fetched
//       blobs/<etag>                       one file's bytes (etag: sha256 for LFS, git sha1 otherwise)
//       blobs/<etag>.incomplete            while downloading
//       snapshots/<commit>/<path in repo>  relative symlink to ../../blobs/<etag>
//     .locks/models--ORG--REPO/<etag>.lock  flock held while a blob is written
//
//   std::string c = hf_cached_commit("org/repo", "main");   // "" when not cached
//   for (auto& f : hf_snapshot_files("org/repo", c)) ...     // paths whose blob is present
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace minfer::hub {

std::string hf_home_dir();
std::string hf_hub_cache_dir();
std::string hf_repo_dir(const std::string& repo_id);  // .../models--org--repo
// The token: $HF_TOKEN, else the file $HF_TOKEN_PATH, else $HF_HOME/token; "" when none.
std::string hf_token();
bool hf_offline();  // HF_HUB_OFFLINE (or TRANSFORMERS_OFFLINE) is 1/ON/YES/TRUE

// The commit a revision means in the cache: itself when it is a 40-hex commit with a snapshot,
// else the content of refs/<revision>; "" when unknown.
std::string hf_cached_commit(const std::string& repo_id, const std::string& revision);
// Paths in the snapshot (relative, '/'-separated, sorted) whose link resolves to a present file.
std::vector<std::string> hf_snapshot_files(const std::string& repo_id, const std::string& commit);
std::string hf_snapshot_path(const std::string& repo_id, const std::string& commit, const std::string& file);
std::string hf_blob_path(const std::string& repo_id, const std::string& etag);
std::string hf_lock_path(const std::string& repo_id, const std::string& etag);

// snapshots/<commit>/<file> -> ../../blobs/<etag> (relative, one more ../ per folder in file).
Status hf_link_snapshot(const std::string& repo_id, const std::string& commit, const std::string& file,
                        const std::string& etag);
Status hf_write_ref(const std::string& repo_id, const std::string& revision, const std::string& commit);

struct HfCachedRepo {
  std::string repo_id;
  std::string dir;
  struct Snapshot {
    std::string commit;
    std::vector<std::string> refs;   // refs naming this commit ("main")
    std::vector<std::string> files;  // as hf_snapshot_files
  };
  std::vector<Snapshot> snapshots;
};
std::vector<HfCachedRepo> hf_scan_cache();

// Removes the snapshot links of `files`, then each blob no other snapshot link of the repo uses,
// then empty folders, refs to a removed snapshot, and the repo folder when no snapshot is left.
// Returns the paths removed.
Expected<std::vector<std::string>> hf_remove_files(const std::string& repo_id, const std::string& commit,
                                                   const std::vector<std::string>& files);

}  // namespace minfer::hub
