// Models and sessions on tiny random GGUF files written here: load-time validation errors,
// and the invariants of the runtime: the KV cache across decode calls equals one batch, batch
// chunking (-b), tail reduction (n_out), truncation, fused == unfused, graph reuse.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>

#include "graph/scheduler.h"
#include "models/model.h"
#include "runtime/session.h"
#include "tiny-model.h"

namespace minfer {
namespace {

using test::Tiny;
using test::load;
using test::write_tiny;

std::string load_error(const Tiny& t, const std::string& tag) {
  const std::string path = write_tiny(t, tag);
  auto m = Model::load(path);
  std::filesystem::remove(path);
  return m ? std::string("(loaded)") : m.error().message;
}

TEST(ModelLoad, HyperparametersOfEachArchitecture) {
  Tiny q3;
  q3.arch = "qwen3";
  q3.head_dim = 32;  // decoupled: n_head * head_dim = 128 != n_embd 64
  q3.tied = true;
  auto m = load(q3, "hp-qwen3");
  ASSERT_TRUE(m);
  const ModelHparams& hp = m->hparams();
  EXPECT_EQ(hp.head_dim_k, 32);
  EXPECT_EQ(hp.n_embd_q(), 128);
  EXPECT_EQ(hp.n_embd_k(), 64);
  EXPECT_EQ(hp.rope_mode, RopeMode::kNeox);
  EXPECT_TRUE(hp.tied_output);
  EXPECT_EQ(hp.n_vocab, 96);
  Tiny ll;
  auto l = load(ll, "hp-llama");
  ASSERT_TRUE(l);
  EXPECT_EQ(l->hparams().rope_mode, RopeMode::kNorm);
  EXPECT_FALSE(l->hparams().tied_output);
}

TEST(ModelLoad, ErrorsNameTheProblem) {
  Tiny t;
  t.arch = "gpt2";
  EXPECT_NE(load_error(t, "e-arch").find("unsupported architecture 'gpt2'"), std::string::npos);
  Tiny missing;
  missing.drop = "blk.1.ffn_up.weight";
  EXPECT_NE(load_error(missing, "e-miss").find("'blk.1.ffn_up.weight' is missing"), std::string::npos);
  Tiny shape;
  shape.reshape = "blk.0.attn_k.weight";
  const std::string e = load_error(shape, "e-shape");
  EXPECT_NE(e.find("'blk.0.attn_k.weight' has shape [96, 32], expected [64, 32]"), std::string::npos) << e;
  Tiny q2;
  q2.arch = "qwen2";
  q2.drop = "blk.0.attn_v.bias";
  EXPECT_NE(load_error(q2, "e-bias").find("attn_v.bias"), std::string::npos);
  Tiny q3;
  q3.arch = "qwen3";
  q3.head_dim = 32;
  q3.drop_key_length = true;
  const std::string keylen = load_error(q3, "e-keylen");
  EXPECT_NE(keylen.find("key_length"), std::string::npos) << keylen;
}

std::vector<int32_t> some_tokens(int n, int n_vocab) {
  std::vector<int32_t> v;
  for (int i = 0; i < n; ++i) v.push_back((7 + 37 * i) % n_vocab);
  return v;
}

std::unique_ptr<Session> session(std::shared_ptr<const Model> m, SessionParams p) {
  auto s = Session::create(std::move(m), p);
  EXPECT_TRUE(s) << (s ? "" : s.error().message);
  return s ? std::move(*s) : nullptr;
}

std::vector<float> all_logits(Session& s, const std::vector<int32_t>& toks) {
  auto l = s.decode(toks, static_cast<int>(toks.size()));
  EXPECT_TRUE(l) << (l ? "" : l.error().message);
  return l ? std::vector<float>(l->begin(), l->end()) : std::vector<float>{};
}

double max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double d = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) d = std::max(d, double(std::fabs(a[i] - b[i])));
  return d;
}

class SessionInvariants : public ::testing::TestWithParam<std::string> {};

