// Gemma 3 dense ("gemma3"): embeddings times sqrt(n_embd); every block normalises before and
// after both the attention and the FFN (four RMSNorms); per-head RMSNorm of Q and K; NEOX RoPE
// with the local layers' own base (rope.freq_base_swa, default 10000) and the global layers'
// rope.freq_base; sliding-window attention on the local layers (5 of every 6 by default); the
// queries scaled by 1/sqrt(head_dim) (1/sqrt(n_embd / n_head) for the 27B); GELU (tanh) gated
// FFN; output tied to the embeddings; final-logit soft-capping only when the key is set.
//
//   x = embed(tokens) * sqrt(n_embd)
//   for each layer:
//     h = x + post_attention_norm(attn_output(attention(attn_norm(x))))
//     x = h + post_ffw_norm(down(gelu(gate(ffn_norm(h))) * up(ffn_norm(h))))
//   logits = output(output_norm(x))
#include <cmath>

#include "models/arch.h"

namespace minfer {

// The Gemma block, shared with gemma2.cpp: the two differ in data (soft-capping, q/k norms,
// the window pattern), not in the order of operations.
Graph build_gemma_graph(const Model& m, const GraphParams& p) {
  LlmBuilder b(m, p);
  int x = b.embed();  // [n_embd, n_tokens], scaled
  for (int il = 0; il < b.hp().n_layer; ++il) {
    const LayerWeights& l = b.layer(il);
    const std::string pre = fmt::format("blk.{}.", il);
    int a = b.attention(il, b.norm(il, "attn_norm", x, l.attn_norm), AttnBlock{.scale_q = true});
    b.tail(il, a, x);
    a = b.norm(il, "attn_post_norm", b.linear(pre + "attn_output", a, l.wo, nullptr), l.attn_post_norm);
    const int sa_out = b.b().add(pre + "sa_out", a, x);
    const int f = b.norm(il, "ffn_post_norm", b.ffn_geglu(il, b.norm(il, "ffn_norm", sa_out, l.ffn_norm)), l.ffn_post_norm);
    x = b.b().add(pre + "l_out", f, sa_out);
  }
  return b.logits(x);
}

// 62 layers: Gemma 3 27B; 46: Gemma 2 27B.
float gemma_query_scale(const ModelHparams& hp, int64_t n_layer_27b) {
  const double d = hp.n_layer == n_layer_27b ? static_cast<double>(hp.n_embd / hp.n_head) : static_cast<double>(hp.head_dim_k);
  return static_cast<float>(1.0 / std::sqrt(d));
}

Status bind_gemma_weights(const GgufFile& f, const ModelHparams& hp, ModelWeights& w, bool qk_norm) {
  return bind_layers(f, hp, w, [&](TensorBinder& b, int il, const std::string& p, LayerWeights& l) {
  bind_attention_weights(b, hp, il, l);
  if (qk_norm) {
    l.q_norm = b.require(p + "attn_q_norm.weight", {hp.head_dim_k});
    l.k_norm = b.require(p + "attn_k_norm.weight", {hp.head_dim_k});
  }
  l.attn_post_norm = b.require(p + "post_attention_norm.weight", {hp.n_embd});
  bind_ffn_weights(b, hp, il, l);
  l.ffn_post_norm = b.require(p + "post_ffw_norm.weight", {hp.n_embd});
  });
}

namespace {

Expected<ModelHparams> load_hparams(const GgufFile& f) {
  auto hp = read_decoder_hparams(f, "gemma3", {1e-6f, 1000000.0f, RopeMode::kNeox});
  if (!hp) return hp;
  hp->embd_scale = std::sqrt(static_cast<float>(hp->n_embd));
  hp->attn_scale = gemma_query_scale(*hp, 62);
  hp->rope_freq_base_swa = 10000.0f;
  MINFER_TRY(read_swa_hparams(f, *hp, 0, 6));
  auto cap = read_opt_float(f, "gemma3.final_logit_softcapping", 0.0f);
  if (!cap) return cap.error();
  hp->final_softcap = *cap;
  return hp;
}

Status bind_weights(const GgufFile& f, const ModelHparams& hp, ModelWeights& w) {
  return bind_gemma_weights(f, hp, w, /*qk_norm=*/true);
}

}  // namespace

extern const ArchSpec kGemma3Arch;
const ArchSpec kGemma3Arch = {"gemma3", load_hparams, bind_weights, build_gemma_graph, build_decoder_kv_move};

}  // namespace minfer
