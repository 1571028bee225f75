// A loaded model: hyperparameters and weights (zero-copy views into the mmap'd GGUF), checked
// at load, and the forward graph for given shape parameters. One file per architecture
// (llama.cpp, qwen2.cpp, qwen3.cpp with qwen3moe, gemma2.cpp, gemma3.cpp, phi3.cpp) plus one line in
// registry.cpp; docs/adding-a-model.md is the recipe.
//
//   auto m = Model::load("SmolLM2-135M-Instruct-Q4_1.gguf");
//   if (!m) { fprintf(stderr, "%s\n", m.error().message.c_str()); return 1; }
//   const ModelHparams& hp = (*m)->hparams();          // hp.n_layer, hp.n_vocab ...
//   Graph g = (*m)->build_graph({.n_tokens = 8, .n_out = 1, .n_ctx = 512});
//   // inputs: kInpTokens, kInpPos (and kInpOutIds when n_out < n_tokens); output: kOutLogits
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "gguf/reader.h"
#include "graph/graph.h"

namespace minfer {

struct ModelHparams {
  std::string arch;  // general.architecture
  std::string name;  // general.name (or the file name)
  int64_t n_vocab = 0;
  int64_t n_embd = 0;
  int64_t n_layer = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t n_ff = 0;
  int64_t head_dim_k = 0;  // attention.key_length (default n_embd / n_head)
  int64_t head_dim_v = 0;  // attention.value_length (default head_dim_k)
  int64_t n_rot = 0;       // rope.dimension_count (default head_dim_k)
  int64_t n_ctx_train = 0;
  float rms_eps = 1e-5f;
  float rope_freq_base = 10000.0f;
  float rope_freq_scale = 1.0f;  // 1 / rope.scaling.factor (linear scaling)
  RopeMode rope_mode = RopeMode::kNorm;
  bool tied_output = false;  // no output.weight: the projection reuses token_embd

  // Family extras; the defaults mean "none".
  float embd_scale = 0.0f;     // token embeddings times this (Gemma: sqrt(n_embd)); 0: not scaled
  float attn_scale = 0.0f;     // query scale before the scores (0: 1 / sqrt(head_dim_k))
  float attn_softcap = 0.0f;   // attention scores c * tanh(s / c) (Gemma 2); 0: off
  float final_softcap = 0.0f;  // logits c * tanh(x / c) (Gemma 2); 0: off
  int64_t n_swa = 0;           // sliding window of the local layers (0: none)
  std::vector<uint8_t> swa_layers;  // [n_layer] 1 = sliding-window layer (empty: none)
  float rope_freq_base_swa = 10000.0f;  // RoPE of the sliding-window layers
  float rope_freq_scale_swa = 1.0f;
  int64_t n_expert = 0;        // mixture of experts: experts per layer (0: a dense FFN)
  int64_t n_expert_used = 0;   // experts each token is routed to
  int64_t n_ff_exp = 0;        // an expert's FFN width

  bool is_swa(int64_t il) const { return n_swa > 0 && !swa_layers.empty() && swa_layers[static_cast<size_t>(il)]; }
  float rope_base(int64_t il) const { return is_swa(il) ? rope_freq_base_swa : rope_freq_base; }
  float rope_scale(int64_t il) const { return is_swa(il) ? rope_freq_scale_swa : rope_freq_scale; }
  int64_t n_embd_q() const { return n_head * head_dim_k; }
  int64_t n_embd_k() const { return n_head_kv * head_dim_k; }
  int64_t n_embd_v() const { return n_head_kv * head_dim_v; }
};

struct LayerWeights {
  const GgufTensor* attn_norm = nullptr;
  const GgufTensor* wq = nullptr;
  const GgufTensor* wk = nullptr;
  const GgufTensor* wv = nullptr;
  const GgufTensor* bq = nullptr;  // optional biases (qwen2: required)
  const GgufTensor* bk = nullptr;
  const GgufTensor* bv = nullptr;
  const GgufTensor* q_norm = nullptr;  // qwen3: per-head RMSNorm weights [head_dim_k]
  const GgufTensor* k_norm = nullptr;
  const GgufTensor* wo = nullptr;
  const GgufTensor* attn_post_norm = nullptr;  // gemma: norm of the attention output
  const GgufTensor* ffn_norm = nullptr;
  const GgufTensor* ffn_gate = nullptr;
  const GgufTensor* ffn_up = nullptr;
  const GgufTensor* ffn_down = nullptr;
  const GgufTensor* ffn_post_norm = nullptr;   // gemma: norm of the FFN output
  const GgufTensor* ffn_gate_inp = nullptr;    // MoE router [n_embd, n_expert]
  const GgufTensor* ffn_gate_exps = nullptr;   // MoE experts [n_embd, n_ff_exp, n_expert]
  const GgufTensor* ffn_up_exps = nullptr;     //             [n_embd, n_ff_exp, n_expert]
  const GgufTensor* ffn_down_exps = nullptr;   //             [n_ff_exp, n_embd, n_expert]
};

struct ModelWeights {
  const GgufTensor* tok_embd = nullptr;
  const GgufTensor* output_norm = nullptr;
  const GgufTensor* output = nullptr;       // == tok_embd when tied
  const GgufTensor* output_bias = nullptr;  // optional
  const GgufTensor* rope_freqs = nullptr;   // optional per-pair frequency divisors [n_rot/2]
  std::vector<LayerWeights> layers;
  // Row ranges of fused tensors (phi3's attn_qkv, its gate|up ffn_up) bound as tensors of their
  // own: same type, data pointing into the parent's rows (arch.h, row_view). Stable addresses.
  std::deque<GgufTensor> views;
};

// The shape parameters of a forward graph: the graph is a function of these only.
struct GraphParams {
  int64_t n_tokens = 1;  // rows in the batch
  int64_t n_out = 1;     // logits for the last n_out rows (1 <= n_out <= n_tokens)
  int64_t n_ctx = 512;   // KV cache rows
  DType kv_type = DType::F16;
  // Several sequences in one batch (the server's continuous batching): the cache rows a token
  // is stored at and the rows it attends to come from kInpKvRows / kInpKvRanges instead of
  // following from kInpPos (which then only drives RoPE).
  bool multi_seq = false;
  // multi_seq only: the sliding-window layers' caches are rings of swa_ring rows per sequence
  // (n_ctx_swa rows in all), position p of a sequence at its first row + p mod swa_ring; their
  // rows come from kInpKvRowsSwa / kInpKvRangesSwa. 0: they are full caches like the others.
  int64_t swa_ring = 0;
  int64_t n_ctx_swa = 0;
  // The output is the hidden state after the final norm (kOutEmbd) instead of the logits: the
  // embeddings of the n_out rows (the server's /embeddings pools them).
  bool embeddings = false;

