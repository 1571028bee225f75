// Gemma 2 ("gemma2"): the Gemma block (gemma3.cpp, build_gemma_graph) without Q/K norms, with
// attention-logit soft-capping (attn_logit_softcapping, default 50) and final-logit
// soft-capping (final_logit_softcapping, default 30), a sliding window of 4096 on every other
// layer (the even ones), one RoPE base for all layers, NEOX RoPE, output tied to the
// embeddings.
#include <cmath>

#include "models/arch.h"

namespace minfer {
namespace {

Expected<ModelHparams> load_hparams(const GgufFile& f) {
  auto hp = read_decoder_hparams(f, "gemma2", {1e-6f, 10000.0f, RopeMode::kNeox});
  if (!hp) return hp;
  hp->embd_scale = std::sqrt(static_cast<float>(hp->n_embd));
  hp->attn_scale = gemma_query_scale(*hp, 46);
  hp->rope_freq_base_swa = hp->rope_freq_base;
  hp->rope_freq_scale_swa = hp->rope_freq_scale;
  MINFER_TRY(read_swa_hparams(f, *hp, 4096, 2));
  auto attn_cap = read_opt_float(f, "gemma2.attn_logit_softcapping", 50.0f);
  auto final_cap = read_opt_float(f, "gemma2.final_logit_softcapping", 30.0f);
  if (!attn_cap) return attn_cap.error();
  if (!final_cap) return final_cap.error();
  hp->attn_softcap = *attn_cap;
  hp->final_softcap = *final_cap;
  return hp;
}

Status bind_weights(const GgufFile& f, const ModelHparams& hp, ModelWeights& w) {
  return bind_gemma_weights(f, hp, w, /*qk_norm=*/false);
}

}  // namespace

extern const ArchSpec kGemma2Arch;
const ArchSpec kGemma2Arch = {"gemma2", load_hparams, bind_weights, build_gemma_graph, build_decoder_kv_move};

}  // namespace minfer
