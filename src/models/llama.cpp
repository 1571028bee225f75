// Llama 2 / Llama 3 / SmolLM2 ("llama"): RMSNorm pre-norm decoder, NORM (pairwise) RoPE with
// optional linear scaling and rope_freqs factors, GQA, SwiGLU FFN, tied or separate output.
// Q/K/V biases are accepted when present (some Llama-architecture fine-tunes carry them).
#include "models/arch.h"

namespace minfer {
namespace {

Expected<ModelHparams> load_hparams(const GgufFile& f) {
  ModelHparams d;
  d.rms_eps = 1e-5f;
  d.rope_freq_base = 10000.0f;
  d.rope_mode = RopeMode::kNorm;
  return read_decoder_hparams(f, "llama", d);
}

void extra(TensorBinder& b, const ModelHparams& hp, int il, LayerWeights& l) {
  const std::string p = fmt::format("blk.{}.", il);
  l.bq = b.optional(p + "attn_q.bias", {hp.n_embd_q()});
  l.bk = b.optional(p + "attn_k.bias", {hp.n_embd_k()});
  l.bv = b.optional(p + "attn_v.bias", {hp.n_embd_v()});
}

Status bind_weights(const GgufFile& f, const ModelHparams& hp, ModelWeights& w) {
  return bind_decoder_weights(f, hp, w, extra);
}

Graph build(const Model& m, const GraphParams& p) { return LlmBuilder(m, p).decoder(); }

}  // namespace

extern const ArchSpec kLlamaArch;
const ArchSpec kLlamaArch = {"llama", load_hparams, bind_weights, build, build_decoder_kv_move};

}  // namespace minfer
