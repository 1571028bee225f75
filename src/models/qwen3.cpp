// Qwen3 dense ("qwen3"): no biases; per-head RMSNorm of Q and K (attn_q_norm / attn_k_norm,
// f32 [head_dim]) before RoPE; NEOX RoPE; the head dimension comes from
// attention.key_length and may differ from n_embd / n_head (Qwen3-0.6B: 128 vs 64), which sets
// the Q width, the KV row width, the rotated dims and the 1/sqrt(head_dim) scale.
#include "models/arch.h"

namespace minfer {
namespace {

Expected<ModelHparams> load_hparams(const GgufFile& f) {
  ModelHparams d;
  d.rms_eps = 1e-6f;
  d.rope_freq_base = 1000000.0f;
  d.rope_mode = RopeMode::kNeox;
  auto hp = read_decoder_hparams(f, "qwen3", d);
  if (!hp) return hp;
  // Falling back to n_embd / n_head when key_length is absent is silent garbage on every real
  // Qwen3 whose head dim is decoupled (0.6B: 128, not 64); the Q/K shapes would catch it, but
  // the error should say why.
  const GgufTensor* wq = f.find_tensor("blk.0.attn_q.weight");
  if (!f.find("qwen3.attention.key_length") && wq && wq->shape.size() == 2 && wq->shape[1] != hp->n_embd_q())
    return make_error("model: qwen3.attention.key_length is missing and blk.0.attn_q.weight has {} rows, not "
                      "n_head {} x n_embd / n_head {}",
                      wq->shape[1], hp->n_head, hp->head_dim_k);
  return hp;
}

void extra(TensorBinder& b, const ModelHparams& hp, int il, LayerWeights& l) {
  const std::string p = fmt::format("blk.{}.", il);
  l.q_norm = b.require(p + "attn_q_norm.weight", {hp.head_dim_k});
  l.k_norm = b.require(p + "attn_k_norm.weight", {hp.head_dim_k});
}

Status bind_weights(const GgufFile& f, const ModelHparams& hp, ModelWeights& w) {
  return bind_decoder_weights(f, hp, w, extra);
}

Graph build(const Model& m, const GraphParams& p) { return LlmBuilder(m, p).decoder(); }

}  // namespace

extern const ArchSpec kQwen3Arch;
const ArchSpec kQwen3Arch = {"qwen3", load_hparams, bind_weights, build, build_decoder_kv_move};

}  // namespace minfer
