// Hyperparameters and tensor binding shared by the decoder-only architectures.
#include <algorithm>
#include <climits>
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

// The same with 0 allowed (a sliding window of 0 means none).
Expected<int64_t> opt_int_or_zero(const GgufFile& f, const std::string& key, int64_t def) {
  const GgufValue* v = f.find(key);
  if (!v) return def;
  auto i = v->as_int();
  if (!i || *i < 0) return make_error("model: '{}' = {} is not a non-negative integer", key, v->to_display());
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

Expected<ModelHparams> read_decoder_hparams(const GgufFile& f, std::string_view arch_view, const DecoderDefaults& defaults) {
  const std::string a = std::string(arch_view) + ".";
  ModelHparams hp;
  hp.rms_eps = defaults.rms_eps;
  hp.rope_freq_base = defaults.rope_freq_base;
  hp.rope_mode = defaults.rope_mode;
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

void TensorBinder::fail(std::string message) {
  if (error_.empty()) error_ = std::move(message);
}

const GgufTensor* row_view(ModelWeights& w, const GgufTensor* t, const std::string& part, int64_t row0, int64_t n_rows) {
  if (!t) return nullptr;
  MINFER_ASSERT(t->shape.size() == 2 && row0 >= 0 && n_rows >= 1 && row0 + n_rows <= t->shape[1]);
  const size_t rb = row_bytes(t->type, t->shape[0]);
  GgufTensor v = *t;
  v.name = t->name + "#" + part;
  v.shape = {t->shape[0], n_rows};
  v.offset = t->offset + static_cast<uint64_t>(row0) * rb;
  v.data = t->data + static_cast<size_t>(row0) * rb;
  v.n_bytes = static_cast<size_t>(n_rows) * rb;
  w.views.push_back(std::move(v));
  return &w.views.back();
}

Status bind_layers(const GgufFile& f, const ModelHparams& hp, ModelWeights& w, const LayerBinderFn& layer) {
  TensorBinder b(f);
  bind_output_weights(b, hp, w);
  for (int il = 0; il < hp.n_layer; ++il) layer(b, il, fmt::format("blk.{}.", il), w.layers[static_cast<size_t>(il)]);
  return finish_weights(b, w);
}

void bind_output_weights(TensorBinder& b, const ModelHparams& hp, ModelWeights& w) {
  const int64_t e = hp.n_embd;
  w.tok_embd = b.require("token_embd.weight", {e, hp.n_vocab});
  w.output_norm = b.require("output_norm.weight", {e});
  w.output = b.optional("output.weight", {e, hp.n_vocab});
  w.output_bias = b.optional("output.bias", {hp.n_vocab});
  w.rope_freqs = b.optional("rope_freqs.weight", {hp.n_rot / 2});
  w.layers.resize(static_cast<size_t>(hp.n_layer));
}

void bind_attention_weights(TensorBinder& b, const ModelHparams& hp, int il, LayerWeights& l) {
  const int64_t e = hp.n_embd;
  const std::string p = fmt::format("blk.{}.", il);
  l.attn_norm = b.require(p + "attn_norm.weight", {e});
  l.wq = b.require(p + "attn_q.weight", {e, hp.n_embd_q()});
  l.wk = b.require(p + "attn_k.weight", {e, hp.n_embd_k()});
  l.wv = b.require(p + "attn_v.weight", {e, hp.n_embd_v()});
  l.wo = b.require(p + "attn_output.weight", {hp.n_head * hp.head_dim_v, e});
}

void bind_ffn_weights(TensorBinder& b, const ModelHparams& hp, int il, LayerWeights& l) {
  const int64_t e = hp.n_embd;
  const std::string p = fmt::format("blk.{}.", il);
  l.ffn_norm = b.require(p + "ffn_norm.weight", {e});
  l.ffn_gate = b.require(p + "ffn_gate.weight", {e, hp.n_ff});
  l.ffn_up = b.require(p + "ffn_up.weight", {e, hp.n_ff});
  l.ffn_down = b.require(p + "ffn_down.weight", {hp.n_ff, e});
}

Status finish_weights(const TensorBinder& b, ModelWeights& w) {
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
    for (const GgufTensor* t : {l.attn_norm, l.ffn_norm, l.bq, l.bk, l.bv, l.q_norm, l.k_norm, l.attn_post_norm,
                                l.ffn_post_norm})
      MINFER_TRY(check_f32(t));
  }
  if (!w.output) w.output = w.tok_embd;
  return Status::ok();
}

void bind_moe_weights(TensorBinder& b, const ModelHparams& hp, int il, LayerWeights& l) {
  const int64_t e = hp.n_embd, f = hp.n_ff_exp, n = hp.n_expert;
  const std::string p = fmt::format("blk.{}.", il);
  l.ffn_norm = b.require(p + "ffn_norm.weight", {e});
  l.ffn_gate_inp = b.require(p + "ffn_gate_inp.weight", {e, n});
  l.ffn_gate_exps = b.require(p + "ffn_gate_exps.weight", {e, f, n});
  l.ffn_up_exps = b.require(p + "ffn_up_exps.weight", {e, f, n});
  l.ffn_down_exps = b.require(p + "ffn_down_exps.weight", {f, e, n});
}

Status read_moe_hparams(const GgufFile& f, ModelHparams& hp, int64_t default_ff) {
  const std::string a = hp.arch + ".";
  auto count = opt_int_or_zero(f, a + "expert_count", 0);
  auto used = opt_int_or_zero(f, a + "expert_used_count", 0);
  if (!count) return count.error();
  if (!used) return used.error();
  hp.n_expert = *count;
  hp.n_expert_used = *used;
  if ((hp.n_expert == 0) != (hp.n_expert_used == 0) || hp.n_expert_used > hp.n_expert || hp.n_expert > 4096)
    return make_error("model: {}expert_count {} and {}expert_used_count {} do not describe a mixture of experts "
                      "(both > 0, used <= count <= 4096)", a, hp.n_expert, a, hp.n_expert_used);
  if (hp.n_expert == 0) return Status::ok();
  auto ff = opt_int(f, a + "expert_feed_forward_length", default_ff > 0 ? default_ff : hp.n_ff / hp.n_expert_used);
  if (!ff) return ff.error();
  hp.n_ff_exp = *ff;
  return Status::ok();
}

Expected<float> read_opt_float(const GgufFile& f, const std::string& key, float def) { return opt_float(f, key, def); }

Status read_swa_hparams(const GgufFile& f, ModelHparams& hp, int64_t default_window, int64_t default_period) {
  const std::string a = hp.arch + ".";
  auto window = opt_int_or_zero(f, a + "attention.sliding_window", default_window);
  if (!window) return window.error();
  // A window past any context a graph can have never clips: keep it in the op's int32.
  hp.n_swa = std::min<int64_t>(*window, INT32_MAX);
  hp.swa_layers.clear();
  if (hp.n_swa == 0) return Status::ok();
  hp.swa_layers.assign(static_cast<size_t>(hp.n_layer), 0);
  const std::string pkey = a + "attention.sliding_window_pattern";
  const GgufValue* pv = f.find(pkey);
  if (const GgufArray* arr = pv ? pv->as_array() : nullptr) {
    if (static_cast<int64_t>(arr->size()) != hp.n_layer)
      return make_error("model: '{}' has {} entries for {} layers", pkey, arr->size(), hp.n_layer);
    for (size_t i = 0; i < arr->size(); ++i) {
      const GgufValue item = arr->at(i);
      std::optional<bool> b = item.as_bool();
      if (!b)
        if (auto n = item.as_int(); n && (*n == 0 || *n == 1)) b = *n == 1;
      if (!b) return make_error("model: '{}'[{}] = {} is not a bool", pkey, i, item.to_display());
      hp.swa_layers[i] = *b ? 1 : 0;
    }
  } else {
    auto period = opt_int_or_zero(f, pkey, default_period);
    if (!period) return period.error();
    // Every layer but each period-th one is local, as llama.cpp and transformers read the
    // pattern: period 1 makes no layer local, period 0 every layer.
    for (int64_t il = 0; il < hp.n_layer; ++il)
      hp.swa_layers[static_cast<size_t>(il)] = *period == 0 || il % *period < *period - 1;
  }
  auto base = opt_float(f, a + "rope.freq_base_swa", hp.rope_freq_base_swa);
  if (!base) return base.error();
  hp.rope_freq_base_swa = *base;
  return Status::ok();
}

}  // namespace minfer
