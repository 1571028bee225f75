// An inference session: one sequence of a runtime Context (context.h): one model, its KV cache,
// the backends with their threads and the prepared graphs for the batch shapes seen so far.
// Generation, perplexity and chat are loops over decode(); the server drives a Context with
// one sequence per slot directly.
//
//   auto model = Model::load(path);                          // shared by several sessions
//   if (!model) return fail(model.error());
//   auto s = Session::create(*model, {.n_ctx = 2048, .n_batch = 512, .n_threads = 4});
//   if (!s) return fail(s.error());
//   std::vector<int32_t> prompt = tokenize(...);
//   auto logits = (*s)->decode(prompt);                      // prefill; logits of the last token
//   if (!logits) return fail(logits.error());
//   for (int i = 0; i < n_predict; ++i) {
//     int32_t next = argmax(*logits);                        // [n_vocab]
//     logits = (*s)->decode({&next, 1});                     // one decode step at n_past()
//   }
//   (*s)->truncate(n_keep);                                  // drop positions >= n_keep
//   (*s)->clear();                                           // a new conversation
//
// decode(tokens, n_out) appends tokens at positions n_past() .. n_past() + size - 1, in chunks of
// at most n_batch tokens that share the KV cache, and returns the logits of the LAST n_out
// tokens, [n_out][n_vocab] row-major (n_out = tokens.size() gives every position, as
// perplexity needs). The span stays valid until the next call. Errors (token id out of range,
// context full, n_out out of range) leave the session unchanged. A progress callback is told
// after each chunk of a multi-chunk call how many tokens are done; returning false stops there,
// with an error and the session left as before the call (Ctrl-C during a long prefill).
//
// Arithmetic: AttnArith::kByBatch (the default) rounds as llama.cpp does for each chunk size.
// Not thread-safe: one thread drives a session at a time; separate sessions are independent
// (each has its own backend threads and cache).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "runtime/context.h"

namespace minfer {

struct SessionParams {
  int n_ctx = 0;       // KV cache positions; 0 = min(4096, the model's context_length)
  int n_batch = 512;   // most tokens per graph (longer inputs are split)
  int n_threads = 0;   // 0 = all hardware threads
  DType kv_type = DType::F16;  // F16 or F32
  bool fuse = true;    // run the fusion pass (off: for debugging and fused-vs-unfused tests)
  std::string backends = "cpu";  // registry names (backends/registry)
  AttnArith attn = AttnArith::kByBatch;
  bool swa_full = false;  // sliding-window layers cache the whole context (ContextParams::swa_full)
  Offload offload = {};   // layers on GPUs (ContextParams::offload)
};

using SessionStats = ContextStats;

// decode()'s progress callback: tokens done of the call's total; false cancels the call.
using DecodeProgress = std::function<bool(int n_done, int n_total)>;

class Session {
 public:
  static Expected<std::unique_ptr<Session>> create(std::shared_ptr<const Model> model, const SessionParams& p);
  ~Session();

  Expected<std::span<const float>> decode(std::span<const int32_t> tokens, int n_out = 1,
                                          const DecodeProgress& progress = {});
  void clear() { ctx_->seq_clear(0); }
  Status truncate(int n_past) { return ctx_->seq_rm(0, n_past, -1); }  // 0 <= n_past <= n_past()
  // Whether truncate(n) can keep n positions (Context::can_keep: a sliding-window ring may have
  // overwritten the window of position n - 1; the caller then starts over from 0).
  bool can_keep(int n) const { return ctx_->can_keep(0, n); }

  int n_past() const { return ctx_->seq_len(0); }
  int n_ctx() const { return ctx_->n_ctx_seq(); }
  int n_batch() const { return ctx_->n_batch(); }
  int n_vocab() const { return ctx_->n_vocab(); }
  int n_threads() const { return ctx_->n_threads(); }
  const Model& model() const { return ctx_->model(); }
  const Context& context() const { return *ctx_; }  // sequence 0 is this session
  const SessionStats& stats() const { return ctx_->stats(); }
  const SessionParams& params() const { return params_; }
  Context& context() { return *ctx_; }

  // The prepared graph (backends assigned, fused, memory planned) for a batch of n_tokens with
  // n_out logits rows: what decode() runs. For dumps and tests.
  Expected<const PreparedGraph*> graph(int n_tokens, int n_out) { return ctx_->graph(n_tokens, n_out); }
  std::vector<std::string> backend_names() const { return ctx_->backend_names(); }
  // Every computed node's result is passed to obs (see Scheduler::set_observer); {} to stop.
  void set_observer(NodeObserver obs) { ctx_->set_observer(std::move(obs)); }
  size_t kv_bytes() const { return ctx_->kv_bytes(); }

  // KV cache editing, for chat context shifting and session files (Context::seq_rm,
  // kv_export, kv_import on sequence 0). kv_remove drops positions [p0, p1): the later ones
  // move down by p1 - p0 and their K is re-rotated on the backend.
  Status kv_remove(int p0, int p1) { return ctx_->seq_rm(0, p0, p1); }
  // The first n_past() rows of every cache: for each layer, its K rows then its V rows.
  Expected<std::vector<uint8_t>> kv_export() const { return ctx_->kv_export(0); }
  // Writes rows laid out as kv_export() returns them and sets n_past() to n_past;
  // bytes.size() must be kv_export_bytes(n_past) and n_past <= n_ctx().
  Status kv_import(std::span<const uint8_t> bytes, int n_past) { return ctx_->kv_import(0, bytes, n_past); }
  size_t kv_export_bytes(int n_past) const { return ctx_->kv_export_bytes(n_past); }

 private:
  Session() = default;
  SessionParams params_;
  std::unique_ptr<Context> ctx_;
  std::vector<float> logits_;  // [n_out][n_vocab]
  Batch batch_;
};

}  // namespace minfer