  bool operator==(const GraphParams&) const = default;
};

// Graph inputs and output, by node name (the same for every architecture).
inline constexpr const char* kInpTokens = "inp_tokens";    // I32 [n_tokens] token ids
inline constexpr const char* kInpPos = "inp_pos";          // I32 [n_tokens] positions
inline constexpr const char* kInpOutIds = "inp_out_ids";   // I32 [n_out] rows kept for the output
inline constexpr const char* kInpKvRows = "inp_kv_rows";     // multi_seq: I32 [n_tokens] cache row per token
inline constexpr const char* kInpKvRanges = "inp_kv_ranges"; // multi_seq: I32 [3, n_tokens] (first, rows, seq rows)
inline constexpr const char* kInpKvRowsSwa = "inp_kv_rows_swa";     // swa_ring: the same for the ring caches
inline constexpr const char* kInpKvRangesSwa = "inp_kv_ranges_swa";
inline constexpr const char* kOutLogits = "result_output"; // F32 [n_vocab, n_out]
inline constexpr const char* kOutEmbd = "result_norm";     // F32 [n_embd, n_out] (GraphParams::embeddings)
// The third kInpKvRanges value of a token whose arithmetic must not depend on the batch (the
// server's batch-invariant mode): as if its sequence had an unbounded number of rows.
inline constexpr int32_t kAttnRowsInvariant = 0x7fffffff;

// The shape parameters of a KV move graph (Model::build_kv_move): for every layer, rows
// kInpKvSrc of the K and V caches are gathered, K is rotated by kInpKvShift positions when
// `rotate` (RoPE angles are linear in the position, so R(p + s) = R(s) R(p)), and both are
// written to rows kInpKvDst. Removing positions (the rest shifts down, rotated) and copying a
// prefix from one sequence's rows to another's are both such a move; it runs on the backends
// that hold the caches, never through the host.
enum class KvLayers { kAll, kFull, kSwa };  // which layers' caches a move graph edits
struct KvMoveParams {
  int64_t n_rows = 1;   // rows moved
  int64_t n_ctx = 512;  // rows of the edited caches (GraphParams::n_ctx, or n_ctx_swa for kSwa)
  DType kv_type = DType::F16;
  bool rotate = false;
  KvLayers layers = KvLayers::kAll;  // kFull / kSwa: only the full-context / sliding-window layers

  bool operator==(const KvMoveParams&) const = default;
};
inline constexpr const char* kInpKvSrc = "inp_kv_src";      // I32 [n_rows] rows read
inline constexpr const char* kInpKvDst = "inp_kv_dst";      // I32 [n_rows] rows written
inline constexpr const char* kInpKvShift = "inp_kv_shift";  // rotate: I32 [n_rows] position delta

struct ArchSpec;

class Model {
 public:
  // Opens the GGUF, reads and checks hyperparameters and every tensor's presence and shape.
  static Expected<std::shared_ptr<const Model>> load(const std::string& path);

  const ModelHparams& hparams() const { return hp_; }
  const ModelWeights& weights() const { return w_; }
  const GgufFile& file() const { return file_; }
  Graph build_graph(const GraphParams& p) const;
  Graph build_kv_move(const KvMoveParams& p) const;  // outputs: every layer's stored K and V

  Model(GgufFile file, const ArchSpec* arch) : file_(std::move(file)), arch_(arch) {}

 private:
  GgufFile file_;
  const ArchSpec* arch_;
  ModelHparams hp_;
  ModelWeights w_;
};

// Architectures this build can run ("llama", "qwen2", "qwen3", "gemma2", "gemma3", "phi3", "qwen3moe").
std::vector<std::string> supported_architectures();

}  // namespace minfer
