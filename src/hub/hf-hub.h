// The Hugging Face Hub's HTTP API, as huggingface_hub 2.x speaks it, for `hf:ORG/REPO[@REV][:TAG|:FILE]`:
//
//   GET  {HF_ENDPOINT}/api/models/ORG/REPO/revision/REV      -> {"sha": commit, ...}
//   GET  {HF_ENDPOINT}/api/models/ORG/REPO/tree/COMMIT?recursive=true   (pages via Link: rel="next")
//   HEAD {HF_ENDPOINT}/ORG/REPO/resolve/COMMIT/PATH           -> X-Linked-Etag/ETag, X-Linked-Size,
//        X-Repo-Commit; a 302 to a CDN host carries them itself (the token is not sent there)
//   GET  the resolve URL (or the CDN Location), with Range to resume
//
// Errors come back in plain words from the Hub's X-Error-Code (RepoNotFound, GatedRepo,
// EntryNotFound, RevisionNotFound). Files land in the hub cache (hf-cache.h).
//
//   HfName n = *parse_hf_name("hf:org/repo:Q4_K_M");
//   auto path = hf_resolve(n, /*allow_network=*/true);   // see hf_resolve for cache vs Hub
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "hub/pull-events.h"

namespace minfer::hub {

struct HfName {
  std::string repo_id;             // "org/repo"
  std::string revision = "main";
  std::string tag;                 // quant tag, a "*.gguf" path in the repo, or "" (default pick)
  std::string text() const;        // "hf:org/repo[@rev][:tag]"
};

// "hf:org/repo", "hf:org/repo:Q8_0", "hf:org/repo:dir/file.gguf", "hf:org/repo@v1.0:Q4_0".
Expected<HfName> parse_hf_name(const std::string& s);

std::string hf_endpoint();  // $HF_ENDPOINT without a trailing '/', default https://huggingface.co

struct HfResolved {
  std::vector<std::string> paths;  // snapshot paths of the model's files, first part first
  bool downloaded = false;
};

// The model's files in the cache; downloads what is missing when allowed (and not offline).
// With a quant or a file the cache answers first. Without a tag the default-file rule
// (pick_gguf) runs over the Hub's listing even when another file of the repository is cached;
// over the cached files only when the Hub is out of reach (or HF_HUB_OFFLINE), and stderr says so.
// `ev`: the steps and each file's bytes, as Ollama's pull reports them.
Expected<HfResolved> hf_resolve(const HfName& name, bool allow_network, const PullEvents* ev = nullptr);

// What `name` means in the cache alone: (commit, files in the snapshot). Error when not there.
struct HfCachedPick {
  std::string commit;
  std::vector<std::string> files;
};
Expected<HfCachedPick> hf_find_cached(const HfName& name);

}  // namespace minfer::hub
