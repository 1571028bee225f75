// Chat session files: the history as JSON (FILE) and the KV cache beside it (FILE.kv) in a
// versioned, checksummed binary, so that `--session FILE` resumes a conversation without
// prefilling anything.
//
//   FILE     {"format": "minfer-chat-session", "version": 1, "model": NAME, "messages": [...],
//             "n_archived": N}   the N messages after a system prompt that had left the context
//                                window (older minfers: absent = 0); the cache holds the rest
//   FILE.kv  little-endian:
//     char[8]  magic "MINFERKV"
//     u32      version (1)
//     u32      kv type (1 = f16, 0 = f32: the dtype of the cache rows)
//     u64      model file size            } model identity: a cache only makes sense for the
//     u64      model hash                 } exact weights that produced it (model_identity())
//     u32      n_layer, n_embd_k, n_embd_v   the row shapes
//     u32      n_ctx                         of the session that wrote it (information only)
//     u32      n_past                        positions saved
//     u64      text bytes, u64 kv bytes
//     i32      tokens[n_past]
//     char     text[text bytes]              what the tokens encode (the rendered history)
//     u8       kv[kv bytes]                  Session::kv_export(): per layer K rows, V rows
//     u64      FNV-1a 64 of every byte above
//
// Both are written to a temporary file that is synced and renamed over the old one, so a crash
// or a full disk leaves either the old or the new file, never a mix.
//
//   write_session(path, model_name, id, session, {messages, n_archived}, tokens, text);
//   auto h = read_session_history(path);                // error: not a session (never overwrite it)
//   auto kv = read_kv_file(path + ".kv", id, session);  // error says why it cannot be used
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "gguf/reader.h"
#include "models/model.h"
#include "runtime/session.h"

namespace minfer::cli {

struct ModelIdentity {
  uint64_t file_size = 0;
  uint64_t hash = 0;  // FNV-1a 64 of the metadata keys, tensor names/types/shapes/offsets and
                      // the first 4 KiB of every tensor's data
};
ModelIdentity model_identity(const GgufFile& file);

uint64_t fnv1a64(const void* data, size_t n, uint64_t h = 0xcbf29ce484222325ull);

struct KvFileContents {
  std::vector<int32_t> tokens;  // [n_past]
  std::string text;
  std::vector<uint8_t> kv;      // Session::kv_import() layout
};

struct SessionHistory {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();  // every message
  int n_archived = 0;  // after a system prompt, how many had left the context window
};

// Writes FILE (JSON) and FILE.kv (the session's first tokens.size() cache rows).
Status write_session(const std::string& path, const std::string& model_name, const ModelIdentity& id, const Session& s,
                     const SessionHistory& history, const std::vector<int32_t>& tokens, const std::string& text);
// Reads FILE's history; an error says why FILE is not a chat session.
Expected<SessionHistory> read_session_history(const std::string& path);
// Reads and checks FILE.kv against the model and the session (type, shapes, room).
Expected<KvFileContents> read_kv_file(const std::string& kv_path, const ModelIdentity& id, const Session& s);

}  // namespace minfer::cli
