// KV cache files: one sequence's cache rows with the tokens (and text) behind them, so a chat
// session (`--cnv --session`) or a server slot (POST /slots/N?action=save|restore) resumes
// without prefilling anything. Versioned, checksummed, tied to the exact weights.
//
//   const ModelIdentity id = model_identity(model.file());
//   MINFER_TRY(write_kv_file("chat.json.kv", id, ctx, /*seq=*/0, tokens, text));
//   auto kv = read_kv_file("chat.json.kv", id, ctx);     // error says why it cannot be used
//   MINFER_TRY(ctx.kv_import(seq, kv->kv, kv->tokens.size()));
//
// Layout, little-endian:
//   char[8]  magic "MINFERKV"
//   u32      version (1)
//   u32      kv type: the GGML type id of the cache rows (0 f32, 1 f16, 2 q4_0, 8 q8_0)
//   u64      model file size            } model identity: a cache only makes sense for the
//   u64      model hash                 } exact weights that produced it (model_identity())
//   u32      n_layer, n_embd_k, n_embd_v   the row shapes
//   u32      n_ctx                         of the context that wrote it (information only)
//   u32      n_past                        positions saved
//   u64      text bytes, u64 kv bytes
//   i32      tokens[n_past]
//   char     text[text bytes]              what the tokens encode (may be empty)
//   u8       kv[kv bytes]                  Context::kv_export(seq): per layer K rows, V rows
//   u64      FNV-1a 64 of every byte above
// written atomically (core/atomic-file.h).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "gguf/reader.h"
#include "runtime/context.h"

namespace minfer {

struct ModelIdentity {
  uint64_t file_size = 0;
  uint64_t hash = 0;  // FNV-1a 64 of the metadata keys, tensor names/types/shapes/offsets and
                      // the first 4 KiB of every tensor's data
};
ModelIdentity model_identity(const GgufFile& file);

struct KvFileContents {
  std::vector<int32_t> tokens;  // [n_past]
  std::string text;
  std::vector<uint8_t> kv;      // Context::kv_import() layout
};

// Writes sequence seq's first tokens.size() cache rows (tokens.size() must be its length).
Status write_kv_file(const std::string& path, const ModelIdentity& id, const Context& ctx, int seq,
                     const std::vector<int32_t>& tokens, const std::string& text);
// The same from rows kv_export returned earlier (ctx only describes the layout: this can run on
// another thread than the one decoding).
Status write_kv_file(const std::string& path, const ModelIdentity& id, const Context& ctx, const std::vector<int32_t>& tokens,
                     const std::string& text, std::span<const uint8_t> kv);
// Reads and checks a file against the model and the context (type, shapes, room: fewer
// positions than ctx.n_ctx_seq()); the header is checked before anything else is read. Uses
// only ctx's layout (model, params, kv_export_bytes): it can run on another thread than the
// one decoding.
Expected<KvFileContents> read_kv_file(const std::string& path, const ModelIdentity& id, const Context& ctx);

}  // namespace minfer
