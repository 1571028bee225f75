// The building blocks of the decoder forward passes (arch.h). Each block writes the same
// nodes, with the same names, whichever architecture calls it; an architecture file composes
// them in its own order.
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
    if (p.swa_ring > 0) {
      MINFER_ASSERT(hp_.n_swa > 0 && p.swa_ring >= hp_.n_swa && p.n_ctx_swa >= p.swa_ring);
      kv_rows_swa_ = b_.input(kInpKvRowsSwa, DType::I32, {p.n_tokens});
      kv_ranges_swa_ = b_.input(kInpKvRangesSwa, DType::I32, {3, p.n_tokens});
    }
  }
  if (m.weights().rope_freqs) rope_freqs_ = weight(m.weights().rope_freqs);
}

std::string LlmBuilder::prefix(int il) const { return il < 0 ? "" : fmt::format("blk.{}.", il); }

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

int LlmBuilder::embed() {
  const int x = b_.get_rows("inp_embd", weight(m_.weights().tok_embd), tokens_);  // [n_embd, n_tokens]
  return hp_.embd_scale > 0.0f ? b_.scale("inp_scaled", x, hp_.embd_scale) : x;
}

int LlmBuilder::norm(int il, const std::string& name, int x, const GgufTensor* w) {
  const std::string n = prefix(il) + name;
  return b_.mul(n, b_.rms_norm(n + ".rms", x, hp_.rms_eps), weight(w));
}

int LlmBuilder::linear(const std::string& name, int x, const GgufTensor* w, const GgufTensor* bias) {
  int y = b_.matmul(name, weight(w), x);
  if (bias) y = b_.add(name + ".bias", y, weight(bias));
  return y;
}

KvRotation kv_rotation(const ModelHparams& hp, DType kv_type) {
  KvRotation r;
  if (dtype_info(kv_type).block_elems == 1) return r;
  if (hp.head_dim_k % 64 == 0) {
    r.k = 64;
    while (hp.head_dim_k % (2 * r.k) == 0) r.k *= 2;
  }
  if (hp.head_dim_v % 64 == 0) r.v = 64;
  return r;
}

int LlmBuilder::attention(int il, int x, AttnBlock opts) {
  const LayerWeights& l = layer(il);
  const std::string p = prefix(il);
  const int64_t n_tokens = p_.n_tokens;
  const int64_t hd = hp_.head_dim_k;

  // The three projections, then their biases: consecutive matmuls of x run as one job on the
  // CPU backend (decode: op_matmuls_joint), so the biases do not sit between them.
  int q = b_.matmul(p + "attn_q", weight(l.wq), x);  // [n_head * hd, n_tokens]
  int k = b_.matmul(p + "attn_k", weight(l.wk), x);  // [n_head_kv * hd, n_tokens]
  int v = b_.matmul(p + "attn_v", weight(l.wv), x);  // [n_head_kv * hd_v, n_tokens]
  if (l.bq) q = b_.add(p + "attn_q.bias", q, weight(l.bq));
  if (l.bk) k = b_.add(p + "attn_k.bias", k, weight(l.bk));
  if (l.bv) v = b_.add(p + "attn_v.bias", v, weight(l.bv));
  q = b_.reshape(p + "attn_q.heads", q, {hd, hp_.n_head, n_tokens});
  k = b_.reshape(p + "attn_k.heads", k, {hd, hp_.n_head_kv, n_tokens});
  if (l.q_norm) q = norm(il, "attn_q_norm", q, l.q_norm);  // per head, over hd
  if (l.k_norm) k = norm(il, "attn_k_norm", k, l.k_norm);
  const int n_rot = static_cast<int>(hp_.n_rot);
  const float base = hp_.rope_base(il), fscale = hp_.rope_scale(il);
  q = b_.rope(p + "attn_q.rope", q, pos_, hp_.rope_mode, n_rot, base, fscale, rope_freqs_);
  k = b_.rope(p + "attn_k.rope", k, pos_, hp_.rope_mode, n_rot, base, fscale, rope_freqs_);

  GraphBuilder::AttnOpts o;
  o.scale = 1.0f / std::sqrt(static_cast<float>(hd));
  if (opts.scale_q) {
    q = b_.scale(p + "attn_q.scaled", q, hp_.attn_scale > 0.0f ? hp_.attn_scale : o.scale);
    o.scale = 1.0f;
  }
  o.window = hp_.is_swa(il) ? static_cast<int32_t>(hp_.n_swa) : 0;
  o.softcap = hp_.attn_softcap;

  // A sliding-window layer's cache is a ring of the window and a batch when the context asks.
  const bool ring = o.window > 0 && kv_rows_swa_ >= 0;
  if (ring) o.ring = static_cast<int32_t>(p_.swa_ring);
  const int64_t cache_rows = ring ? p_.n_ctx_swa : p_.n_ctx;
  const int k_cache = b_.kv_cache(p + "cache_k", il, false, p_.kv_type, hp_.n_embd_k(), cache_rows);
  const int v_cache = b_.kv_cache(p + "cache_v", il, true, p_.kv_type, hp_.n_embd_v(), cache_rows);
  const KvRotation rot = kv_rotation(hp_, p_.kv_type);
  if (rot.k > 0) {
    q = b_.hadamard(p + "attn_q.rot", q, rot.k);
    k = b_.hadamard(p + "attn_k.rot", k, rot.k);
  }
  if (rot.v > 0) v = b_.hadamard(p + "attn_v.rot", v, rot.v);
  const int rows = ring ? kv_rows_swa_ : p_.multi_seq ? kv_rows_ : pos_;
  const int k_stored = b_.kv_store(p + "cache_k.store", k_cache, k, rows);
  const int v_stored = b_.kv_store(p + "cache_v.store", v_cache, v, rows);
  const int n_kv = static_cast<int>(hp_.n_head_kv);
  const int out = p_.multi_seq ? b_.attn_ranges(p + "attn", q, k_stored, v_stored, ring ? kv_ranges_swa_ : kv_ranges_, n_kv, o)
                               : b_.attn(p + "attn", q, k_stored, v_stored, pos_, n_kv, o);
  return rot.v > 0 ? b_.hadamard(p + "attn.unrot", out, rot.v) : out;  // [n_head * hd_v, n_tokens]
}

