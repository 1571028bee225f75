// runtime::Context on tiny random models: several sequences in one batch decode exactly as each
// alone; the batch-invariant arithmetic does not depend on how a prompt is split; seq_cp,
// seq_rollback and seq_rm (K re-rotated by a graph on the backend) against recomputation and
// against a host rotation written here from the RoPE formula; bad batches change nothing.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "core/fp16.h"
#include "models/model.h"
#include "runtime/context.h"
#include "runtime/session.h"
#include "tiny-model.h"

namespace minfer {
namespace {

using test::Tiny;

std::vector<int32_t> tokens(int n, int salt) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<size_t>(i)] = (i * 37 + salt * 11 + 5) % 96;
  return v;
}

std::unique_ptr<Context> make(std::shared_ptr<const Model> m, int n_seq, AttnArith arith, int n_ctx = 128) {
  auto c = Context::create(std::move(m), {.n_seq = n_seq, .n_ctx_seq = n_ctx, .n_batch = 256, .n_threads = 2,
                                          .attn = arith});
  EXPECT_TRUE(c) << (c ? "" : c.error().message);
  return c ? std::move(*c) : nullptr;
}

// Decodes toks[from, to) on sequence s in chunks of `chunk`, every row's logits appended to out.
void feed(Context& c, int s, const std::vector<int32_t>& toks, int from, int to, int chunk, std::vector<float>& out) {
  for (int i = from; i < to; i += chunk) {
    Batch b;
    for (int j = i; j < std::min(to, i + chunk); ++j) b.add(toks[static_cast<size_t>(j)], j, s, true);
    auto r = c.decode(b);
    ASSERT_TRUE(r) << r.error().message;
    out.insert(out.end(), r->begin(), r->end());
  }
}

class ContextArch : public ::testing::TestWithParam<const char*> {
 protected:
  // A tiny random model of the parameter's architecture with weights of `type`.
  std::shared_ptr<const Model> model(DType type, const char* tag) {
    Tiny t = test::tiny_for(GetParam());
    t.type = type;
    return test::load(t, tag);
  }
};

TEST_P(ContextArch, SequencesInOneBatchDecodeAsAlone) {
  auto m = model(DType::Q8_0, "ctx-batch");
  ASSERT_TRUE(m);
  // Three sequences; step k gives each its next chunk of 5 tokens, all in one batch.
  auto joint = make(m, 3, AttnArith::kByBatch);
  std::vector<std::vector<int32_t>> toks = {tokens(20, 1), tokens(20, 2), tokens(20, 3)};
  std::vector<std::vector<float>> got(3);
  const size_t V = 96;
  for (int k = 0; k < 4; ++k) {
    Batch b;
    for (int s = 0; s < 3; ++s)
      for (int j = 5 * k; j < 5 * k + 5; ++j) b.add(toks[static_cast<size_t>(s)][static_cast<size_t>(j)], j, s, true);
    auto r = joint->decode(b);
    ASSERT_TRUE(r) << r.error().message;
    for (int s = 0; s < 3; ++s)
      got[static_cast<size_t>(s)].insert(got[static_cast<size_t>(s)].end(), r->begin() + static_cast<long>(s * 5 * V),
                                         r->begin() + static_cast<long>((s + 1) * 5 * V));
  }
  for (int s = 0; s < 3; ++s) {
    auto alone = make(m, 1, AttnArith::kByBatch);
    std::vector<float> want;
    feed(*alone, 0, toks[static_cast<size_t>(s)], 0, 20, 5, want);
    ASSERT_EQ(want.size(), got[static_cast<size_t>(s)].size());
    EXPECT_EQ(std::memcmp(want.data(), got[static_cast<size_t>(s)].data(), want.size() * 4), 0) << "sequence " << s;
    EXPECT_EQ(joint->seq_len(s), 20);
  }
}

