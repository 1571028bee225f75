// Qwen2 / Qwen2.5 ("qwen2"): the Llama block (llama.cpp, build_llama_graph) with Q/K/V biases
// (required) and NEOX RoPE (rotating element i with i + n_rot/2); tied or separate output.
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

Status bind_weights(const GgufFile& f, const ModelHparams& hp, ModelWeights& w) {
  TensorBinder b(f);
  bind_output_weights(b, hp, w);
  for (int il = 0; il < hp.n_layer; ++il) {
    LayerWeights& l = w.layers[static_cast<size_t>(il)];
    const std::string p = fmt::format("blk.{}.", il);
    bind_attention_weights(b, hp, il, l);
    l.bq = b.require(p + "attn_q.bias", {hp.n_embd_q()});
    l.bk = b.require(p + "attn_k.bias", {hp.n_embd_k()});
    l.bv = b.require(p + "attn_v.bias", {hp.n_embd_v()});
    bind_ffn_weights(b, hp, il, l);
  }
  return finish_weights(b, w);
}

}  // namespace

extern const ArchSpec kQwen2Arch;
const ArchSpec kQwen2Arch = {"qwen2", load_hparams, bind_weights, build_llama_graph, build_decoder_kv_move};

}  // namespace minfer
