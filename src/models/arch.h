// What an architecture file provides, and the building blocks they share. Internal to models/.
// An architecture file reads like its paper's figure: hyperparameters, tensors, then the layer
// loop written from the blocks below (docs/adding-a-model.md).
//
//   // gemma3.cpp
//   Graph build(const Model& m, const GraphParams& p) {
//     LlmBuilder b(m, p);
//     int x = b.embed();
//     for (int il = 0; il < m.hparams().n_layer; ++il) {
//       int a = b.attention(il, b.norm(il, "attn_norm", x, l.attn_norm));
//       ...
//     }
//     return b.logits(x);
//   }
//   extern const ArchSpec kGemma3Arch = {"gemma3", load_hparams, bind_weights, build, build_decoder_kv_move};
//   // registry.cpp
//   &kGemma3Arch,
#pragma once

#include <functional>
#include <map>
#include <string>
#include <string_view>

#include "graph/builder.h"
#include "models/model.h"

namespace minfer {

struct ArchSpec {
  std::string_view name;
  // Hyperparameters from "<arch>.*" keys with the architecture's defaults, validated.
  Expected<ModelHparams> (*load_hparams)(const GgufFile& f);
  // Finds every tensor and checks its shape; an error names the tensor and both shapes.
  Status (*bind_weights)(const GgufFile& f, const ModelHparams& hp, ModelWeights& w);
  // The forward graph.
  Graph (*build)(const Model& m, const GraphParams& p);
  // The KV move graph (model.h): how this architecture re-rotates cached keys.
  Graph (*build_kv_move)(const Model& m, const KvMoveParams& p);
};

const ArchSpec* find_arch(std::string_view name);  // registry.cpp

// ---- hyperparameters (hparams.cpp) ----

// The architecture's defaults for keys a file may leave out.
struct DecoderDefaults {
  float rms_eps;
  float rope_freq_base;
  RopeMode rope_mode;
};
// The keys every decoder-only architecture here shares.
Expected<ModelHparams> read_decoder_hparams(const GgufFile& f, std::string_view arch, const DecoderDefaults& defaults);

// Sliding-window attention: "<arch>.attention.sliding_window" (else `default_window`; 0 and no
// key: none) and the layer pattern "<arch>.attention.sliding_window_pattern" (a period P: every
// layer but each P-th is local, else `default_period`; or one bool per layer), plus
// "<arch>.rope.freq_base_swa" for the local layers (else `hp.rope_freq_base_swa`).
Status read_swa_hparams(const GgufFile& f, ModelHparams& hp, int64_t default_window, int64_t default_period);

// Mixture of experts: "<arch>.expert_count" and "<arch>.expert_used_count" (both or neither;
// used <= count), "<arch>.expert_feed_forward_length" (else `default_ff`; 0: n_ff /
// expert_used_count, llama.cpp's default for qwen3moe).
Status read_moe_hparams(const GgufFile& f, ModelHparams& hp, int64_t default_ff);

// An optional positive float key (the default when absent).
Expected<float> read_opt_float(const GgufFile& f, const std::string& key, float def);

// ---- tensors (hparams.cpp) ----

// Looks tensors up and checks shapes, collecting the first error.
class TensorBinder {
 public:
  explicit TensorBinder(const GgufFile& f) : f_(f) {}
  // A missing or misshapen tensor records an error and returns nullptr.
  const GgufTensor* require(const std::string& name, std::initializer_list<int64_t> shape);
  // Missing is fine (nullptr); present with the wrong shape is an error.
  const GgufTensor* optional(const std::string& name, std::initializer_list<int64_t> shape);
  // Records an error (the first one wins).
  void fail(std::string message);
  Status status() const;

 private:
  const GgufFile& f_;
  std::string error_;
};

// Rows [row0, row0 + n_rows) of a 2-D tensor as a tensor of its own ("<name>#<part>"), kept in
// w.views. Every row is whole blocks, so the view is a pointer into the parent's bytes.
const GgufTensor* row_view(ModelWeights& w, const GgufTensor* t, const std::string& part, int64_t row0, int64_t n_rows);

// A family's bind_weights in one call: the output tensors (bind_output_weights), then
// `layer(binder, il, "blk.<il>.", w.layers[il])` for every layer, then finish_weights.
using LayerBinderFn = std::function<void(TensorBinder& b, int il, const std::string& prefix, LayerWeights& l)>;
Status bind_layers(const GgufFile& f, const ModelHparams& hp, ModelWeights& w, const LayerBinderFn& layer);
// token_embd, output_norm, output (tied when absent), output.bias, rope_freqs.
void bind_output_weights(TensorBinder& b, const ModelHparams& hp, ModelWeights& w);
// attn_norm, attn_q/k/v, attn_output of layer il (separate projections).
void bind_attention_weights(TensorBinder& b, const ModelHparams& hp, int il, LayerWeights& l);
// ffn_norm, ffn_gate, ffn_up, ffn_down of layer il (a gated FFN of width hp.n_ff).
void bind_ffn_weights(TensorBinder& b, const ModelHparams& hp, int il, LayerWeights& l);
// ffn_norm, ffn_gate_inp and the experts' ffn_{gate,up,down}_exps of layer il (hp.n_expert > 0).
void bind_moe_weights(TensorBinder& b, const ModelHparams& hp, int il, LayerWeights& l);
// Every norm weight, bias and rope factor tensor is F32 (they are read as f32 rows); resolves a
// tied output. The last step of every bind_weights.
Status finish_weights(const TensorBinder& b, ModelWeights& w);

// ---- graph blocks (blocks.cpp) ----

// A quantized KV cache holds its rows rotated, as llama.cpp's does (outliers spread over a
// head, so q8_0 / q4_0 blocks lose less): q and k by the Walsh-Hadamard matrix of the largest
// power of two dividing head_dim_k, v by the 64 x 64 one and the attention output back by it
// (H = H^-1, and q.k and the V sum are unchanged in exact arithmetic). 0: not rotated (a
// float cache, or heads that are not multiples of 64).
struct KvRotation {
  int k = 0, v = 0;
};
KvRotation kv_rotation(const ModelHparams& hp, DType kv_type);

// How attention() forms its queries and scores, beyond the layer's tensors.
struct AttnBlock {
  bool scale_q = false;  // multiply q by hp.attn_scale before the scores (then the score scale is
                         // 1), as Gemma's reference does; else the scores take 1/sqrt(head_dim)
};

class LlmBuilder {
 public:
  LlmBuilder(const Model& m, const GraphParams& p);