TEST_P(ContextArch, InvariantArithmeticIgnoresChunking) {
  auto m = model(DType::F32, "ctx-invariant");
  ASSERT_TRUE(m);
  const std::vector<int32_t> toks = tokens(90, 7);  // above the CPU's 64-row wide threshold
  std::vector<float> one, many;
  auto a = make(m, 1, AttnArith::kInvariant);
  feed(*a, 0, toks, 0, 90, 90, one);
  auto b = make(m, 2, AttnArith::kInvariant);
  feed(*b, 1, toks, 0, 90, 7, many);
  ASSERT_EQ(one.size(), many.size());
  EXPECT_EQ(std::memcmp(one.data(), many.data(), one.size() * 4), 0);
}

TEST_P(ContextArch, CopyAndRollbackMatchRecomputation) {
  auto m = model(DType::Q4_0, "ctx-cp");
  ASSERT_TRUE(m);
  auto c = make(m, 3, AttnArith::kInvariant);
  const std::vector<int32_t> toks = tokens(40, 4);
  std::vector<float> full;
  feed(*c, 0, toks, 0, 40, 40, full);
  const size_t V = 96;
  // Sequence 2 gets sequence 0's first 25 positions, then decodes the rest itself.
  ASSERT_TRUE(c->seq_cp(0, 2, 25));
  EXPECT_EQ(c->seq_len(2), 25);
  std::vector<float> rest;
  feed(*c, 2, toks, 25, 40, 6, rest);
  EXPECT_EQ(std::memcmp(rest.data(), full.data() + 25 * V, rest.size() * 4), 0);
  // Roll sequence 0 back by 3 and decode those 3 again.
  ASSERT_TRUE(c->seq_rollback(0, 3));
  EXPECT_EQ(c->seq_len(0), 37);
  std::vector<float> again;
  feed(*c, 0, toks, 37, 40, 3, again);
  EXPECT_EQ(std::memcmp(again.data(), full.data() + 37 * V, again.size() * 4), 0);
  // The copy left sequence 0 alone and exported rows agree.
  auto e0 = c->kv_export(0), e2 = c->kv_export(2);
  ASSERT_TRUE(e0 && e2);
  EXPECT_EQ(c->seq_len(2), 40);
  EXPECT_EQ(*e0, *e2);
}

INSTANTIATE_TEST_SUITE_P(Archs, ContextArch,
                         ::testing::Values("llama", "qwen2", "qwen3", "gemma2", "gemma3", "phi3", "qwen3moe", "mixtral"));

