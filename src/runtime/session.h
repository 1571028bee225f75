// An inference session: one model, one KV cache, a CPU backend with its threads, and the
// prepared graphs for the batch shapes seen so far (built once per shape, reused every step).
// Generation, perplexity, chat and the server are loops over decode().
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
// context full, n_out out of range) leave the session unchanged.
//
// Not thread-safe: one thread drives a session at a time; separate sessions are independent
// (each has its own backend threads and cache).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "graph/scheduler.h"
#include "models/model.h"

namespace minfer {

namespace cpu {
class CpuBackend;
}

struct SessionParams {
  int n_ctx = 0;       // KV cache positions; 0 = min(4096, the model's context_length)
  int n_batch = 512;   // most tokens per graph (longer inputs are split)
  int n_threads = 0;   // 0 = all hardware threads
  DType kv_type = DType::F16;  // F16 or F32
  bool fuse = true;    // run the fusion pass (off: for debugging and fused-vs-unfused tests)
};

struct SessionStats {
  int64_t n_graph_builds = 0;  // prepared graphs built (one per new batch shape)
  int64_t n_tokens = 0;        // tokens decoded
  int64_t n_computes = 0;      // graph executions
};

class Session {
 public:
  static Expected<std::unique_ptr<Session>> create(std::shared_ptr<const Model> model, const SessionParams& p);
  ~Session();

  Expected<std::span<const float>> decode(std::span<const int32_t> tokens, int n_out = 1);
  void clear() { n_past_ = 0; }
  Status truncate(int n_past);  // 0 <= n_past <= n_past()

  int n_past() const { return n_past_; }
  int n_ctx() const { return n_ctx_; }
  int n_batch() const { return n_batch_; }
  int n_vocab() const { return static_cast<int>(model_->hparams().n_vocab); }
  int n_threads() const;
  const Model& model() const { return *model_; }
  const SessionStats& stats() const { return stats_; }
  const SessionParams& params() const { return params_; }

  // The prepared graph (backends assigned, fused, memory planned) for a batch of n_tokens with
  // n_out logits rows: what decode() runs. For dumps and tests.
  Expected<const PreparedGraph*> graph(int n_tokens, int n_out);
  std::vector<std::string> backend_names() const;
  // Every computed node's result is passed to obs (see Scheduler::set_observer); {} to stop.
  void set_observer(NodeObserver obs) { sched_->set_observer(std::move(obs)); }
  size_t kv_bytes() const { return sched_->persistent_bytes(); }

  // KV cache editing, for chat context shifting and session files. Row p of a cache is position
  // p; layer il's K rows hold n_embd_k and V rows n_embd_v elements of params().kv_type. The
  // caches are read and written through their backend's read()/write() only.
  //
  // kv_remove drops positions [p0, p1): rows p1..n_past()-1 move down by d = p1 - p0 and their K
  // is rotated by -d positions (RoPE rotates pair i by an angle linear in the position, so
  // R(p - d) = R(-d) R(p)), computed in f32 with the kernel's arithmetic and rounded back to the
  // cache type; V rows just move. n_past() shrinks by d. 0 <= p0 <= p1 <= n_past().
  Status kv_remove(int p0, int p1);
  // The first n_past() rows of every cache: for each layer, its K rows then its V rows.
  Expected<std::vector<uint8_t>> kv_export() const;
  // Writes rows laid out as kv_export() returns them and sets n_past() to n_past;
  // bytes.size() must be n_past * kv_row_bytes() and n_past <= n_ctx().
  Status kv_import(std::span<const uint8_t> bytes, int n_past);
  size_t kv_row_bytes() const;  // one position across all layers, K and V

 private:
  Session() = default;
  Expected<PreparedGraph*> prepared(int n_tokens, int n_out);
  Status run_chunk(std::span<const int32_t> tokens, int pos0, int n_out, float* logits);
  Status for_each_kv_slice(int n_pos,
                           const std::function<void(const Scheduler::RegionView&, size_t, size_t)>& fn) const;

  std::shared_ptr<const Model> model_;
  SessionParams params_;
  int n_ctx_ = 0;
  int n_batch_ = 0;
  int n_past_ = 0;
  std::unique_ptr<cpu::CpuBackend> cpu_;
  std::unique_ptr<Scheduler> sched_;
  // Prepared graphs by (n_tokens, n_out), least recently used evicted past kMaxGraphs.
  struct Entry {
    std::unique_ptr<PreparedGraph> pg;
    int tokens = -1, pos = -1, out_ids = -1, logits = -1;  // node ids
    uint64_t last_use = 0;
  };
  static constexpr size_t kMaxGraphs = 4;
  std::map<std::pair<int, int>, Entry> graphs_;
  uint64_t clock_ = 0;
  std::vector<float> logits_;    // [n_out][n_vocab]
  std::vector<int32_t> scratch_; // positions / output ids of one chunk
  SessionStats stats_;
};

}  // namespace minfer
