// Crash-safe file writes, and the FNV-1a 64 checksum minfer's binary files carry.
//
//   MINFER_TRY(write_file_atomic("chat.json", text));
//   MINFER_TRY(write_file_atomic("chat.json.kv", header, kv.data(), kv.size(), trailer));
//
// The bytes go to a temporary file beside PATH, which is synced and renamed over PATH, then the
// folder is synced: after a crash or a failed write (a full disk) PATH holds either its old or
// its new contents, never a mix. A PATH that is a symbolic link has its target replaced; an
// existing file's permissions are kept (a new one gets 0644).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/status.h"

namespace minfer {

// Writes a, then b[0..nb), then c.
Status write_file_atomic(const std::string& path, const std::string& a, const void* b = nullptr, size_t nb = 0,
                         const std::string& c = {});

// FNV-1a 64 of n bytes, continuing from h.
uint64_t fnv1a64(const void* data, size_t n, uint64_t h = 0xcbf29ce484222325ull);

}  // namespace minfer
