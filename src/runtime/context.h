// The runtime: one model on its backends, one KV cache shared by up to n_seq sequences, and
// the forward pass over batches of tokens from any of them (in the spirit of llama_batch). The
// one-shot CLI, the chat REPL (through Session, session.h) and every server slot decode here.
//
//   auto ctx = Context::create(model, {.n_seq = 4, .n_ctx_seq = 2048});
//   if (!ctx) return fail(ctx.error());
//   Batch b;
//   for (size_t i = 0; i < prompt.size(); ++i)                 // sequence 0: a prompt
//     b.add(prompt[i], static_cast<int>(i), 0, i + 1 == prompt.size());
//   b.add(next_tok, (*ctx)->seq_len(1), 1, true);             // sequence 1: one decode step
//   auto logits = (*ctx)->decode(b);                           // [2][n_vocab]: rows flagged
//   (*ctx)->seq_rm(0, 10, 20);       // drop positions 10..19; later ones shift down (re-roped)
//   (*ctx)->seq_cp(0, 2, 64);        // sequence 2 starts with sequence 0's first 64 positions
//   (*ctx)->seq_rollback(1, 3);      // forget sequence 1's last 3 tokens (speculative verify)
//
// KV layout: sequence s owns cache rows [s * n_ctx_seq, (s + 1) * n_ctx_seq); its position p is
// row s * n_ctx_seq + p, so a sequence is always positions 0 .. seq_len(s) - 1. A token's
// position must be the next one of its sequence (batch tokens of one sequence in order).
// Sliding-window layers (Gemma) keep only a ring of R = n_swa + n_batch rows per sequence
// (swa_ring_rows; position p at row s * R + p mod R): the window of every token of a batch fits.
// What the rings forget limits the edits: a sequence can be cut back to n positions, or copied,
// only while its rings still hold the window before n (can_keep); a rollback of the last batch,
// a context shift and a fresh start always can. ContextParams::swa_full keeps whole caches.
//
// Arithmetic: with AttnArith::kByBatch the attention of a token rounds as llama.cpp's CPU
// flash attention does for a batch of that many rows of its sequence (output identical to
// llama.cpp); kInvariant makes every token round the same whatever the batch (the server:
// greedy output independent of load, of prefix reuse and of how a prompt was split).
//
// Errors (bad sequence, token, position, full context) leave every sequence unchanged. Not
// thread-safe: one thread drives a context.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "graph/backend.h"

namespace minfer {

class Model;
struct ModelHparams;
struct Node;
struct PreparedGraph;
// Called with each computed node's result in host memory (graph/scheduler.h declares the same).
using NodeObserver = std::function<void(const Node& n, const void* host_data)>;

enum class AttnArith { kByBatch, kInvariant };

// The KV cache types a context stores, by llama.cpp's names: "f16", "f32", "q8_0", "q4_0".
bool kv_type_supported(DType t);
std::string_view kv_type_name(DType t);
// Bytes of one cache row of n_embd values (a quantized row is whole blocks: n_embd % 32 == 0).
size_t kv_row_bytes(DType t, int64_t n_embd);

// -ngl and --device: the last n_gpu_layers layers (runtime/placement.h) run on these devices
// (backends/registry list_devices() names, as chosen by select_devices); none: the host only.
struct Offload {
  std::vector<std::string> devices;
  int n_gpu_layers = 0;  // kAllLayers (-1): every layer and the output
  bool operator==(const Offload&) const = default;
};

struct ContextParams {
  int n_seq = 1;       // sequences sharing the cache
  int n_ctx_seq = 0;   // KV positions per sequence; 0 = min(4096, the model's context_length)
  int n_batch = 512;   // most tokens in one forward pass
  int n_threads = 0;   // 0 = all hardware threads
  DType kv_type = DType::F16;  // F16, F32, Q8_0 or Q4_0 (K and V alike; kv_type_name)
  std::string backends = "cpu";  // registry names, comma-separated (backends/registry)
  Offload offload = {};  // layers on GPUs (-ngl, --device)
  bool fuse = true;    // run the fusion pass (off: for debugging and fused-vs-unfused tests)
  AttnArith attn = AttnArith::kByBatch;
  bool swa_full = false;  // sliding-window layers cache the whole context (llama.cpp's --swa-full)
};

// Tokens for one forward pass: token i goes to sequence seq[i] at position pos[i]; its logits
// row is returned when logits[i] is set.
struct Batch {
  std::vector<int32_t> token, pos, seq;
  std::vector<uint8_t> logits;
  void add(int32_t t, int32_t p, int32_t s, bool want_logits) {
    token.push_back(t);
    pos.push_back(p);
    seq.push_back(s);
    logits.push_back(want_logits ? 1 : 0);
  }
  void clear() { token.clear(), pos.clear(), seq.clear(), logits.clear(); }
  int size() const { return static_cast<int>(token.size()); }
};

struct ContextStats {
  int64_t n_graph_builds = 0;  // prepared graphs built (one per new batch shape)
  int64_t n_tokens = 0;        // tokens decoded
  int64_t n_computes = 0;      // forward passes
  int64_t n_kv_moves = 0;      // KV moves run on the backend (seq_rm with a shift, seq_cp)
};

class Context {
 public:
  static Expected<std::unique_ptr<Context>> create(std::shared_ptr<const Model> model, const ContextParams& p);
  ~Context();
  // Rows per sequence of the sliding-window layers' ring caches; 0 when they cache the whole
  // context (no such layers, swa_full, or a context no longer than the ring).
  static int swa_ring_rows(const ModelHparams& hp, int n_ctx_seq, int n_batch, bool swa_full);
  // The KV cache one sequence of such a context holds: layers with n_ctx_seq rows, ring layers
  // with swa_ring_rows (what `info` reports; equal to kv_bytes() of a one-sequence context).
  struct KvFootprint {
    int64_t layers_full = 0, layers_swa = 0;
    int rows_swa = 0;
    size_t bytes_full = 0, bytes_swa = 0;
  };
  static KvFootprint kv_footprint(const ModelHparams& hp, int n_ctx_seq, int n_batch, DType kv_type, bool swa_full);

