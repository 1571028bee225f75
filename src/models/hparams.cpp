// Hyperparameters and tensor binding shared by the decoder-only architectures.
#include <filesystem>

#include "models/arch.h"

namespace minfer {
namespace {

// An optional positive integer key; an error when present but not a positive integer (a
// per-layer array, for instance, which these architectures do not use).
Expected<int64_t> opt_int(const GgufFile& f, const std::string& key, int64_t def) {
  const GgufValue* v = f.find(key);
  if (!v) return def;
  auto i = v->as_int();
  if (!i || *i <= 0) return make_error("model: '{}' = {} is not a positive integer", key, v->to_display());
  return *i;
}

Expected<int64_t> req_int(const GgufFile& f, const std::string& key) {
  if (!f.find(key)) return make_error("model: required key '{}' is missing", key);
  return opt_int(f, key, 0);
}

Expected<float> opt_float(const GgufFile& f, const std::string& key, float def) {
  const GgufValue* v = f.find(key);
  if (!v) return def;
  auto x = v->as_float();
  if (!x || !(*x > 0)) return make_error("model: '{}' = {} is not a positive number", key, v->to_display());
  return static_cast<float>(*x);
}

std::string shape_str(const std::vector<int64_t>& s) {
  std::string o = "[";
  for (size_t i = 0; i < s.size(); ++i) o += fmt::format("{}{}", i ? ", " : "", s[i]);
  return o + "]";
}

}  // namespace

Expected<ModelHparams> read_decoder_hparams(const GgufFile& f, std::string_view arch_view, const ModelHparams& defaults) {
  const std::string a = std::string(arch_view) + ".";
  ModelHparams hp = defaults;
  hp.arch = std::string(arch_view);
  auto name = f.get_string("general.name");
  hp.name = name ? *name : std::filesystem::path(f.path()).filename().string();

#define MINFER_REQ(field, key)        \
  do {                                \
    auto v_ = req_int(f, a + key);    \
    if (!v_) return v_.error();       \
    hp.field = *v_;                   \
  } while (0)
#define MINFER_OPT(field, key, def)     \
  do {                                  \
    auto v_ = opt_int(f, a + key, def); \
    if (!v_) return v_.error();         \
    hp.field = *v_;                     \
  } while (0)
  MINFER_REQ(n_embd, "embedding_length");
  MINFER_REQ(n_layer, "block_count");
  MINFER_REQ(n_head, "attention.head_count");
  MINFER_REQ(n_ff, "feed_forward_length");
  MINFER_OPT(n_head_kv, "attention.head_count_kv", hp.n_head);
  MINFER_OPT(n_ctx_train, "context_length", 2048);
  if (hp.n_embd % hp.n_head != 0 && !f.find(a + "attention.key_length"))
    return make_error("model: n_embd {} is not a multiple of n_head {} and '{}attention.key_length' is missing",
                      hp.n_embd, hp.n_head, a);
  MINFER_OPT(head_dim_k, "attention.key_length", hp.n_embd / hp.n_head);
  MINFER_OPT(head_dim_v, "attention.value_length", hp.head_dim_k);
  MINFER_OPT(n_rot, "rope.dimension_count", hp.head_dim_k);
#undef MINFER_REQ
#undef MINFER_OPT

  auto eps = opt_float(f, a + "attention.layer_norm_rms_epsilon", defaults.rms_eps);
  auto base = opt_float(f, a + "rope.freq_base", defaults.rope_freq_base);
  if (!eps) return eps.error();
  if (!base) return base.error();
  hp.rms_eps = *eps;
  hp.rope_freq_base = *base;

  // RoPE scaling: linear (positions divided by the factor) is supported; anything else is not.
  std::string scaling = "none";
  if (auto s = f.get_string(a + "rope.scaling.type")) scaling = *s;
  if (scaling == "linear") {
    auto factor = opt_float(f, a + "rope.scaling.factor", 1.0f);
    if (!factor) return factor.error();
    hp.rope_freq_scale = 1.0f / *factor;
  } else if (scaling != "none") {
    return make_error("model: rope scaling '{}' ({}rope.scaling.type) is not supported (none, linear)", scaling, a);
  }
  if (f.find(a + "rope.scale_linear")) {  // older converters
    auto factor = opt_float(f, a + "rope.scale_linear", 1.0f);
    if (!factor) return factor.error();
    hp.rope_freq_scale = 1.0f / *factor;
  }

  // n_vocab: the tokenizer's size when present, else token_embd's rows.
  if (auto toks = f.get_array("tokenizer.ggml.tokens")) hp.n_vocab = static_cast<int64_t>((*toks)->size());
  else if (const GgufTensor* t = f.find_tensor("token_embd.weight"); t && t->shape.size() == 2) hp.n_vocab = t->shape[1];

  if (hp.n_head_kv > hp.n_head || hp.n_head % hp.n_head_kv != 0)
    return make_error("model: attention.head_count {} is not a multiple of attention.head_count_kv {}", hp.n_head,
                      hp.n_head_kv);
  if (hp.head_dim_k > 512 || hp.head_dim_v > 512)
    return make_error("model: head dimension {}/{} exceeds the supported maximum 512", hp.head_dim_k, hp.head_dim_v);
  if (hp.n_rot % 2 != 0 || hp.n_rot > hp.head_dim_k)
    return make_error("model: rope.dimension_count {} must be even and at most the head dimension {}", hp.n_rot,
                      hp.head_dim_k);
  if (hp.n_vocab <= 0) return make_error("model: no vocabulary (tokenizer.ggml.tokens and token_embd.weight missing)");
  return hp;
}

const GgufTensor* TensorBinder::require(const std::string& name, std::initializer_list<int64_t> shape) {
  const GgufTensor* t = f_.find_tensor(name);
  if (!t) {
    if (error_.empty()) error_ = fmt::format("model: tensor '{}' is missing (expected shape {})", name, shape_str(shape));
    return nullptr;
  }
  return optional(name, shape);
}

const GgufTensor* TensorBinder::optional(const std::string& name, std::initializer_list<int64_t> shape) {
  const GgufTensor* t = f_.find_tensor(name);
  if (!t) return nullptr;
  if (t->shape != std::vector<int64_t>(shape)) {
    if (error_.empty())
      error_ = fmt::format("model: tensor '{}' has shape {}, expected {}", name, shape_str(t->shape), shape_str(shape));
    return nullptr;
  }
  return t;
}

Status TensorBinder::status() const {
  if (error_.empty()) return Status::ok();
  return Error{error_};
}

Status bind_decoder_weights(const GgufFile& f, const ModelHparams& hp, ModelWeights& w,
                            void (*extra)(TensorBinder&, const ModelHparams&, int, LayerWeights&)) {
  TensorBinder b(f);
  const int64_t e = hp.n_embd;
  w.tok_embd = b.require("token_embd.weight", {e, hp.n_vocab});
  w.output_norm = b.require("output_norm.weight", {e});
  w.output = b.optional("output.weight", {e, hp.n_vocab});
  w.output_bias = b.optional("output.bias", {hp.n_vocab});
  w.rope_freqs = b.optional("rope_freqs.weight", {hp.n_rot / 2});
  w.layers.resize(static_cast<size_t>(hp.n_layer));
  for (int il = 0; il < hp.n_layer; ++il) {
    LayerWeights& l = w.layers[static_cast<size_t>(il)];
    const std::string p = fmt::format("blk.{}.", il);
    l.attn_norm = b.require(p + "attn_norm.weight", {e});
    l.wq = b.require(p + "attn_q.weight", {e, hp.n_embd_q()});
    l.wk = b.require(p + "attn_k.weight", {e, hp.n_embd_k()});
    l.wv = b.require(p + "attn_v.weight", {e, hp.n_embd_v()});
    l.wo = b.require(p + "attn_output.weight", {hp.n_head * hp.head_dim_v, e});
    l.ffn_norm = b.require(p + "ffn_norm.weight", {e});
    l.ffn_gate = b.require(p + "ffn_gate.weight", {e, hp.n_ff});
    l.ffn_up = b.require(p + "ffn_up.weight", {e, hp.n_ff});
    l.ffn_down = b.require(p + "ffn_down.weight", {hp.n_ff, e});
    if (extra) extra(b, hp, il, l);
  }
  MINFER_TRY(b.status());
  // Norms, biases and rope factors are read as f32 rows.
  auto check_f32 = [](const GgufTensor* t) -> Status {
    if (t && t->type != DType::F32)
      return make_error("model: tensor '{}' is {}; norm weights, biases and rope factors must be F32", t->name,
                        dtype_name(t->type));
    return Status::ok();
  };
  MINFER_TRY(check_f32(w.output_norm));
  MINFER_TRY(check_f32(w.output_bias));
  MINFER_TRY(check_f32(w.rope_freqs));
  for (const LayerWeights& l : w.layers) {
    for (const GgufTensor* t : {l.attn_norm, l.ffn_norm, l.bq, l.bk, l.bv, l.q_norm, l.k_norm}) MINFER_TRY(check_f32(t));
  }
  if (!w.output) w.output = w.tok_embd;
  return Status::ok();
}

}  // namespace minfer
