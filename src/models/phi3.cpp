// Phi-3 / Phi-3.5 mini and medium ("phi3"): the Llama block order with fused weights: Q, K and V
// in one attn_qkv [n_embd, n_embd + 2 n_embd_kv] (separate attn_q/k/v accepted too), and the
// FFN's gate and up in one ffn_up [n_embd, 2 n_ff] (gate rows first), both bound as row views
// of the fused tensor (no copy, the same matmul kernels); NEOX RoPE over rope.dimension_count
// dims; queries scaled by 1/sqrt(head_dim) before the scores, as the reference does. The 128k
// variants' LongRoPE factors (rope_factors_long/short) are refused with a clear error until they
// are modelled. Like llama.cpp, the sliding_window key is not applied (the converted models'
// window metadata is unreliable); every layer attends to the whole context.
#include "models/arch.h"

namespace minfer {
namespace {

Graph build(const Model& m, const GraphParams& p) {
  LlmBuilder b(m, p);
  int x = b.embed();  // [n_embd, n_tokens]
  for (int il = 0; il < b.hp().n_layer; ++il) {
    const LayerWeights& l = b.layer(il);
    const std::string pre = fmt::format("blk.{}.", il);
    int a = b.attention(il, b.norm(il, "attn_norm", x, l.attn_norm), AttnBlock{.scale_q = true});
    b.tail(il, a, x);
    const int ffn_inp = b.b().add(pre + "ffn_inp", b.linear(pre + "attn_output", a, l.wo, nullptr), x);
    x = b.b().add(pre + "l_out", b.ffn_swiglu(il, b.norm(il, "ffn_norm", ffn_inp, l.ffn_norm)), ffn_inp);
  }
  return b.logits(x);
}

Expected<ModelHparams> load_hparams(const GgufFile& f) {
  return read_decoder_hparams(f, "phi3", {1e-5f, 10000.0f, RopeMode::kNeox});
}

Status bind_weights(const GgufFile& f, const ModelHparams& hp, ModelWeights& w) {
  if (f.find_tensor("rope_factors_long.weight") || f.find_tensor("rope_factors_short.weight"))
    return make_error("model: Phi-3 LongRoPE (rope_factors_long/short, the 128k-context variants) is not supported yet");
  const int64_t e = hp.n_embd;
  return bind_layers(f, hp, w, [&](TensorBinder& b, int, const std::string& p, LayerWeights& l) {
  l.attn_norm = b.require(p + "attn_norm.weight", {e});
  if (f.find_tensor(p + "attn_qkv.weight")) {
    const GgufTensor* qkv = b.require(p + "attn_qkv.weight", {e, hp.n_embd_q() + hp.n_embd_k() + hp.n_embd_v()});
    l.wq = row_view(w, qkv, "q", 0, hp.n_embd_q());
    l.wk = row_view(w, qkv, "k", hp.n_embd_q(), hp.n_embd_k());
    l.wv = row_view(w, qkv, "v", hp.n_embd_q() + hp.n_embd_k(), hp.n_embd_v());
  } else {
    l.wq = b.require(p + "attn_q.weight", {e, hp.n_embd_q()});
    l.wk = b.require(p + "attn_k.weight", {e, hp.n_embd_k()});
    l.wv = b.require(p + "attn_v.weight", {e, hp.n_embd_v()});
  }
  l.wo = b.require(p + "attn_output.weight", {hp.n_head * hp.head_dim_v, e});
  l.ffn_norm = b.require(p + "ffn_norm.weight", {e});
  const GgufTensor* up = b.require(p + "ffn_up.weight", {e, 2 * hp.n_ff});
  l.ffn_gate = row_view(w, up, "gate", 0, hp.n_ff);
  l.ffn_up = row_view(w, up, "up", hp.n_ff, hp.n_ff);
  l.ffn_down = b.require(p + "ffn_down.weight", {hp.n_ff, e});
  });
}

}  // namespace

extern const ArchSpec kPhi3Arch;
const ArchSpec kPhi3Arch = {"phi3", load_hparams, bind_weights, build, build_decoder_kv_move};

}  // namespace minfer