// Sliding-window layers keep a ring of n_swa + n_batch rows per sequence: the same logits, bit
// for bit, as whole caches through wrapping batches, a rollback, a copy, a context shift and an
// export/import; edits the ring cannot honour are refused, changing nothing.
TEST(Context, SlidingWindowRingsMatchWholeCaches) {
  Tiny t = test::tiny_for("gemma3");  // window 4 on every other layer
  t.type = DType::Q8_0;
  auto m = test::load(t, "ctx-ring");
  ASSERT_TRUE(m);
  auto mk = [&](bool full) {
    auto c = Context::create(m, {.n_seq = 3, .n_ctx_seq = 128, .n_batch = 8, .n_threads = 2, .swa_full = full});
    EXPECT_TRUE(c) << (c ? "" : c.error().message);
    return c ? std::move(*c) : nullptr;
  };
  auto ring = mk(false), whole = mk(true);
  ASSERT_TRUE(ring && whole);
  EXPECT_EQ(ring->swa_ring(), 4 + 8);
  EXPECT_EQ(whole->swa_ring(), 0);
  const std::vector<int32_t> toks = tokens(100, 9);
  auto both = [&](int s, int from, int to, int chunk) {
    std::vector<float> a, b;
    feed(*ring, s, toks, from, to, chunk, a);
    feed(*whole, s, toks, from, to, chunk, b);
    ASSERT_EQ(a.size(), b.size());
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0) << "sequence " << s << " positions " << from << ".." << to;
  };
  both(0, 0, 60, 5);  // wraps the 12-row ring five times
  EXPECT_LT(ring->kv_bytes(), whole->kv_bytes());
  // A rollback of the last batch, decoded again.
  ASSERT_TRUE(ring->seq_rollback(0, 5));
  ASSERT_TRUE(whole->seq_rollback(0, 5));
  both(0, 55, 60, 1);
  // The ring holds positions 48..59: a copy or a cut back to 58 keeps the window, to 20 cannot.
  EXPECT_TRUE(ring->can_keep(0, 58));
  EXPECT_FALSE(ring->can_keep(0, 20));
  EXPECT_TRUE(whole->can_keep(0, 20));
  EXPECT_TRUE(ring->can_keep(0, 0));
  EXPECT_FALSE(ring->seq_cp(0, 2, 20));
  EXPECT_FALSE(ring->seq_rm(0, 20, -1));
  EXPECT_FALSE(ring->seq_rollback(0, 40));
  EXPECT_EQ(ring->seq_len(0), 60);
  EXPECT_EQ(ring->seq_len(2), 0);
  ASSERT_TRUE(ring->seq_cp(0, 1, 58));
  ASSERT_TRUE(whole->seq_cp(0, 1, 58));
  both(1, 58, 70, 4);
  // A context shift: positions 10..29 go, 30..59 move down (keys re-rotated).
  ASSERT_TRUE(ring->seq_rm(0, 10, 30));
  ASSERT_TRUE(whole->seq_rm(0, 10, 30));
  std::vector<int32_t> shifted(toks.begin(), toks.begin() + 10);
  shifted.insert(shifted.end(), toks.begin() + 30, toks.begin() + 60);
  shifted.insert(shifted.end(), toks.begin() + 60, toks.begin() + 75);
  {
    std::vector<float> a, b;
    feed(*ring, 0, shifted, 40, 55, 3, a);
    feed(*whole, 0, shifted, 40, 55, 3, b);
    ASSERT_EQ(a.size(), b.size());
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0) << "after the shift";
  }
  // Export / import: the ring layers' part is their last n_swa - 1 positions.
  auto e = ring->kv_export(1);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->size(), ring->kv_export_bytes(70));
  EXPECT_LT(e->size(), whole->kv_export_bytes(70));
  auto fresh = mk(false);
  ASSERT_TRUE(fresh->kv_import(2, *e, 70));
  std::vector<float> a, b;
  feed(*fresh, 2, toks, 70, 80, 5, a);
  feed(*whole, 1, toks, 70, 80, 5, b);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0) << "after an import";
  EXPECT_FALSE(fresh->seq_rollback(2, 20));  // the import brought only the window
}