TEST_P(SessionInvariants, KvCacheChunkingTailTruncateFusion) {
  Tiny t = test::tiny_for(GetParam());
  auto m = load(t, "inv-" + GetParam());
  ASSERT_TRUE(m);
  const int n = 9;
  const std::vector<int32_t> toks = some_tokens(n, 96);
  const size_t V = 96;
  SessionParams p;
  p.n_ctx = 32;
  p.n_threads = 2;
  auto full_s = session(m, p);
  const std::vector<float> full = all_logits(*full_s, toks);  // one batch of 9
  ASSERT_EQ(full.size(), n * V);

  // Token by token through the KV cache: each step's logits equal the batch row.
  auto step = session(m, p);
  for (int i = 0; i < n; ++i) {
    auto l = step->decode({&toks[static_cast<size_t>(i)], 1});
    ASSERT_TRUE(l);
    const std::vector<float> row(full.begin() + i * V, full.begin() + (i + 1) * V);
    EXPECT_LT(max_diff(std::vector<float>(l->begin(), l->end()), row), 1e-4) << "position " << i;
  }
  EXPECT_EQ(step->n_past(), n);
  EXPECT_EQ(step->stats().n_graph_builds, 1);  // one decode graph, reused

  // Batches of 4 (-b 4): 4 + 4 + 1, sharing the cache.
  SessionParams pb = p;
  pb.n_batch = 4;
  auto chunked = session(m, pb);
  EXPECT_LT(max_diff(all_logits(*chunked, toks), full), 1e-4);

  // Tail reduction: the last 2 rows only.
  auto tail = session(m, p);
  auto l2 = tail->decode(toks, 2);
  ASSERT_TRUE(l2);
  EXPECT_LT(max_diff(std::vector<float>(l2->begin(), l2->end()), std::vector<float>(full.end() - 2 * V, full.end())), 1e-4);

  // Truncate to 4 and decode the rest again: the same logits.
  ASSERT_TRUE(tail->truncate(4));
  EXPECT_FALSE(tail->truncate(5));
  const std::vector<int32_t> rest(toks.begin() + 4, toks.end());
  auto again = tail->decode(rest, static_cast<int>(rest.size()));
  ASSERT_TRUE(again);
  EXPECT_LT(max_diff(std::vector<float>(again->begin(), again->end()), std::vector<float>(full.begin() + 4 * V, full.end())), 1e-4);

  // Fusion changes no bit.
  SessionParams pu = p;
  pu.fuse = false;
  auto unfused = session(m, pu);
  const std::vector<float> u = all_logits(*unfused, toks);
  EXPECT_EQ(std::memcmp(u.data(), full.data(), full.size() * 4), 0);
  auto pg = full_s->graph(n, n);
  ASSERT_TRUE(pg);
  // per layer: attn and ffn norms (+ the post-norms of Gemma, + q/k norms), the gated FFN (and,
  // dense SwiGLU only, not Gemma's GeGLU nor the experts' matmul_id, its gate and up matmuls:
  // matmul_swiglu); output norm
  const bool gelu = t.arch.starts_with("gemma");
  const bool moe = t.n_expert > 0;
  const int per_layer = 2 + (gelu ? 2 : 0) + (t.head_dim ? 2 : 0) + 1 + (gelu || moe ? 0 : 1);
  EXPECT_EQ((*pg)->n_fused, 2 * per_layer + 1);

  // KV cache in f32 stays close to the f16 one.
  SessionParams p32 = p;
  p32.kv_type = DType::F32;
  auto s32 = session(m, p32);
  EXPECT_LT(max_diff(all_logits(*s32, toks), full), 5e-2);
}

INSTANTIATE_TEST_SUITE_P(Archs, SessionInvariants,
                         ::testing::Values("llama", "qwen2", "qwen3", "gemma2", "gemma3", "phi3", "qwen3moe", "mixtral"));

TEST(Session, RejectsBadInput) {
  Tiny t;
  t.type = DType::Q8_0;
  auto m = load(t, "bad-input");
  ASSERT_TRUE(m);
  SessionParams p;
  p.n_ctx = 8;
  p.n_threads = 1;
  auto s = session(m, p);
  const int32_t bad = 96;
  auto r = s->decode({&bad, 1});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("token 96"), std::string::npos);
  const std::vector<int32_t> nine = some_tokens(9, 96);
  r = s->decode(nine);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("context full"), std::string::npos);
  EXPECT_EQ(s->n_past(), 0);
  EXPECT_FALSE(s->decode(nine, 0));
  ASSERT_TRUE(s->decode(some_tokens(8, 96)));
  EXPECT_EQ(s->n_past(), 8);
  s->clear();
  EXPECT_EQ(s->n_past(), 0);
  SessionParams bad_kv = p;
  bad_kv.kv_type = DType::Q8_0;  // the tiny model's heads of 16 are not whole q8_0 blocks
  auto refused = Session::create(m, bad_kv);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("a q8_0 KV cache needs head sizes that are multiples of 32; this model's are 16"),
            std::string::npos) << refused.error().message;
  bad_kv.kv_type = DType::Q5_1;
  refused = Session::create(m, bad_kv);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("KV cache type Q5_1 is not supported (f16, f32, q8_0, q4_0)"), std::string::npos)
      << refused.error().message;
}

}  // namespace
}  // namespace minfer