  const ModelHparams& hp() const { return hp_; }
  const LayerWeights& layer(int il) const { return m_.weights().layers[static_cast<size_t>(il)]; }
  GraphBuilder& b() { return b_; }
  int tokens() const { return tokens_; }
  int pos() const { return pos_; }

  int weight(const GgufTensor* t);  // one node per tensor, shared by all its uses
  // Token embeddings [n_embd, n_tokens], times hp.embd_scale when it is set.
  int embed();
  // rms_norm(x) * w, written unfused (the fusion pass fuses it where the backend can). The node
  // is "blk.<il>.<name>" (il < 0: just name).
  int norm(int il, const std::string& name, int x, const GgufTensor* w);
  // x [n_in, rows] -> w x (+ b).
  int linear(const std::string& name, int x, const GgufTensor* w, const GgufTensor* b);
  // Self-attention of layer il on the normed input x [n_embd, n_tokens]: q, k, v (+ biases),
  // per-head q/k RMSNorm when the layer has them, RoPE with the layer's base and scale, the
  // cache store, causal GQA attention (windowed on sliding-window layers, soft-capped when
  // hp.attn_softcap). Returns the heads' outputs [n_head * head_dim_v, n_tokens] before
  // attn_output.
  int attention(int il, int x, AttnBlock opts = {});
  // Tail reduction: after the last layer's attention only the n_out output rows matter, so
  // the attention output and the residual input are gathered down to them (a no-op elsewhere or
  // when n_out is n_tokens).
  void tail(int il, int& attn, int& inp);
  // Gated FFNs of layer il on the normed input x: down(act(gate x) * (up x)), written unfused.
  int ffn_swiglu(int il, int x);
  int ffn_geglu(int il, int x);  // GELU (tanh approximation): Gemma
  // Mixture of experts (Mixtral, Qwen3-MoE): router logits, the top n_expert_used experts,
  // their softmax weights renormalised to sum 1, each selected expert's SwiGLU FFN, the
  // weighted sum. x [n_embd, rows] -> [n_embd, rows].
  int ffn_moe(int il, int x);
  // output_norm, the output projection (+ bias), soft-capped when hp.final_softcap; for the
  // last n_out rows. Returns the finished graph; with GraphParams::embeddings its output is the
  // normed hidden state (kOutEmbd) and there is no projection.
  Graph logits(int x);

 private:
  std::string prefix(int il) const;

  const Model& m_;
  const ModelHparams& hp_;
  GraphParams p_;
  GraphBuilder b_;
  std::map<std::string, int> weights_;
  int tokens_ = -1, pos_ = -1, out_ids_ = -1, rope_freqs_ = -1;
  int kv_rows_ = -1, kv_ranges_ = -1;  // multi_seq inputs
  int kv_rows_swa_ = -1, kv_ranges_swa_ = -1;  // swa_ring inputs
};

// The Llama block (llama.cpp): pre-norm attention and SwiGLU FFN with residuals, the FFN a
// mixture of experts when hp.n_expert > 0 (Mixtral). Qwen2, Qwen3 and Qwen3-MoE are this
// forward pass too; their tensors (biases, q/k norms) make the difference.
Graph build_llama_graph(const Model& m, const GraphParams& p);

// The Gemma block (gemma3.cpp): pre- and post-norms around attention and a GELU FFN, scaled
// embeddings and queries. Gemma 2 is this forward pass too (gemma2.cpp).
Graph build_gemma_graph(const Model& m, const GraphParams& p);
// Gemma's query scale: 1/sqrt(head_dim), or 1/sqrt(n_embd / n_head) for the 27B models (the
// layer count n_layer_27b tells them apart, as the reference configs do).
float gemma_query_scale(const ModelHparams& hp, int64_t n_layer_27b);
// The Gemma tensors: the Llama ones plus post-attention and post-FFN norms (q/k norms: gemma3).
Status bind_gemma_weights(const GgufFile& f, const ModelHparams& hp, ModelWeights& w, bool qk_norm);

// The KV move graph of the decoders here: one RoPE per layer (the model's mode, n_rot, the
// layer's base and scale, rope_freqs).
Graph build_decoder_kv_move(const Model& m, const KvMoveParams& p);

}  // namespace minfer
