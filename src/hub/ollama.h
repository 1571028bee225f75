// Ollama models, `ollama:[NAMESPACE/]MODEL[:TAG]` (namespace "library", tag "latest" by default).
//
// Registry ($MINFER_OLLAMA_REGISTRY, default https://registry.ollama.ai), Docker registry v2:
//   GET /v2/NS/MODEL/manifests/TAG   -> {"config": {...}, "layers": [{"mediaType", "digest", "size"}]}
//   GET /v2/NS/MODEL/blobs/DIGEST    -> the bytes (usually a redirect to a CDN)
// The layer of media type application/vnd.ollama.image.model is the GGUF file.
//
// Stores, both in the registry's layout:
//   minfer's  $MINFER_OLLAMA_DIR (default ~/.cache/minfer/ollama): downloads land here
//   Ollama's  $OLLAMA_MODELS (default ~/.ollama/models): read only, blobs used in place
//     manifests/HOST/NS/MODEL/TAG    the manifest JSON
//     blobs/sha256-HEX               each layer (HEX-partial while minfer downloads it)
//
//   OllamaName n = *parse_ollama_name("ollama:qwen2.5:0.5b");
//   auto model = ollama_resolve(n, /*allow_network=*/true);   // model->path: the GGUF blob
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "hub/pull-events.h"

namespace minfer::hub {

struct OllamaName {
  std::string ns = "library";
  std::string model;
  std::string tag = "latest";
  std::string text() const;  // "ollama:model:tag" ("ollama:ns/model:tag" outside library)
};

Expected<OllamaName> parse_ollama_name(const std::string& s);

std::string ollama_registry();    // without a trailing '/'
std::string minfer_ollama_dir();  // minfer's store
std::string ollama_store_dir();   // Ollama's own store

struct OllamaModel {
  std::string path;           // the GGUF blob
  int64_t size = 0;
  std::string store;          // the store folder it is in
  std::string manifest_path;
  bool read_only = false;     // in Ollama's store
  bool downloaded = false;
};

// Looks in minfer's store, then Ollama's; downloads into minfer's store when allowed (`ev`: the
// steps and each layer's bytes, as Ollama's pull reports them).
Expected<OllamaModel> ollama_resolve(const OllamaName& n, bool allow_network, const PullEvents* ev = nullptr);

struct OllamaListed {
  OllamaName name;
  OllamaModel model;
};
std::vector<OllamaListed> ollama_scan();  // every model manifest in both stores

// Makes `dst` a name in minfer's store of the GGUF file `gguf_path` (any model minfer lists): a
// manifest whose model layer is that file, hard-linked (else copied) into the store's blobs
// under its SHA-256 (an Ollama blob's and a Hugging Face LFS blob's name is it; another file is
// hashed). A split model is refused.
Expected<OllamaModel> ollama_copy(const std::string& gguf_path, const OllamaName& dst);

// Deletes the manifest from minfer's store and each blob no other manifest there uses.
// A model only in Ollama's store is refused (Ollama owns it). Returns the paths removed.
Expected<std::vector<std::string>> ollama_remove(const OllamaName& n);

}  // namespace minfer::hub
