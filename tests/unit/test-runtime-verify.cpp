// The shared speculative verify step (runtime/verify.h) on tiny random models: whatever the
// drafts, generating through verify_drafts gives plain decoding's tokens, stop reason, cache
// length and sampler state (RNG draws included), with and without a grammar, with a
// sliding-window ring; agreeing drafts are kept, the first disagreement's sample is the next
// token, rejected rows leave the cache, -n and the sink end generation inside a run, and the
// Speculator counts what was compared. Also draft_limit and prefix reuse (runtime/prefix-reuse.h).
#include <gtest/gtest.h>

#include <random>

#include "grammar/gbnf.h"
#include "runtime/prefix-reuse.h"
#include "runtime/verify.h"
#include "tiny-model.h"
#include "tiny-vocab.h"

namespace minfer {
namespace {

const Tokenizer& vocab() {
  static const Tokenizer tok = [] {
    auto t = Tokenizer::from_metadata(testing::tiny_bpe_metadata());
    MINFER_ASSERT(t);
    return std::move(*t);
  }();
  return tok;
}

std::unique_ptr<Context> tiny_context(const std::string& arch, int n_batch = 8) {
  test::Tiny t = test::tiny_for(arch);  // gemma3: a window of 4 on every other layer
  t.n_vocab = vocab().n_vocab();
  auto m = test::load(t, "verify-" + arch);
  if (!m) return nullptr;
  auto c = Context::create(m, {.n_seq = 2, .n_ctx_seq = 64, .n_batch = n_batch, .n_threads = 2, .attn = AttnArith::kInvariant});
  EXPECT_TRUE(c) << (c ? "" : c.error().message);
  return c ? std::move(*c) : nullptr;
}

// Appends tokens to sequence seq in batches of n_batch; the logits of the last token, or of
// every token (all_rows).
std::vector<float> decode(Context& ctx, int seq, std::span<const int32_t> toks, bool all_rows) {
  std::vector<float> out;
  for (size_t i = 0; i < toks.size();) {
    Batch b;
    for (; i < toks.size() && b.size() < ctx.n_batch(); ++i)
      b.add(toks[i], ctx.seq_len(seq) + b.size(), seq, all_rows || i + 1 == toks.size());
    auto r = ctx.decode(b);
    EXPECT_TRUE(r) << (r ? "" : r.error().message);
    if (r) out.insert(out.end(), r->begin(), r->end());
  }
  return out;
}

StepParams limits(int n_predict, bool ignore_eog = true) {
  StepParams p;
  p.n_predict = n_predict;
  p.ignore_eog = ignore_eog;
  return p;
}

const std::vector<int32_t> kPrompt = {5, 17, 40, 3, 99, 120, 7, 64, 250, 11};

struct Gen {
  std::vector<int32_t> tokens;
  StopReason reason = StopReason::kLength;
  int n_past = 0;
  Rng rng;
  int64_t n_compared = 0, n_agreed = 0, n_accepted = 0, n_passes = 0;
  SpecStats spec;
};

// A generation starting on sequence seq: the sampler (its window seeded with the prompt), the
// step, and the prompt's logits row. Not movable: the step points at the sampler.
struct Fresh {
  Context& ctx;
  int seq;
  Sampler sampler;
  TokenStep step;
  std::vector<float> logits;
  static Sampler make(const SamplerParams& sp, int n_vocab) {
    auto s = Sampler::create(sp, n_vocab);
    MINFER_ASSERT(s);
    return std::move(*s);
  }
  Fresh(Context& c, int s, const SamplerParams& sp, const StepParams& stp)
      : ctx(c), seq(s), sampler(make(sp, c.n_vocab())), step(vocab(), sampler, stp) {
    ctx.seq_clear(seq);
    sampler.accept_prompt(kPrompt);
    logits = decode(ctx, seq, kPrompt, false);
  }
  Fresh(const Fresh&) = delete;
  void finish(Gen& out) const {
    out.tokens = step.tokens();
    out.n_past = ctx.seq_len(seq);
    out.rng = sampler.checkpoint().rng;
  }
};

// Plain decoding: one token per pass.
Gen plain(Context& ctx, int seq, const SamplerParams& sp, const StepParams& stp) {
  Gen out;
  Fresh g(ctx, seq, sp, stp);
  for (;;) {
    auto r = g.step.next(g.logits, ctx.n_ctx_seq() - ctx.seq_len(seq));
    EXPECT_TRUE(r);
    if (!r) break;
    if (r->done) {
      out.reason = r->reason;
      break;
    }
    const int32_t t = r->token;
    g.logits = decode(ctx, seq, {&t, 1}, false);
  }
  g.finish(out);
  return out;
}

// Through verify_drafts: each pass drafts up to k_max of the reference's next tokens, every
// third one (at random) changed, so runs are accepted, cut short and wrong from the start.
Gen speculative(Context& ctx, int seq, const SamplerParams& sp, const StepParams& stp, const std::vector<int32_t>& ref,
                int k_max, uint32_t seed) {
  Gen out;
  Fresh g(ctx, seq, sp, stp);
  TokenStep& step = g.step;
  std::vector<float>& logits = g.logits;
  SpecParams spp;
  spp.n_max = k_max;
  Speculator spec(spp, nullptr, seq);
  std::mt19937 rng(seed);
  Speculator::Plan plan;
  for (;;) {
    auto v = verify_drafts(ctx, seq, step, logits, plan, {.spec = &spec}, [&](int, std::span<const float>, TokenStep::Result& r) {
      if (r.done) out.reason = r.reason;
      return true;
    });
    EXPECT_TRUE(v && v->sampled);
    if (!v || !v->sampled) break;
    out.n_compared += v->n_compared;
    out.n_agreed += v->n_agreed;
    out.n_accepted += v->n_accepted;
    EXPECT_LE(v->n_accepted, v->n_agreed);
    EXPECT_EQ(v->n_accepted + v->n_rolled_back, static_cast<int>(plan.tokens.size()));
    // The cache holds the prompt and every generated token but the last, as plain decoding's.
    EXPECT_EQ(ctx.seq_len(seq), static_cast<int>(kPrompt.size()) + step.n_gen() - 1);
    if (v->next < 0) break;
    plan = {};
    const int n_gen = step.n_gen();
    const int limit = std::min(k_max, draft_limit(ctx.n_ctx_seq() - ctx.seq_len(seq), stp.n_predict, n_gen));
    for (int m = 0; m < limit && static_cast<size_t>(n_gen + m) < ref.size(); ++m) {
      const int32_t t = ref[static_cast<size_t>(n_gen + m)];
      plan.tokens.push_back(rng() % 3 == 0 ? (t + 1) % ctx.n_vocab() : t);
    }
    if (!plan.tokens.empty()) plan.source = DraftSource::kNgram;
    std::vector<int32_t> pass = {v->next};
    pass.insert(pass.end(), plan.tokens.begin(), plan.tokens.end());
    logits = decode(ctx, seq, pass, true);
    out.n_passes++;
  }
  g.finish(out);
  out.spec = spec.stats();
  return out;
}

class VerifyArch : public ::testing::TestWithParam<const char*> {};

TEST_P(VerifyArch, SameAsPlainDecodingWhateverTheDrafts) {
  auto ctx = tiny_context(GetParam());
  ASSERT_TRUE(ctx);
  auto grammar = parse_gbnf(R"(root ::= [a-z ]+ "." [a-z ]+)");
  ASSERT_TRUE(grammar) << grammar.error().message;
  struct Case {
    const char* name;
    SamplerParams sp;
    StepParams stp;
  };
  SamplerParams greedy;
  greedy.temp = 0;
  greedy.seed = 1;  // no draws: the RNG stays as seeded
  SamplerParams seeded;
  seeded.temp = 1.0f;
  seeded.top_k = 0;
  seeded.min_p = 0;
  seeded.seed = 5;
  SamplerParams penalties = seeded;
  penalties.repeat_penalty = 1.3f;
  penalties.seed = 11;
  StepParams grammared = limits(30, false);
  grammared.grammar = std::make_shared<const Grammar>(std::move(*grammar));
  grammared.grammar_tokens = grammar_tokens(vocab());
  const Case cases[] = {
      {"greedy", greedy, limits(40)},
      {"seeded", seeded, limits(40)},
      {"penalties", penalties, limits(40)},
      {"full context", seeded, limits(-1)},
      {"grammar greedy", greedy, grammared},
      {"grammar seeded", seeded, grammared},
  };
  for (const Case& c : cases) {
    const Gen ref = plain(*ctx, 1, c.sp, c.stp);
    ASSERT_GT(ref.tokens.size(), 5u) << c.name;
    for (int k_max : {1, 4, 7}) {
      for (uint32_t seed : {1u, 2u}) {
        const std::string what = std::string(c.name) + ", k_max " + std::to_string(k_max) + ", seed " + std::to_string(seed);
        const Gen s = speculative(*ctx, 0, c.sp, c.stp, ref.tokens, k_max, seed);
        EXPECT_EQ(s.tokens, ref.tokens) << what;
        EXPECT_EQ(s.reason, ref.reason) << what;
        EXPECT_EQ(s.n_past, ref.n_past) << what;
        EXPECT_TRUE(s.rng == ref.rng) << what << ": the sampler drew what plain decoding drew";
        EXPECT_EQ(s.spec.n_drafted, s.n_compared) << what;
        EXPECT_EQ(s.spec.n_accepted, s.n_agreed) << what;
        EXPECT_GT(s.n_accepted, 0) << what;
        EXPECT_LT(s.n_passes, static_cast<int64_t>(ref.tokens.size())) << what << ": drafts saved passes";
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Archs, VerifyArch, ::testing::Values("llama", "gemma3"));

// One pass, step by step: [next, d1 .. d4] against the greedy reference r0, r1, ...
class VerifyPass : public ::testing::Test {
 protected:
  void SetUp() override {
    ctx_ = tiny_context("llama");
    ASSERT_TRUE(ctx_);
    sp_.temp = 0;
    ref_ = plain(*ctx_, 1, sp_, limits(20)).tokens;
    ASSERT_EQ(ref_.size(), 20u);
  }
  // Prefills the prompt, samples r0 from its row, decodes [r0, drafts...] and verifies it.
  Expected<VerifyResult> pass(const std::vector<int32_t>& drafts, const StepParams& stp, const VerifySink& sink = {}) {
    ctx_->seq_clear(0);
    sampler_.emplace(*Sampler::create(sp_, ctx_->n_vocab()));
    step_.emplace(vocab(), *sampler_, stp);
    spec_.emplace(SpecParams{}, nullptr, 0);
    std::vector<float> logits = decode(*ctx_, 0, kPrompt, false);
    auto all = [](int, std::span<const float>, TokenStep::Result&) { return true; };
    auto v0 = verify_drafts(*ctx_, 0, *step_, logits, {}, {.spec = &*spec_}, all);
    EXPECT_TRUE(v0 && v0->next == ref_[0]);
    Speculator::Plan plan;
    plan.source = DraftSource::kNgram;
    plan.n = static_cast<int>(drafts.size());
    plan.tokens = drafts;
    std::vector<int32_t> toks = {ref_[0]};
    toks.insert(toks.end(), drafts.begin(), drafts.end());
    logits = decode(*ctx_, 0, toks, true);
    return verify_drafts(*ctx_, 0, *step_, logits, plan, {.spec = &*spec_}, sink ? sink : VerifySink(all));
  }
  int32_t wrong(int32_t t) const { return (t + 1) % ctx_->n_vocab(); }
  int n_prompt() const { return static_cast<int>(kPrompt.size()); }

  std::unique_ptr<Context> ctx_;
  SamplerParams sp_;
  std::vector<int32_t> ref_;
  std::optional<Sampler> sampler_;
  std::optional<TokenStep> step_;
  std::optional<Speculator> spec_;
};

TEST_F(VerifyPass, KeepsAgreeingDraftsAndTheFirstDisagreementsSample) {
  auto v = pass({ref_[1], ref_[2], wrong(ref_[3]), ref_[4]}, limits(20));
  ASSERT_TRUE(v && v->sampled);
  EXPECT_EQ(v->n_accepted, 2);
  EXPECT_EQ(v->n_compared, 3);
  EXPECT_EQ(v->n_agreed, 2);
  EXPECT_EQ(v->next, ref_[3]);  // the target's own sample at the disagreement
  EXPECT_EQ(v->n_rolled_back, 2);
  EXPECT_EQ(ctx_->seq_len(0), n_prompt() + 3);  // r0, r1, r2
  EXPECT_EQ(spec_->stats().n_drafted, 3);
  EXPECT_EQ(spec_->stats().n_accepted, 2);
  EXPECT_EQ(spec_->stats().n_steps, 1);

  v = pass({ref_[1], ref_[2], ref_[3], ref_[4]}, limits(20));
  ASSERT_TRUE(v && v->sampled);
  EXPECT_EQ(v->n_accepted, 4);
  EXPECT_EQ(v->next, ref_[5]);  // the bonus token after the last draft
  EXPECT_EQ(v->n_rolled_back, 0);
  EXPECT_EQ(ctx_->seq_len(0), n_prompt() + 5);

  v = pass({wrong(ref_[1]), ref_[2]}, limits(20));
  ASSERT_TRUE(v && v->sampled);
  EXPECT_EQ(v->n_accepted, 0);
  EXPECT_EQ(v->n_compared, 1);
  EXPECT_EQ(v->next, ref_[1]);
  EXPECT_EQ(v->n_rolled_back, 2);
  EXPECT_EQ(ctx_->seq_len(0), n_prompt() + 1);
}

TEST_F(VerifyPass, EndsInsideARun) {
  // -n 3: r0 (the prefill's row), r1, r2; the agreeing drafts after r2 are not sampled.
  auto v = pass({ref_[1], ref_[2], ref_[3], ref_[4]}, limits(3));
  ASSERT_TRUE(v && v->sampled);
  EXPECT_EQ(v->next, -1);
  EXPECT_EQ(v->n_compared, 2);
  EXPECT_EQ(v->n_agreed, 2);  // r2 agreed with d2, but generation ended with it
  EXPECT_EQ(v->n_accepted, 1);
  EXPECT_EQ(v->n_rolled_back, 3);
  EXPECT_EQ(ctx_->seq_len(0), n_prompt() + 2);  // plain decoding never decodes the last token
  EXPECT_EQ(step_->tokens(), std::vector<int32_t>(ref_.begin(), ref_.begin() + 3));

  // The sink stops at row 1 (a client gone): the same cut.
  std::vector<int> rows;
  v = pass({ref_[1], ref_[2], ref_[3], ref_[4]}, limits(20),
           [&](int i, std::span<const float> row, TokenStep::Result&) {
             EXPECT_EQ(row.size(), static_cast<size_t>(ctx_->n_vocab()));
             rows.push_back(i);
             return i < 1;
           });
  ASSERT_TRUE(v && v->sampled);
  EXPECT_EQ(rows, (std::vector<int>{0, 1}));
  EXPECT_EQ(v->next, -1);
  EXPECT_EQ(v->n_accepted, 1);
  EXPECT_EQ(ctx_->seq_len(0), n_prompt() + 2);
}

TEST(Verify, DraftLimit) {
  EXPECT_EQ(draft_limit(10, -1, 0), 9);  // the pass [next, drafts] fits the free positions
  EXPECT_EQ(draft_limit(10, 5, 2), 2);   // samples 3, 4 and 5 of -n 5: next's row and 2 drafts
  EXPECT_EQ(draft_limit(10, 3, 2), 0);
  EXPECT_EQ(draft_limit(1, -1, 7), 0);
}

TEST(PrefixReuse, CommonPrefixAndTheRingsLimit) {
  EXPECT_EQ(common_prefix(std::vector<int32_t>{1, 2, 3}, std::vector<int32_t>{1, 2, 4, 5}), 2u);
  EXPECT_EQ(common_prefix(std::vector<int32_t>{1, 2}, std::vector<int32_t>{1, 2, 4}), 2u);
  EXPECT_EQ(common_prefix(std::vector<int32_t>{}, std::vector<int32_t>{1}), 0u);
  EXPECT_EQ(common_prefix("hello", "help"), 3u);
  EXPECT_EQ(common_prefix(std::string_view("abc"), std::string_view("abc")), 3u);

  std::vector<int32_t> toks(20);
  for (int i = 0; i < 20; ++i) toks[static_cast<size_t>(i)] = (i * 7 + 3) % 200;
  std::vector<int32_t> prompt(toks.begin(), toks.begin() + 18);
  prompt.push_back(201);
  for (const char* arch : {"llama", "gemma3"}) {
    auto ctx = tiny_context(arch, 4);  // gemma3: a ring of 4 + 4 rows holds positions 12..19
    ASSERT_TRUE(ctx);
    decode(*ctx, 0, toks, false);
    std::vector<int32_t> cached = toks;
    const bool ring = std::string(arch) == "gemma3";
    EXPECT_EQ(reusable_prefix(*ctx, 0, cached, prompt), 18u) << arch;
    EXPECT_EQ(reusable_prefix(*ctx, 0, cached, prompt, 16), 16u) << arch;
    EXPECT_EQ(reusable_prefix(*ctx, 0, cached, prompt, 10), ring ? 0u : 10u) << arch << ": the ring lost that window";
    ASSERT_TRUE(keep_prefix(*ctx, 0, cached, 18));
    EXPECT_EQ(ctx->seq_len(0), 18);
    EXPECT_EQ(cached, std::vector<int32_t>(toks.begin(), toks.begin() + 18));
    if (ring) {
      EXPECT_FALSE(keep_prefix(*ctx, 0, cached, 5));  // refused: nothing changes
      EXPECT_EQ(ctx->seq_len(0), 18);
      EXPECT_EQ(cached.size(), 18u);
    }
    ASSERT_TRUE(keep_prefix(*ctx, 0, cached, 0));
    EXPECT_EQ(ctx->seq_len(0), 0);
    EXPECT_TRUE(cached.empty());
  }
}

}  // namespace
}  // namespace minfer
