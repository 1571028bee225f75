// Qwen2 / Qwen2.5 ("qwen2"): the Llama block (llama.cpp, build_llama_graph) with Q/K/V biases
// (required) and NEOX RoPE (rotating element i with i + n_rot/2); tied or separate output.
#include "models/arch.h"

namespace minfer {
namespace {

Expected<ModelHparams> load_hparams(const GgufFile& f) {
  return read_decoder_hparams(f, "qwen2", {1e-6f, 10000.0f, RopeMode::kNeox});
}

Status bind_weights(const GgufFile& f, const ModelHparams& hp, ModelWeights& w) {
  return bind_layers(f, hp, w, [&](TensorBinder& b, int il, const std::string& p, LayerWeights& l) {
  bind_attention_weights(b, hp, il, l);
  l.bq = b.require(p + "attn_q.bias", {hp.n_embd_q()});
  l.bk = b.require(p + "attn_k.bias", {hp.n_embd_k()});
  l.bv = b.require(p + "attn_v.bias", {hp.n_embd_v()});
  bind_ffn_weights(b, hp, il, l);
  });
}

}  // namespace

extern const ArchSpec kQwen2Arch;
const ArchSpec kQwen2Arch = {"qwen2", load_hparams, bind_weights, build_llama_graph, build_decoder_kv_move};

}  // namespace minfer