void LlmBuilder::tail(int il, int& attn, int& inp) {
  if (il != hp_.n_layer - 1 || out_ids_ < 0) return;
  attn = b_.get_rows(prefix(il) + "attn.tail", attn, out_ids_);
  inp = b_.get_rows(prefix(il) + "inp.tail", inp, out_ids_);
}

int LlmBuilder::ffn_swiglu(int il, int x) {
  const LayerWeights& l = layer(il);
  const std::string p = prefix(il);
  const int gate = linear(p + "ffn_gate", x, l.ffn_gate, nullptr);  // [n_ff, rows]
  const int up = linear(p + "ffn_up", x, l.ffn_up, nullptr);
  const int act = b_.mul(p + "ffn_swiglu", b_.silu(p + "ffn_gate.silu", gate), up);
  return linear(p + "ffn_down", act, l.ffn_down, nullptr);  // [n_embd, rows]
}

int LlmBuilder::ffn_geglu(int il, int x) {
  const LayerWeights& l = layer(il);
  const std::string p = prefix(il);
  const int gate = linear(p + "ffn_gate", x, l.ffn_gate, nullptr);  // [n_ff, rows]
  const int up = linear(p + "ffn_up", x, l.ffn_up, nullptr);
  const int act = b_.mul(p + "ffn_geglu", b_.gelu(p + "ffn_gate.gelu", gate), up);
  return linear(p + "ffn_down", act, l.ffn_down, nullptr);  // [n_embd, rows]
}

int LlmBuilder::ffn_moe(int il, int x) {
  const LayerWeights& l = layer(il);
  const std::string p = prefix(il);
  const int64_t rows = b_.node(x).ne[1];
  const int k = static_cast<int>(hp_.n_expert_used);
  const int logits = linear(p + "ffn_gate_inp", x, l.ffn_gate_inp, nullptr);     // [n_expert, rows]
  const int ids = b_.top_k(p + "ffn_moe_topk", logits, k);                        // I32 [k, rows]
  const int weights = b_.moe_weights(p + "ffn_moe_weights", logits, ids, true);  // [k, rows]
  const int xr = b_.reshape(p + "ffn_moe_inp", x, {hp_.n_embd, 1, rows});
  const int gate = b_.matmul_id(p + "ffn_moe_gate", weight(l.ffn_gate_exps), xr, ids);  // [n_ff_exp, k, rows]
  const int up = b_.matmul_id(p + "ffn_moe_up", weight(l.ffn_up_exps), xr, ids);
  const int act = b_.mul(p + "ffn_moe_swiglu", b_.silu(p + "ffn_moe_gate.silu", gate), up);
  const int down = b_.matmul_id(p + "ffn_moe_down", weight(l.ffn_down_exps), act, ids);  // [n_embd, k, rows]
  return b_.moe_sum(p + "ffn_moe_out", down, weights);                                   // [n_embd, rows]
}

Graph LlmBuilder::logits(int x) {
  const ModelWeights& w = m_.weights();
  const int h = norm(-1, p_.embeddings ? kOutEmbd : "output_norm", x, w.output_norm);
  if (p_.embeddings) return b_.finish({h});  // [n_embd, n_out]
  int y = linear(hp_.final_softcap > 0.0f ? "result_output.raw" : kOutLogits, h, w.output, w.output_bias);
  if (hp_.final_softcap > 0.0f) y = b_.softcap(kOutLogits, y, hp_.final_softcap);
  return b_.finish({y});  // [n_vocab, n_out]
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
    if ((p.layers == KvLayers::kFull && hp.is_swa(il)) || (p.layers == KvLayers::kSwa && !hp.is_swa(il))) continue;
    const std::string pre = fmt::format("blk.{}.", il);
    const int li = static_cast<int>(il);
    const int kc = b.kv_cache(pre + "cache_k", li, false, p.kv_type, hp.n_embd_k(), p.n_ctx);
    const int vc = b.kv_cache(pre + "cache_v", li, true, p.kv_type, hp.n_embd_v(), p.n_ctx);
    int k = b.get_rows(pre + "cache_k.rows", kc, src);  // [n_embd_k, n_rows] f32
    if (p.rotate) {  // a rotated cache's keys: back from the rotation, RoPE'd, rotated again
      const int rot = kv_rotation(hp, p.kv_type).k;
      if (rot > 0) k = b.hadamard(pre + "cache_k.unrot", k, rot);
      k = b.reshape(pre + "cache_k.heads", k, {hp.head_dim_k, hp.n_head_kv, p.n_rows});
      k = b.rope(pre + "cache_k.shift", k, shift, hp.rope_mode, static_cast<int>(hp.n_rot), hp.rope_base(il),
                 hp.rope_scale(il), freqs);
      if (rot > 0) k = b.hadamard(pre + "cache_k.rot", k, rot);
    }
    const int v = b.get_rows(pre + "cache_v.rows", vc, src);  // [n_embd_v, n_rows] f32
    outs.push_back(b.kv_store(pre + "cache_k.store", kc, k, dst));
    outs.push_back(b.kv_store(pre + "cache_v.store", vc, v, dst));
  }
  return b.finish(outs);
}

}  // namespace minfer
