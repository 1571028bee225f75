// What an architecture file provides, and the helpers they share. Internal to models/.
//
//   // qwen2.cpp
//   extern const ArchSpec kQwen2Arch = {"qwen2", load_hparams, bind_weights, build, build_decoder_kv_move};
//   // registry.cpp
//   &kQwen2Arch,
#pragma once

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

// The keys every decoder-only architecture here shares; `defaults` carries the architecture's
// defaults (rms_eps, rope_freq_base, rope_mode).
Expected<ModelHparams> read_decoder_hparams(const GgufFile& f, std::string_view arch, const ModelHparams& defaults);

// ---- tensors (hparams.cpp) ----

// Looks tensors up and checks shapes, collecting the first error.
class TensorBinder {
 public:
  explicit TensorBinder(const GgufFile& f) : f_(f) {}
  // A missing or misshapen tensor records an error and returns nullptr.
  const GgufTensor* require(const std::string& name, std::initializer_list<int64_t> shape);
  // Missing is fine (nullptr); present with the wrong shape is an error.
  const GgufTensor* optional(const std::string& name, std::initializer_list<int64_t> shape);
  Status status() const;

 private:
  const GgufFile& f_;
  std::string error_;
};

// The tensors every architecture here has (token_embd, norms, attention, SwiGLU FFN, output);
// the architecture adds its own (biases, q/k norms) through `extra(binder, layer index, lw)`.
Status bind_decoder_weights(const GgufFile& f, const ModelHparams& hp, ModelWeights& w,
                            void (*extra)(TensorBinder&, const ModelHparams&, int, LayerWeights&));

// ---- graph pieces (llm-build.cpp) ----

// The standard pre-norm decoder: llama2.c-style, one call per sub-block.
class LlmBuilder {
 public:
  LlmBuilder(const Model& m, const GraphParams& p);

  int weight(const GgufTensor* t);  // one node per tensor, shared by all its uses
  // rms_norm(x) * w, written unfused (the fusion pass fuses it where the backend can).
  int norm(const std::string& name, int x, const GgufTensor* w, float eps);
  // x [n_in, rows] -> w x (+ b).
  int linear(const std::string& name, int x, const GgufTensor* w, const GgufTensor* b);
  // Self-attention of layer il on the normed input x [n_embd, n_tokens]; returns the heads'
  // outputs [n_head * head_dim_v, rows] before attn_output (rows = n_out in a tail layer).
  int attention(int il, int x);
  // silu(gate x) * (up x) -> down, written unfused.
  int ffn_swiglu(int il, int x);
  // The whole decoder: embeddings, layers, output norm, logits. Returns the finished graph.
  Graph decoder();

  GraphBuilder& b() { return b_; }
  int tokens() const { return tokens_; }
  int pos() const { return pos_; }
  int out_ids() const { return out_ids_; }

 private:
  const Model& m_;
  const ModelHparams& hp_;
  GraphParams p_;
  GraphBuilder b_;
  std::map<std::string, int> weights_;
  int tokens_ = -1, pos_ = -1, out_ids_ = -1, rope_freqs_ = -1;
  int kv_rows_ = -1, kv_ranges_ = -1;  // multi_seq inputs
};

// The KV move graph of the decoders here: one RoPE for every layer (the model's mode, n_rot,
// base, scale and rope_freqs).
Graph build_decoder_kv_move(const Model& m, const KvMoveParams& p);

}  // namespace minfer
