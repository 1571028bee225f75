// Chat session files: the history as JSON (FILE) and the KV cache beside it (FILE.kv, the
// runtime's KV file: runtime/kv-file.h), so that `--session FILE` resumes a conversation without
// prefilling anything.
//
//   FILE     {"format": "minfer-chat-session", "version": 1, "model": NAME, "messages": [...],
//             "n_archived": N}   the N messages after a system prompt that had left the context
//                                window (older minfers: absent = 0); the cache holds the rest
//   FILE.kv  the session's cache rows, tokens and rendered text
//
// Both are written atomically (core/atomic-file.h): a crash or a full disk leaves either the old
// or the new file, never a mix.
//
//   write_session(path, model_name, id, session, {messages, n_archived}, tokens, text);
//   auto h = read_session_history(path);                             // error: not a session (never overwrite it)
//   auto kv = read_kv_file(path + ".kv", id, session.context());     // error says why it cannot be used
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "gguf/reader.h"
#include "models/model.h"
#include "runtime/kv-file.h"
#include "runtime/session.h"

namespace minfer::cli {

struct SessionHistory {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();  // every message
  int n_archived = 0;  // after a system prompt, how many had left the context window
};

// Writes FILE (JSON) and FILE.kv (the session's first tokens.size() cache rows).
Status write_session(const std::string& path, const std::string& model_name, const ModelIdentity& id, const Session& s,
                     const SessionHistory& history, const std::vector<int32_t>& tokens, const std::string& text);
// Reads FILE's history; an error says why FILE is not a chat session.
Expected<SessionHistory> read_session_history(const std::string& path);

}  // namespace minfer::cli