  // One forward pass; returns the flagged rows' logits in batch order, [n_out][n_vocab]
  // (empty when no row is flagged). The span stays valid until the next call.
  Expected<std::span<const float>> decode(const Batch& b);
  // The same pass returning the flagged rows' hidden states after the final norm instead of
  // their logits, [n_out][n_embd] (the server's embeddings; the cache is written as by decode).
  Expected<std::span<const float>> decode_embeddings(const Batch& b);

  int seq_len(int s) const;
  // Drops positions [p0, p1) of sequence s (p1 = -1: to its end); the positions after p1 move
  // down by p1 - p0 with their keys re-rotated, on the backend.
  Status seq_rm(int s, int p0, int p1);
  Status seq_rollback(int s, int n);     // drops the last n positions of s
  Status seq_cp(int src, int dst, int n);  // dst becomes src's first n positions
  void seq_clear(int s);
  // Whether sequence s can be cut back to (or copied as) its first n positions: always with
  // whole caches; with rings, while they still hold the n_swa - 1 positions before n.
  bool can_keep(int s, int n) const;

  // Sequence s's rows of every cache: for each layer its K rows then its V rows, positions
  // 0 .. seq_len - 1 (a sliding-window layer: only the last n_swa - 1 of them).
  Expected<std::vector<uint8_t>> kv_export(int s) const;
  // Writes rows laid out as kv_export returns them; sets seq_len(s) to n.
  Status kv_import(int s, std::span<const uint8_t> bytes, int n);
  size_t kv_export_bytes(int n) const;  // kv_export's size for a sequence of n positions
  size_t kv_bytes() const;      // the whole cache
  int swa_ring() const { return swa_ring_; }  // swa_ring_rows of this context

  int n_seq() const { return p_.n_seq; }
  int n_ctx_seq() const { return n_ctx_seq_; }
  int n_batch() const { return n_batch_; }
  int n_vocab() const;
  int n_embd() const;
  int n_threads() const { return n_threads_; }
  const Model& model() const { return *model_; }
  const ContextParams& params() const { return p_; }
  const ContextStats& stats() const { return stats_; }
  std::vector<std::string> backend_names() const;
  // Where the layers run and the device memory each device holds (weights, KV cache,
  // activations), for `info` and -v: "layers 20..29 and the output on Vulkan0 (llvmpipe): 52 MiB
  // of weights, 30 MiB of KV cache; layers 0..19 on the CPU". Empty: all on the host.
  std::string placement() const;
  // The offload devices' counters summed (graph/backend.h; zero without devices).
  BackendCounters device_counters() const;
  // Backend::describe() of each backend, in priority order (for -v).
  std::vector<std::string> backend_descriptions() const;

  // For dumps, tests and tracing (graph/ headers needed to look inside): the prepared graph a
  // batch of n_tokens with n_out flagged rows runs, and an observer of every computed node.
  Expected<const PreparedGraph*> graph(int n_tokens, int n_out, bool embeddings = false);
  void set_observer(NodeObserver obs);

 private:
  struct Impl;
  Context() = default;
  Status move_rows(std::span<const int32_t> src, std::span<const int32_t> dst, int32_t shift);
  Status move_ring_rows(const std::vector<int32_t>& src, const std::vector<int32_t>& dst, int32_t shift);
  // Positions of sequence s its rings no longer hold start below this (0 without rings).
  int ring_lo(int s) const { return swa_lo_[static_cast<size_t>(s)]; }
  int window_lo(int n) const;  // first position the next token after n positions attends to
  Expected<std::span<const float>> run(const Batch& b, bool embeddings);  // decode / decode_embeddings

  std::shared_ptr<const Model> model_;
  ContextParams p_;
  int n_ctx_seq_ = 0;
  int n_batch_ = 0;
  int n_threads_ = 0;
  std::vector<int> seq_len_;  // [n_seq]
  int swa_ring_ = 0;          // rows per sequence of the ring caches (0: none)
  std::vector<int> swa_lo_;   // [n_seq] the rings hold positions swa_lo_[s] .. seq_len(s) - 1
  ContextStats stats_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace minfer
