// Incremental SHA-256 and SHA-1 (OpenSSL's libcrypto) for verifying downloads: a Hub LFS file's
// ETag is the SHA-256 of its bytes, a plain git file's is the git blob SHA-1
// ("blob <size>\0" + bytes), an Ollama blob is named by its SHA-256.
//
//   Digest d(Digest::kSha256);
//   d.update(p, n); ...
//   std::string hex = d.hex();          // 64 lower-case hex digits
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "core/status.h"

namespace minfer::hub {

class Digest {
 public:
  enum Algo { kSha256, kSha1 };
  explicit Digest(Algo algo);
  ~Digest();
  Digest(const Digest&) = delete;
  Digest& operator=(const Digest&) = delete;

  void update(const void* data, size_t n);
  void reset();
  std::string hex();  // finishes; call reset() before reusing
  Algo algo() const { return algo_; }

 private:
  Algo algo_;
  void* ctx_;  // EVP_MD_CTX
};

// What a finished download must hash to. `git_blob` = SHA-1 over "blob <size>\0" + content.
struct ExpectedDigest {
  enum Kind { kNone, kSha256, kGitBlobSha1 } kind = kNone;
  std::string hex;  // lower case
};

// Hashes a whole file (for verifying a blob already on disk, or the prefix of a partial file).
Expected<std::string> file_digest(const std::string& path, const ExpectedDigest& kind, size_t* n_read = nullptr);

bool is_hex(std::string_view s, size_t n);

}  // namespace minfer::hub
