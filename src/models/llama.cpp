// Llama 2 / Llama 3 / SmolLM2 ("llama"): RMSNorm pre-norm decoder, NORM (pairwise) RoPE with
// optional linear scaling and rope_freqs factors, GQA, SwiGLU FFN, tied or separate output.
// Q/K/V biases are accepted when present (some Llama-architecture fine-tunes carry them).
// Mixtral-style models are "llama" with llama.expert_count > 0: the FFN is a mixture of experts
// (ffn_gate_inp router, ffn_{gate,up,down}_exps, top expert_used_count experts, weights
// renormalised).
//
//   x = embed(tokens)
//   for each layer:
//     x = x + attn_output(attention(attn_norm(x)))
//     x = x + down(silu(gate(ffn_norm(x))) * up(ffn_norm(x)))      (or the MoE FFN)
//   logits = output(output_norm(x))  for the last n_out rows only
#include "models/arch.h"

namespace minfer {

Graph build_llama_graph(const Model& m, const GraphParams& p) {
  LlmBuilder b(m, p);
  int x = b.embed();  // [n_embd, n_tokens]
  for (int il = 0; il < b.hp().n_layer; ++il) {
    const LayerWeights& l = b.layer(il);
    const std::string pre = fmt::format("blk.{}.", il);
    int a = b.attention(il, b.norm(il, "attn_norm", x, l.attn_norm));
    b.tail(il, a, x);
    const int ffn_inp = b.b().add(pre + "ffn_inp", b.linear(pre + "attn_output", a, l.wo, nullptr), x);
    const int h = b.norm(il, "ffn_norm", ffn_inp, l.ffn_norm);
    x = b.b().add(pre + "l_out", b.hp().n_expert > 0 ? b.ffn_moe(il, h) : b.ffn_swiglu(il, h), ffn_inp);
  }
  return b.logits(x);
}

namespace {

Expected<ModelHparams> load_hparams(const GgufFile& f) {
  auto hp = read_decoder_hparams(f, "llama", {1e-5f, 10000.0f, RopeMode::kNorm});
  if (!hp) return hp;
  MINFER_TRY(read_moe_hparams(f, *hp, hp->n_ff));
  // llama.cpp's llama reads Mixtral's expert width from feed_forward_length only.
  if (hp->n_expert > 0 && hp->n_ff_exp != hp->n_ff)
    return make_error("model: llama.expert_feed_forward_length {} differs from llama.feed_forward_length {} (a "
                      "Mixtral-style llama's experts are feed_forward_length wide)", hp->n_ff_exp, hp->n_ff);
  return hp;
}

Status bind_weights(const GgufFile& f, const ModelHparams& hp, ModelWeights& w) {
  return bind_layers(f, hp, w, [&](TensorBinder& b, int il, const std::string& p, LayerWeights& l) {
  bind_attention_weights(b, hp, il, l);
  l.bq = b.optional(p + "attn_q.bias", {hp.n_embd_q()});
  l.bk = b.optional(p + "attn_k.bias", {hp.n_embd_k()});
  l.bv = b.optional(p + "attn_v.bias", {hp.n_embd_v()});
  if (hp.n_expert > 0)
    bind_moe_weights(b, hp, il, l);
  else
    bind_ffn_weights(b, hp, il, l);
  });
}

}  // namespace

extern const ArchSpec kLlamaArch;
const ArchSpec kLlamaArch = {"llama", load_hparams, bind_weights, build_llama_graph, build_decoder_kv_move};

}  // namespace minfer