// seq_rm's K rotation against one written here: pair i of each head at angle
// -d * base^(-2i/n_rot) (built by repeated multiplication, in f32), NORM pairs (2i, 2i+1) for
// llama, NEOX pairs (i, i + n_rot/2) for qwen; V rows only move.
TEST(Context, RemoveShiftsAndRotatesKeys) {
  for (const char* arch : {"llama", "qwen2"}) {
    Tiny t;
    t.arch = arch;
    auto m = test::load(t, "ctx-rm");
    ASSERT_TRUE(m);
    const ModelHparams& hp = m->hparams();
    auto c = make(m, 2, AttnArith::kByBatch);
    std::vector<float> sink;
    feed(*c, 1, tokens(30, 9), 0, 30, 30, sink);
    auto before = c->kv_export(1);
    ASSERT_TRUE(before);
    const int p0 = 6, p1 = 10, d = p1 - p0, n = 30;
    ASSERT_TRUE(c->seq_rm(1, p0, p1));
    EXPECT_EQ(c->seq_len(1), n - d);
    auto after = c->kv_export(1);
    ASSERT_TRUE(after);
    const int64_t ek = hp.n_embd_k(), ev = hp.n_embd_v(), hd = hp.head_dim_k, n_rot = hp.n_rot;
    const bool neox = hp.rope_mode == RopeMode::kNeox;
    const auto* b16 = reinterpret_cast<const uint16_t*>(before->data());
    const auto* a16 = reinterpret_cast<const uint16_t*>(after->data());
    size_t off_b = 0, off_a = 0;  // per layer: K rows then V rows
    int mismatches = 0;
    for (int64_t il = 0; il < hp.n_layer; ++il) {
      for (int p = 0; p < n - d; ++p) {
        const int src = p < p0 ? p : p + d;
        std::vector<float> row(static_cast<size_t>(ek));
        for (int64_t i = 0; i < ek; ++i) row[static_cast<size_t>(i)] = fp16_to_fp32(b16[off_b + static_cast<size_t>(src * ek + i)]);
        if (p >= p0) {
          float theta = static_cast<float>(-d);
          const float scale = std::pow(hp.rope_freq_base, -2.0f / static_cast<float>(n_rot));
          for (int64_t i = 0; i < n_rot / 2; ++i) {
            const float cs = std::cos(theta), sn = std::sin(theta);
            for (int64_t h = 0; h < hp.n_head_kv; ++h) {
              float* x = row.data() + h * hd;
              const int64_t i0 = neox ? i : 2 * i, i1 = neox ? i + n_rot / 2 : 2 * i + 1;
              const float x0 = x[i0], x1 = x[i1];
              x[i0] = std::fma(x0, cs, -(x1 * sn));
              x[i1] = std::fma(x0, sn, x1 * cs);
            }
            theta *= scale;
          }
        }
        for (int64_t i = 0; i < ek; ++i)
          mismatches += a16[off_a + static_cast<size_t>(p * ek + i)] != fp32_to_fp16(row[static_cast<size_t>(i)]);
      }
      off_b += static_cast<size_t>(n * ek);
      off_a += static_cast<size_t>((n - d) * ek);
      for (int p = 0; p < n - d; ++p) {
        const int src = p < p0 ? p : p + d;
        mismatches += std::memcmp(a16 + off_a + static_cast<size_t>(p * ev), b16 + off_b + static_cast<size_t>(src * ev),
                                  static_cast<size_t>(ev) * 2) != 0;
      }
      off_b += static_cast<size_t>(n * ev);
      off_a += static_cast<size_t>((n - d) * ev);
    }
    EXPECT_EQ(mismatches, 0) << arch;
    // Removing up to the end is a rollback.
    ASSERT_TRUE(c->seq_rm(1, 20, -1));
    EXPECT_EQ(c->seq_len(1), 20);
    EXPECT_EQ(c->stats().n_kv_moves, 1);
  }
}

TEST(Context, BadBatchesChangeNothing) {
  Tiny t;
  auto m = test::load(t, "ctx-bad");
  ASSERT_TRUE(m);
  auto c = make(m, 2, AttnArith::kByBatch, 8);
  Batch ok;
  ok.add(1, 0, 0, true);
  ok.add(2, 1, 0, false);
  ASSERT_TRUE(c->decode(ok));
  auto expect_error = [&](Batch b, const char* what) {
    auto r = c->decode(b);
    ASSERT_FALSE(r) << what;
    EXPECT_NE(r.error().message.find(what), std::string::npos) << r.error().message;
    EXPECT_EQ(c->seq_len(0), 2);
    EXPECT_EQ(c->seq_len(1), 0);
  };
  Batch b;
  b.add(3, 2, 0, true);
  b.add(4, 0, 5, true);
  expect_error(b, "sequence id 5");
  b = {};
  b.add(3, 3, 0, true);
  expect_error(b, "position 3, expected 2");
  b = {};
  b.add(96, 0, 1, true);
  expect_error(b, "outside the vocabulary");
  b = {};
  for (int i = 0; i < 9; ++i) b.add(1, i, 1, false);
  expect_error(b, "context full");
  expect_error(Batch{}, "empty");
  EXPECT_FALSE(c->seq_cp(0, 0, 1));
  EXPECT_FALSE(c->seq_cp(0, 1, 3));
  EXPECT_FALSE(c->seq_rm(0, 1, 3));
  EXPECT_FALSE(c->seq_rollback(1, 1));
  EXPECT_FALSE(Context::create(m, {.backends = "gpu"}));
  EXPECT_FALSE(Context::create(m, {.backends = "cpu,cpu"}));
  // No logits wanted: an empty span, the tokens still go in.
  Batch quiet;
  quiet.add(5, 0, 1, false);
  auto r = c->decode(quiet);
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->empty());
  EXPECT_EQ(c->seq_len(1), 1);
}

}  // namespace
}  // namespace minfer
