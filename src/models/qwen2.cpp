// Qwen2 / Qwen2.5 ("qwen2"): the Llama block with Q/K/V biases (required) and NEOX RoPE
// (rotating element i with i + n_rot/2); tied or separate output.
#include "models/arch.h"

namespace minfer {
namespace {

Expected<ModelHparams> load_hparams(const GgufFile& f) {
  ModelHparams d;
  d.rms_eps = 1e-6f;
  d.rope_freq_base = 10000.0f;
  d.rope_mode = RopeMode::kNeox;
  return read_decoder_hparams(f, "qwen2", d);
}

void extra(TensorBinder& b, const ModelHparams& hp, int il, LayerWeights& l) {
  const std::string p = fmt::format("blk.{}.", il);
  l.bq = b.require(p + "attn_q.bias", {hp.n_embd_q()});
  l.bk = b.require(p + "attn_k.bias", {hp.n_embd_k()});
  l.bv = b.require(p + "attn_v.bias", {hp.n_embd_v()});
}

Status bind_weights(const GgufFile& f, const ModelHparams& hp, ModelWeights& w) {
  return bind_decoder_weights(f, hp, w, extra);
}

Graph build(const Model& m, const GraphParams& p) { return LlmBuilder(m, p).decoder(); }

}  // namespace

extern const ArchSpec kQwen2Arch;
const ArchSpec kQwen2Arch = {"qwen2", load_hparams, bind_weights, build, build_decoder_kv_move};

}  // namespace minfer
