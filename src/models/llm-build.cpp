// The pre-norm decoder forward pass shared by llama, qwen2 and qwen3: what differs between
// them is data (which optional tensors exist, the RoPE mode, the head dimension).
//
//   x = embed(tokens)
//   for each layer:
//     h = norm(x) -> q, k, v (+ biases) -> per-head q/k norm (qwen3) -> rope(q, k)
//     store k, v at their positions; a = causal GQA attention(q, cache)
//     x = x + attn_output(a)
//     x = x + down(silu(gate(norm(x))) * up(norm(x)))
//   logits = output(norm(x))  for the last n_out rows only
#include "models/arch.h"

#include <cmath>

namespace minfer {

LlmBuilder::LlmBuilder(const Model& m, const GraphParams& p) : m_(m), hp_(m.hparams()), p_(p) {
  MINFER_ASSERT(p.n_tokens >= 1 && p.n_out >= 1 && p.n_out <= p.n_tokens && p.n_ctx >= p.n_tokens);
  tokens_ = b_.input(kInpTokens, DType::I32, {p.n_tokens});
  pos_ = b_.input(kInpPos, DType::I32, {p.n_tokens});
  if (p.n_out < p.n_tokens) out_ids_ = b_.input(kInpOutIds, DType::I32, {p.n_out});
  if (p.multi_seq) {
    kv_rows_ = b_.input(kInpKvRows, DType::I32, {p.n_tokens});
    kv_ranges_ = b_.input(kInpKvRanges, DType::I32, {3, p.n_tokens});
  }
  if (m.weights().rope_freqs) rope_freqs_ = weight(m.weights().rope_freqs);
}

int LlmBuilder::weight(const GgufTensor* t) {
  MINFER_ASSERT(t != nullptr);
  auto it = weights_.find(t->name);
  if (it != weights_.end()) return it->second;
  Shape ne{1, 1, 1, 1};
  for (size_t i = 0; i < t->shape.size() && i < 4; ++i) ne[i] = t->shape[i];
  const int id = b_.weight(t->name, t->type, ne, t->data);
  weights_.emplace(t->name, id);
  return id;
}

int LlmBuilder::norm(const std::string& name, int x, const GgufTensor* w, float eps) {
  const int n = b_.rms_norm(name + ".rms", x, eps);
  return b_.mul(name, n, weight(w));
}

int LlmBuilder::linear(const std::string& name, int x, const GgufTensor* w, const GgufTensor* bias) {
  int y = b_.matmul(name, weight(w), x);
  if (bias) y = b_.add(name + ".bias", y, weight(bias));
  return y;
}

int LlmBuilder::attention(int il, int x) {
  const LayerWeights& l = m_.weights().layers[static_cast<size_t>(il)];
  const std::string p = fmt::format("blk.{}.", il);
  const int64_t n_tokens = p_.n_tokens;
  const int64_t hd = hp_.head_dim_k;

  int q = linear(p + "attn_q", x, l.wq, l.bq);  // [n_head * hd, n_tokens]
  int k = linear(p + "attn_k", x, l.wk, l.bk);  // [n_head_kv * hd, n_tokens]
  int v = linear(p + "attn_v", x, l.wv, l.bv);  // [n_head_kv * hd_v, n_tokens]
  q = b_.reshape(p + "attn_q.heads", q, {hd, hp_.n_head, n_tokens});
  k = b_.reshape(p + "attn_k.heads", k, {hd, hp_.n_head_kv, n_tokens});
  if (l.q_norm) q = norm(p + "attn_q_norm", q, l.q_norm, hp_.rms_eps);  // per head, over hd
  if (l.k_norm) k = norm(p + "attn_k_norm", k, l.k_norm, hp_.rms_eps);
  const int n_rot = static_cast<int>(hp_.n_rot);
  q = b_.rope(p + "attn_q.rope", q, pos_, hp_.rope_mode, n_rot, hp_.rope_freq_base, hp_.rope_freq_scale, rope_freqs_);
  k = b_.rope(p + "attn_k.rope", k, pos_, hp_.rope_mode, n_rot, hp_.rope_freq_base, hp_.rope_freq_scale, rope_freqs_);

  const int k_cache = b_.kv_cache(p + "cache_k", il, false, p_.kv_type, hp_.n_embd_k(), p_.n_ctx);
  const int v_cache = b_.kv_cache(p + "cache_v", il, true, p_.kv_type, hp_.n_embd_v(), p_.n_ctx);
  const int rows = p_.multi_seq ? kv_rows_ : pos_;
  const int k_stored = b_.kv_store(p + "cache_k.store", k_cache, k, rows);
  const int v_stored = b_.kv_store(p + "cache_v.store", v_cache, v, rows);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  if (p_.multi_seq)
    return b_.attn_ranges(p + "attn", q, k_stored, v_stored, kv_ranges_, static_cast<int>(hp_.n_head_kv), scale);
  return b_.attn(p + "attn", q, k_stored, v_stored, pos_, static_cast<int>(hp_.n_head_kv), scale);
}

int LlmBuilder::ffn_swiglu(int il, int x) {
  const LayerWeights& l = m_.weights().layers[static_cast<size_t>(il)];
  const std::string p = fmt::format("blk.{}.", il);
  const int gate = linear(p + "ffn_gate", x, l.ffn_gate, nullptr);  // [n_ff, rows]
  const int up = linear(p + "ffn_up", x, l.ffn_up, nullptr);
  const int act = b_.mul(p + "ffn_swiglu", b_.silu(p + "ffn_gate.silu", gate), up);
  return linear(p + "ffn_down", act, l.ffn_down, nullptr);  // [n_embd, rows]
}

Graph LlmBuilder::decoder() {
  const ModelWeights& w = m_.weights();
  int x = b_.get_rows("inp_embd", weight(w.tok_embd), tokens_);  // [n_embd, n_tokens]
  for (int il = 0; il < hp_.n_layer; ++il) {
    const LayerWeights& l = w.layers[static_cast<size_t>(il)];
    const std::string p = fmt::format("blk.{}.", il);
    int a = attention(il, norm(p + "attn_norm", x, l.attn_norm, hp_.rms_eps));
    // Tail reduction: after the last layer's attention only the n_out output rows matter, so
    // its attention output and residual are gathered down to them before attn_output.
    if (il == hp_.n_layer - 1 && out_ids_ >= 0) {
      a = b_.get_rows(p + "attn.tail", a, out_ids_);
      x = b_.get_rows(p + "inp.tail", x, out_ids_);
    }
    const int ffn_inp = b_.add(p + "ffn_inp", linear(p + "attn_output", a, l.wo, nullptr), x);
    x = b_.add(p + "l_out", ffn_swiglu(il, norm(p + "ffn_norm", ffn_inp, l.ffn_norm, hp_.rms_eps)), ffn_inp);
  }
  const int h = norm("output_norm", x, w.output_norm, hp_.rms_eps);
  const int logits = linear(kOutLogits, h, w.output, w.output_bias);  // [n_vocab, n_out]
  return b_.finish({logits});
}

Graph build_decoder_kv_move(const Model& m, const KvMoveParams& p) {
  MINFER_ASSERT(p.n_rows >= 1 && p.n_rows <= p.n_ctx);
  const ModelHparams& hp = m.hparams();
  GraphBuilder b;
  const int src = b.input(kInpKvSrc, DType::I32, {p.n_rows});
  const int dst = b.input(kInpKvDst, DType::I32, {p.n_rows});
  const int shift = p.rotate ? b.input(kInpKvShift, DType::I32, {p.n_rows}) : -1;
  int freqs = -1;
  if (p.rotate && m.weights().rope_freqs) {
    const GgufTensor* t = m.weights().rope_freqs;
    freqs = b.weight(t->name, t->type, {t->shape.empty() ? 1 : t->shape[0]}, t->data);
  }
  std::vector<int> outs;
  for (int64_t il = 0; il < hp.n_layer; ++il) {
    const std::string pre = fmt::format("blk.{}.", il);
    const int li = static_cast<int>(il);
    const int kc = b.kv_cache(pre + "cache_k", li, false, p.kv_type, hp.n_embd_k(), p.n_ctx);
    const int vc = b.kv_cache(pre + "cache_v", li, true, p.kv_type, hp.n_embd_v(), p.n_ctx);
    int k = b.get_rows(pre + "cache_k.rows", kc, src);  // [n_embd_k, n_rows] f32
    if (p.rotate) {
      k = b.reshape(pre + "cache_k.heads", k, {hp.head_dim_k, hp.n_head_kv, p.n_rows});
      k = b.rope(pre + "cache_k.shift", k, shift, hp.rope_mode, static_cast<int>(hp.n_rot), hp.rope_freq_base,
                 hp.rope_freq_scale, freqs);
    }
    const int v = b.get_rows(pre + "cache_v.rows", vc, src);  // [n_embd_v, n_rows] f32
    outs.push_back(b.kv_store(pre + "cache_k.store", kc, k, dst));
    outs.push_back(b.kv_store(pre + "cache_v.store", vc, v, dst));
  }
  return b.finish(outs);
}

}  // namespace minfer
