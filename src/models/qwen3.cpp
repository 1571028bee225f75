// Qwen3 dense ("qwen3") and Qwen3-MoE ("qwen3moe": Qwen3-30B-A3B, Qwen3-235B-A22B): the Llama
// block (llama.cpp, build_llama_graph) without biases and with per-head RMSNorm of Q and K
// (attn_q_norm / attn_k_norm, f32 [head_dim]) before RoPE; NEOX RoPE; the head dimension comes
// from attention.key_length and may differ from n_embd / n_head (Qwen3-0.6B: 128 vs 64), which
// sets the Q width, the KV row width, the rotated dims and the 1/sqrt(head_dim) scale.
// Qwen3-MoE replaces every FFN by a mixture of experts: router ffn_gate_inp [n_embd,
// expert_count], the top expert_used_count experts by softmax probability, their weights
// renormalised to sum 1, each a SwiGLU FFN of width expert_feed_forward_length
// (ffn_{gate,up,down}_exps, 3-D); no shared expert.
#include "models/arch.h"

namespace minfer {
namespace {

Expected<ModelHparams> load_hparams_of(const GgufFile& f, const std::string& arch) {
  auto hp = read_decoder_hparams(f, arch, {1e-6f, 1000000.0f, RopeMode::kNeox});
  if (!hp) return hp;
  // Falling back to n_embd / n_head when key_length is absent is silent garbage on every real
  // Qwen3 whose head dim is decoupled (0.6B: 128, not 64); the Q/K shapes would catch it, but
  // the error should say why.
  const GgufTensor* wq = f.find_tensor("blk.0.attn_q.weight");
  if (!f.find(arch + ".attention.key_length") && wq && wq->shape.size() == 2 && wq->shape[1] != hp->n_embd_q())
    return make_error("model: {}.attention.key_length is missing and blk.0.attn_q.weight has {} rows, not "
                      "n_head {} x n_embd / n_head {}",
                      arch, wq->shape[1], hp->n_head, hp->head_dim_k);
  if (arch == "qwen3moe") {
    MINFER_TRY(read_moe_hparams(f, *hp, 0));
    if (hp->n_expert == 0)
      return make_error("model: qwen3moe.expert_count and qwen3moe.expert_used_count are required (a Qwen3-MoE "
                        "without experts is a qwen3)");
  }
  return hp;
}

Expected<ModelHparams> load_hparams(const GgufFile& f) { return load_hparams_of(f, "qwen3"); }
Expected<ModelHparams> load_hparams_moe(const GgufFile& f) { return load_hparams_of(f, "qwen3moe"); }

// Both variants: the FFN follows hp.n_expert.
Status bind_weights(const GgufFile& f, const ModelHparams& hp, ModelWeights& w) {
  return bind_layers(f, hp, w, [&](TensorBinder& b, int il, const std::string& p, LayerWeights& l) {
  bind_attention_weights(b, hp, il, l);
  l.q_norm = b.require(p + "attn_q_norm.weight", {hp.head_dim_k});
  l.k_norm = b.require(p + "attn_k_norm.weight", {hp.head_dim_k});
  if (hp.n_expert > 0)
    bind_moe_weights(b, hp, il, l);
  else
    bind_ffn_weights(b, hp, il, l);
  });
}

}  // namespace

extern const ArchSpec kQwen3Arch;
const ArchSpec kQwen3Arch = {"qwen3", load_hparams, bind_weights, build_llama_graph, build_decoder_kv_move};
extern const ArchSpec kQwen3MoeArch;
const ArchSpec kQwen3MoeArch = {"qwen3moe", load_hparams_moe, bind_weights, build_llama_graph, build_decoder_kv_move};

}  // namespace minfer
