// Tiny random GGUF models written on the fly for the model, session and chat tests: any of the
// architectures (llama, qwen2, qwen3, gemma2, gemma3, phi3, qwen3moe; llama with experts when
// n_expert is set), any weight type, optionally with a
// tensor left out or misshapen. The Gemma ones have a sliding window of 4 on layer 0 (so short
// tests cross it) and soft-caps small enough to bite (gemma2); phi3 has fused QKV and gate|up.
//
//   Tiny t; t.arch = "qwen3"; t.head_dim = 32;
//   auto model = load(t, "my-test");   // written to a per-process temp file, loaded, removed
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gguf/writer.h"
#include "models/model.h"
#include "quant/quant.h"

namespace minfer::test {

struct Tiny {
  std::string arch = "llama";
  int64_t n_vocab = 96, n_embd = 64, n_layer = 2, n_head = 4, n_head_kv = 2, n_ff = 96, head_dim = 0;
  bool tied = false;
  DType type = DType::F32;
  std::string drop;                   // a tensor to leave out
  std::string reshape;                // a tensor to write with a wrong shape
  bool drop_key_length = false;
  int64_t n_expert = 0, n_expert_used = 0;  // llama / qwen3moe: a mixture-of-experts FFN (width n_ff)
};

inline std::string write_tiny(const Tiny& t, const std::string& tag) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("minfer-test-models-" + std::to_string(::getpid()) + "-" + tag + ".gguf")).string();
  const int64_t hd = t.head_dim ? t.head_dim : t.n_embd / t.n_head;
  GgufWriter w;
  const std::string a = t.arch;
  w.add_string("general.architecture", a);
  w.add_u32(a + ".embedding_length", static_cast<uint32_t>(t.n_embd));
  w.add_u32(a + ".block_count", static_cast<uint32_t>(t.n_layer));
  w.add_u32(a + ".attention.head_count", static_cast<uint32_t>(t.n_head));
  w.add_u32(a + ".attention.head_count_kv", static_cast<uint32_t>(t.n_head_kv));
  w.add_u32(a + ".feed_forward_length", static_cast<uint32_t>(t.n_ff));
  w.add_u32(a + ".context_length", 256);
  w.add_f32(a + ".attention.layer_norm_rms_epsilon", 1e-5f);
  const bool gemma = a == "gemma2" || a == "gemma3";
  if (gemma) {
    w.add_u32(a + ".attention.sliding_window", 4);
    w.add_u32(a + ".attention.sliding_window_pattern", 2);
  }
  if (a == "gemma3") w.add_f32(a + ".rope.freq_base_swa", 100.0f);
  if (t.n_expert) {
    w.add_u32(a + ".expert_count", static_cast<uint32_t>(t.n_expert));
    w.add_u32(a + ".expert_used_count", static_cast<uint32_t>(t.n_expert_used));
    if (a == "qwen3moe") w.add_u32(a + ".expert_feed_forward_length", static_cast<uint32_t>(t.n_ff));
  }
  if (a == "gemma2") {
    w.add_f32(a + ".attn_logit_softcapping", 1.5f);
    w.add_f32(a + ".final_logit_softcapping", 3.0f);
  }
  if (t.head_dim && !t.drop_key_length) {
    w.add_u32(a + ".attention.key_length", static_cast<uint32_t>(hd));
    w.add_u32(a + ".attention.value_length", static_cast<uint32_t>(hd));
  }
  std::vector<std::string> toks;
  for (int64_t i = 0; i < t.n_vocab; ++i) toks.push_back(std::string(1, 't').append(std::to_string(i)));  // (not "t" + ...: GCC 12 -Wrestrict false positive)
  w.add("tokenizer.ggml.tokens", GgufValue::make_string_array(toks));

  std::mt19937 rng(42);
  auto tensor = [&](const std::string& name, std::vector<int64_t> shape, double mean, double sd, bool matrix) {
    if (name == t.drop) return;
    if (name == t.reshape) shape[0] += matrix ? 32 : 1;
    std::normal_distribution<float> nd(static_cast<float>(mean), static_cast<float>(sd));
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = nd(rng);
    const DType type = matrix ? t.type : DType::F32;
    std::vector<uint8_t> bytes(row_bytes(type, shape[0]) * static_cast<size_t>(n / shape[0]));
    for (int64_t r = 0; r < n / shape[0]; ++r)
      quantize_row(type, v.data() + r * shape[0], bytes.data() + r * row_bytes(type, shape[0]), shape[0]);
    w.add_tensor(name, type, shape, std::move(bytes));
  };
  const int64_t e = t.n_embd, q = t.n_head * hd, kv = t.n_head_kv * hd;
  tensor("token_embd.weight", {e, t.n_vocab}, 0, 1, true);
  for (int64_t il = 0; il < t.n_layer; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    tensor(p + "attn_norm.weight", {e}, 1, 0.1, false);
    if (a == "phi3") {
      tensor(p + "attn_qkv.weight", {e, q + 2 * kv}, 0, 1 / std::sqrt(double(e)), true);
    } else {
      tensor(p + "attn_q.weight", {e, q}, 0, 1 / std::sqrt(double(e)), true);
      tensor(p + "attn_k.weight", {e, kv}, 0, 1 / std::sqrt(double(e)), true);
      tensor(p + "attn_v.weight", {e, kv}, 0, 1 / std::sqrt(double(e)), true);
    }
    if (a == "qwen2") {
      tensor(p + "attn_q.bias", {q}, 0, 0.1, false);
      tensor(p + "attn_k.bias", {kv}, 0, 0.1, false);
      tensor(p + "attn_v.bias", {kv}, 0, 0.1, false);
    }
    if (a == "qwen3" || a == "gemma3" || a == "qwen3moe") {
      tensor(p + "attn_q_norm.weight", {hd}, 1, 0.1, false);
      tensor(p + "attn_k_norm.weight", {hd}, 1, 0.1, false);
    }
    tensor(p + "attn_output.weight", {q, e}, 0, 1 / std::sqrt(double(q)), true);
    if (gemma) tensor(p + "post_attention_norm.weight", {e}, 1, 0.1, false);
    tensor(p + "ffn_norm.weight", {e}, 1, 0.1, false);
    if (a == "phi3") {
      tensor(p + "ffn_up.weight", {e, 2 * t.n_ff}, 0, 1 / std::sqrt(double(e)), true);
    } else if (t.n_expert) {
      tensor(p + "ffn_gate_inp.weight", {e, t.n_expert}, 0, 1 / std::sqrt(double(e)), false);
      tensor(p + "ffn_gate_exps.weight", {e, t.n_ff, t.n_expert}, 0, 1 / std::sqrt(double(e)), true);
      tensor(p + "ffn_up_exps.weight", {e, t.n_ff, t.n_expert}, 0, 1 / std::sqrt(double(e)), true);
      tensor(p + "ffn_down_exps.weight", {t.n_ff, e, t.n_expert}, 0, 1 / std::sqrt(double(t.n_ff)), true);
    } else {
      tensor(p + "ffn_gate.weight", {e, t.n_ff}, 0, 1 / std::sqrt(double(e)), true);
      tensor(p + "ffn_up.weight", {e, t.n_ff}, 0, 1 / std::sqrt(double(e)), true);
    }
    if (!t.n_expert) tensor(p + "ffn_down.weight", {t.n_ff, e}, 0, 1 / std::sqrt(double(t.n_ff)), true);
    if (gemma) tensor(p + "post_ffw_norm.weight", {e}, 1, 0.1, false);
  }
  tensor("output_norm.weight", {e}, 1, 0.1, false);
  if (!t.tied) tensor("output.weight", {e, t.n_vocab}, 0, 2 / std::sqrt(double(e)), true);
  const Status s = w.write(path);
  EXPECT_TRUE(s) << (s ? "" : s.error().message);
  return path;
}

// The test model of a family by name: an architecture, or "mixtral" (llama with 4 experts, 2
// used); qwen3-style families get a decoupled head dim, qwen2 and Gemma a tied output.
inline Tiny tiny_for(const std::string& family) {
  Tiny t;
  t.arch = family == "mixtral" ? "llama" : family;
  if (family == "qwen3" || family == "gemma3" || family == "qwen3moe") t.head_dim = 32;
  t.tied = family == "qwen2" || family.starts_with("gemma");
  if (family == "mixtral" || family == "qwen3moe") {
    t.n_expert = 4;
    t.n_expert_used = 2;
  }
  return t;
}

// The file is removed once loaded (the model keeps its mapping).
inline std::shared_ptr<const Model> load(const Tiny& t, const std::string& tag) {
  const std::string path = write_tiny(t, tag);
  auto m = Model::load(path);
  std::filesystem::remove(path);
  EXPECT_TRUE(m) << (m ? "" : m.error().message);
  return m ? *m : nullptr;
}

}  // namespace minfer::test
