// Speculative decoding: the same output as plain decoding, token for token and byte for byte,
// over a table of prompts x seeds x sampler settings x drafting modes on SmolLM2-135M-Instruct
// (MINFER_SMOLLM2): n-gram self-drafting, SmolLM2 drafting for itself (greedy: every draft
// accepted), a random-weight model with SmolLM2's vocabulary (almost every draft refused), and
// the adaptive mix of both. Also: stop strings and end-of-generation inside an accepted run, a
// context that fills mid-run, a conversation (the draft cache follows truncation and a removed
// range), and the units (n-gram lookup, draft length choice, the vocabulary check).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "models/model.h"
#include "runtime/draft-length.h"
#include "runtime/draft-model.h"
#include "runtime/draft-ngram.h"
#include "runtime/generate.h"
#include "runtime/session.h"
#include "runtime/speculative.h"
#include "sampling/sampler.h"
#include "tiny-vocab.h"
#include "tokenizer/tokenizer.h"

namespace minfer {
namespace {

// ---- units ----

TEST(NgramDraft, LongestSuffixLatestOccurrence) {
  // history: 1 2 3 4 5 | 9 2 3 4 7 | 2 3 4 -> the suffix "2 3 4" last occurred before 7.
  const std::vector<int32_t> h = {1, 2, 3, 4, 5, 9, 2, 3, 4, 7, 8, 2, 3, 4};
  NgramDraft d = ngram_draft(h, {.n_min = 2, .n_max = 5}, 3);
  EXPECT_EQ(d.match, 3);
  EXPECT_EQ(d.tokens, (std::vector<int32_t>{7, 8, 2}));
  // A longer suffix that only matches the first occurrence wins over a later shorter one.
  const std::vector<int32_t> h2 = {5, 2, 3, 4, 6, 1, 3, 4, 0, 5, 2, 3, 4};
  d = ngram_draft(h2, {.n_min = 2, .n_max = 5}, 2);
  EXPECT_EQ(d.match, 4);
  EXPECT_EQ(d.tokens, (std::vector<int32_t>{6, 1}));
  // Nothing repeats: no draft; n_min 1 drafts from a repeated last token.
  EXPECT_TRUE(ngram_draft(std::vector<int32_t>{1, 2, 3, 4}, {.n_min = 1, .n_max = 3}, 4).tokens.empty());
  d = ngram_draft(std::vector<int32_t>{7, 1, 2, 7}, {.n_min = 1, .n_max = 3}, 4);
  EXPECT_EQ(d.tokens, (std::vector<int32_t>{1, 2, 7}));
  EXPECT_TRUE(ngram_draft(std::vector<int32_t>{7, 1, 2, 7}, {.n_min = 2, .n_max = 3}, 4).tokens.empty());
  EXPECT_TRUE(ngram_draft(std::vector<int32_t>{}, {}, 4).tokens.empty());
}

TEST(NgramDraft, SubstitutedLastTokenKeepsCopying) {
  // "p ( i , 4 ) ) \n p ( i , 5": the suffix ", 5" never occurred; the tokens before the 5
  // (", " after "( i") did, followed by 4: propose what followed the 4.
  const std::vector<int32_t> h = {20, 21, 22, 23, 4, 24, 24, 25, 20, 21, 22, 23, 5};
  NgramDraft d = ngram_draft(h, {.n_min = 2, .n_max = 5}, 3);
  EXPECT_TRUE(d.skipped);
  EXPECT_EQ(d.match, 4);
  EXPECT_EQ(d.tokens, (std::vector<int32_t>{24, 24, 25}));
  // An exact suffix match wins over a substitution, and skip = false keeps exact matches only.
  d = ngram_draft(std::vector<int32_t>{1, 2, 3, 9, 2, 3, 7, 1, 2, 3}, {.n_min = 2, .n_max = 5}, 2);
  EXPECT_FALSE(d.skipped);
  EXPECT_EQ(d.tokens, (std::vector<int32_t>{9, 2}));
  EXPECT_TRUE(ngram_draft(h, {.n_min = 2, .n_max = 5, .skip = false}, 3).tokens.empty());
  // "1 2 3 6 | 1 2 8": 8 stands for 3, so what followed 3 is proposed.
  d = ngram_draft(std::vector<int32_t>{1, 2, 3, 6, 1, 2, 8}, {.n_min = 2, .n_max = 5}, 3);
  EXPECT_EQ(d.tokens, (std::vector<int32_t>{6, 1, 2}));
  // Too short a key: nothing.
  EXPECT_TRUE(ngram_draft(std::vector<int32_t>{1, 2, 1, 3}, {.n_min = 2, .n_max = 5}, 3).tokens.empty());
}

TEST(DraftLength, FollowsAcceptanceAndCost) {
  // Cheap drafts that always hold: draft the most.
  PassCost pass;
  DraftLength good(8);
  for (int i = 0; i < 50; ++i) {
    const int k = good.choose(8, pass);
    good.record(k, k, 0.0001 * k);
    pass.record(k + 1, 0.010 + 0.001 * k);
  }
  EXPECT_EQ(good.choose(8, pass), 8);
  EXPECT_EQ(good.choose(3, pass), 3);  // never past the limit
  // Drafts that never hold and cost as much as the target: stop drafting.
  PassCost pass2;
  DraftLength costly(8);
  for (int i = 0; i < 50; ++i) {
    const int k = costly.choose(8, pass2);
    costly.record(k, 0, 0.010 * k);
    pass2.record(k + 1, 0.010 + 0.002 * k);
  }
  EXPECT_LT(costly.acceptance(1), 0.15);
  // Free drafts (n-gram) that never hold: stop too, but probe now and then, less often while
  // the probes keep failing.
  DraftLength bad(8);
  std::vector<int> probe_at;
  for (int i = 0; i < 400; ++i) {
    const int k = bad.choose(8, pass2);
    if (k > 0 && i >= 50) probe_at.push_back(i);
    if (i >= 50) EXPECT_LE(k, 1);
    bad.record(k, 0, 0.0);
  }
  EXPECT_LT(bad.acceptance(1), 0.15);
  ASSERT_GE(probe_at.size(), 3u);
  EXPECT_LE(probe_at.size(), 350u / DraftLength::kProbeEvery);
  EXPECT_GT(probe_at.back() - probe_at[probe_at.size() - 2], probe_at[1] - probe_at[0]);  // backing off
  // They start to hold: drafting resumes within a few probes.
  int resumed = -1;
  for (int i = 0; i < 2 * DraftLength::kProbeMax && resumed < 0; ++i) {
    const int k = bad.choose(8, pass2);
    bad.record(k, k, 0.0);
    if (k > 1) resumed = i;
  }
  EXPECT_GE(resumed, 0);
}

TEST(DraftLength, ShortestDraftAllowed) {
  // n_min 3: the choice is 0 or 3..n_max (a shorter draft would be thrown away), the ramp
  // starts at 3, and so do probes.
  PassCost pass;
  DraftLength len(6);
  pass.record(1, 0.010);
  pass.record(1, 0.010);
  int k = len.choose(6, pass, 3);
  EXPECT_EQ(k, 3);
  for (int i = 0; i < 40; ++i) {
    k = len.choose(6, pass, 3);
    EXPECT_TRUE(k == 0 || (k >= 3 && k <= 6)) << k;
    len.record(k, k, 0.0);
    pass.record(k + 1, 0.010 + 0.001 * k);
  }
  EXPECT_GE(len.choose(6, pass, 3), 3);
  DraftLength bad(6);
  for (int i = 0; i < 40; ++i) {
    k = bad.choose(6, pass, 3);
    EXPECT_TRUE(k == 0 || k >= 3) << k;
    bad.record(k, 0, 0.0);
  }
}

TEST(PassCost, MeasuredInterpolatedExtended) {
  PassCost c;
  EXPECT_DOUBLE_EQ(c(1), 1.0);  // nothing measured: the prior's shape
  EXPECT_DOUBLE_EQ(c(5), 1.0 + 4 * PassCost::kPerRowPrior);
  c.record(1, 0.5);  // the first pass of each row count (its graph is built) is left out
  c.record(5, 0.5);
  EXPECT_EQ(c.tried(), 5);
  c.record(7, -1.0);  // a pass of unknown time (shared with a prefill): tried, not measured
  EXPECT_EQ(c.tried(), 7);
  EXPECT_DOUBLE_EQ(c(5), 1.0 + 4 * PassCost::kPerRowPrior);
  EXPECT_DOUBLE_EQ(c(5), 1.0 + 4 * PassCost::kPerRowPrior);
  c.record(1, 0.010);
  c.record(5, 0.030);
  EXPECT_DOUBLE_EQ(c(1), 0.010);
  EXPECT_NEAR(c(3), 0.020, 1e-12);  // between measured counts: linear
  EXPECT_NEAR(c(7), 0.040, 1e-12);  // past them: the measured slope (steeper than the prior's)
  c.record(5, 1.0);                 // a pass that lost its core: clipped at 3x the estimate
  EXPECT_LT(c(5), 0.1);
  // The machine slows down by 2x (another process): plain passes alone move every estimate.
  PassCost d;
  for (int i = 0; i < 20; ++i) {
    d.record(1, 0.010);
    d.record(5, 0.030);
  }
  for (int i = 0; i < 20; ++i) d.record(1, 0.020);
  EXPECT_NEAR(d(1), 0.020, 0.002);
  EXPECT_NEAR(d(5) / d(1), 3.0, 0.3);
  PassCost flat;
  for (int i = 0; i < 2; ++i) {
    flat.record(1, 0.010);
    flat.record(2, 0.010);
  }
  EXPECT_NEAR(flat(4), 0.010 + 2 * PassCost::kPerRowPrior * 0.010, 1e-12);  // the prior's slope at least
}

TEST(DraftVocab, SameIdsOrRefusedByName) {
  auto a = Tokenizer::from_metadata(testing::tiny_bpe_metadata());
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_TRUE(check_draft_vocab(*a, *a));
  // One token spelled differently.
  std::vector<GgufKV> md = testing::tiny_bpe_metadata();
  for (GgufKV& kv : md) {
    if (kv.key != "tokenizer.ggml.tokens") continue;
    std::vector<std::string> t;
    const GgufArray* arr = kv.value.as_array();
    ASSERT_TRUE(arr);
    for (size_t i = 0; i < arr->size(); ++i) t.push_back(std::string(arr->string_at(i)));
    t[300] = "zz-other";
    kv.value = GgufValue::make_string_array(t);
  }
  auto b = Tokenizer::from_metadata(md);
  ASSERT_TRUE(b) << b.error().message;
  Status st = check_draft_vocab(*a, *b);
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().message.find("token 300"), std::string::npos) << st.error().message;
  EXPECT_NE(st.error().message.find("zz-other"), std::string::npos) << st.error().message;
  // Another special id.
  md = testing::tiny_bpe_metadata();
  for (GgufKV& kv : md)
    if (kv.key == "tokenizer.ggml.eos_token_id") kv.value = GgufValue(GgufValue::Storage(uint32_t(256)));
  auto c = Tokenizer::from_metadata(md);
  ASSERT_TRUE(c) << c.error().message;
  st = check_draft_vocab(*a, *c);
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().message.find("eos"), std::string::npos) << st.error().message;
  // Another tokenizer type.
  auto spm = Tokenizer::from_metadata(testing::tiny_spm_metadata());
  ASSERT_TRUE(spm);
  st = check_draft_vocab(*a, *spm);
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().message.find("'llama'"), std::string::npos) << st.error().message;
}

TEST(SpecParams, RefusedByName) {
  SpecParams p;
  p.n_max = kSpecMaxDraft + 1;
  Status st = validate(p);
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().message.find("--spec-draft-n 63"), std::string::npos) << st.error().message;
  p.n_max = 4;
  p.n_min = 5;
  EXPECT_FALSE(validate(p));
  p.n_min = 0;
  p.p_min = 1.5f;
  EXPECT_FALSE(validate(p));
  p.p_min = 0.5f;
  EXPECT_TRUE(validate(p));
}

// ---- identity on SmolLM2 ----

std::string smollm2_path() {
  const char* env = std::getenv("MINFER_SMOLLM2");
  return env ? env : MINFER_TEST_SMOLLM2;
}

struct Gen {
  std::vector<int32_t> tokens;
  std::string text;
  StopReason reason = StopReason::kLength;
  int n_past = 0;
  SpecStats spec;
};

class SpecIdentity : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string path = smollm2_path();
    ASSERT_TRUE(std::filesystem::exists(path)) << path << " is missing (scripts/setup.sh fetches it; MINFER_SMOLLM2 overrides)";
    auto m = Model::load(path);
    ASSERT_TRUE(m) << m.error().message;
    model_ = *m;
    auto t = Tokenizer::from_gguf(model_->file());
    ASSERT_TRUE(t) << t.error().message;
    tok_ = new Tokenizer(std::move(*t));
    // A random-weight model with SmolLM2's vocabulary: a draft that (almost) always disagrees.
    const std::string rnd = std::string(MINFER_TEST_BUILD_DIR) + "/spec-random-draft.gguf";
    if (!std::filesystem::exists(rnd)) {
      const std::string tmp = rnd + ".tmp." + std::to_string(getpid());  // ctest may run two suites at once
      const std::string cmd = std::string(MINFER_TEST_MAKE_MODEL) + " --arch llama --vocab-from '" + path + "' --out '" + tmp +
                              "' --n-embd 64 --n-layer 2 --n-head 2 --n-head-kv 1 --n-ff 128 --ctx 2048 --seed 7 >/dev/null";
      ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
      std::filesystem::rename(tmp, rnd);
    }
    auto r = Model::load(rnd);
    ASSERT_TRUE(r) << r.error().message;
    random_ = *r;
  }
  static void TearDownTestSuite() {
    delete tok_;
    tok_ = nullptr;
    model_.reset();
    random_.reset();
  }

  static constexpr int kCtx = 512;

  void SetUp() override {
    ASSERT_TRUE(model_ && random_);
    auto s = Session::create(model_, {.n_ctx = kCtx, .n_batch = 512, .n_threads = 2});
    ASSERT_TRUE(s) << s.error().message;
    session_ = std::move(*s);
  }

  std::unique_ptr<DraftModel> draft(std::shared_ptr<const Model> m) {
    auto dt = Tokenizer::from_gguf(m->file());
    EXPECT_TRUE(dt);
    auto d = DraftModel::create(m, *dt, *tok_, {.n_seq = 1, .n_ctx_seq = kCtx, .n_batch = 512, .n_threads = 2});
    EXPECT_TRUE(d) << (d ? "" : d.error().message);
    return d ? std::move(*d) : nullptr;
  }

  std::vector<int32_t> chat(const std::string& user) {
    return tok_->encode("<|im_start|>user\n" + user + "<|im_end|>\n<|im_start|>assistant\n", true, true);
  }

  // A fresh generation on a cleared session (or on what it holds: `cached`).
  Gen run(const std::vector<int32_t>& prompt, const SamplerParams& sp, const GenerateParams& gp, Speculator* spec,
          const std::vector<int32_t>& cached = {}) {
    Gen out;
    if (cached.empty()) session_->clear();
    auto sampler = Sampler::create(sp, tok_->n_vocab());
    EXPECT_TRUE(sampler);
    if (!sampler) return out;
    sampler->accept_prompt(cached);
    auto st = generate(*session_, *tok_, *sampler, prompt, gp, [&](std::string_view t) {
      out.text += t;
      return true;
    }, {}, GenerateSpec{spec, cached});
    EXPECT_TRUE(st) << (st ? "" : st.error().message);
    if (!st) return out;
    out.tokens = st->tokens;
    out.reason = st->reason;
    out.n_past = session_->n_past();
    out.spec = st->spec;
    return out;
  }

  static std::shared_ptr<const Model> model_, random_;
  static Tokenizer* tok_;
  std::unique_ptr<Session> session_;
};

std::shared_ptr<const Model> SpecIdentity::model_, SpecIdentity::random_;
Tokenizer* SpecIdentity::tok_ = nullptr;

void expect_same(const Gen& plain, const Gen& spec, const std::string& what) {
  EXPECT_EQ(plain.tokens, spec.tokens) << what;
  EXPECT_EQ(plain.text, spec.text) << what;
  EXPECT_EQ(plain.reason, spec.reason) << what;
  EXPECT_EQ(plain.n_past, spec.n_past) << what << ": the cache must hold what plain decoding leaves";
}

std::map<std::string, SamplerParams> sampler_table() {
  std::map<std::string, SamplerParams> t;
  SamplerParams g;
  g.temp = 0;
  g.repeat_penalty = 1.0f;
  t["greedy"] = g;
  SamplerParams gp = g;
  gp.repeat_penalty = 1.3f;
  gp.frequency_penalty = 0.2f;
  gp.presence_penalty = 0.3f;
  t["greedy+penalties"] = gp;
  t["default(temp 0.8, top-k 40, top-p 0.95, min-p 0.05)"] = SamplerParams{};
  SamplerParams hot;
  hot.temp = 1.2f;
  hot.top_k = 0;
  hot.top_p = 1.0f;
  hot.min_p = 0.05f;
  hot.dry_multiplier = 0.8f;
  hot.typical_p = 0.9f;
  t["hot+min-p+typical+DRY"] = hot;
  SamplerParams xtc;
  xtc.xtc_probability = 0.5f;
  xtc.xtc_threshold = 0.1f;
  xtc.logit_bias[13] = -2.0f;
  t["xtc+logit-bias"] = xtc;
  SamplerParams miro;
  miro.mirostat = 2;
  t["mirostat-v2"] = miro;
  SamplerParams dyn;
  dyn.top_n_sigma = 1.5f;
  dyn.dynatemp_range = 0.5f;
  dyn.dynatemp_exponent = 1.5f;
  t["top-n-sigma+dynatemp"] = dyn;
  return t;
}

TEST_F(SpecIdentity, TableOfPromptsSeedsSamplersAndModes) {
  auto self = draft(model_);
  auto rnd = draft(random_);
  ASSERT_TRUE(self && rnd);
  const std::vector<std::string> prompts = {
      "Copy this text exactly: The committee will meet on Tuesday at noon to review the budget, the schedule and the "
      "hiring plan. Bring the budget.",
      "Write a short story about a lighthouse keeper.",
      "Rename the variable x to count in this code:\nint x = 0;\nfor (int i = 0; i < n; ++i) x += a[i];\nreturn x;"};
  struct Mode {
    const char* name;
    DraftModel* model;
    SpecParams p;
  };
  SpecParams ngram;
  ngram.ngram = true;
  ngram.model = false;
  ngram.adaptive = false;  // fixed lengths: the most drafts to verify
  SpecParams self4;
  self4.adaptive = false;
  SpecParams rnd6;
  rnd6.adaptive = false;
  rnd6.n_max = 6;
  rnd6.ngram = true;
  SpecParams mix;
  mix.n_max = 8;
  mix.adaptive = true;
  mix.ngram = true;
  mix.ngram_params = {.n_min = 1, .n_max = 4};
  const std::vector<Mode> modes = {{"ngram", nullptr, ngram},
                                   {"self-draft n4", self.get(), self4},
                                   {"random-draft n6 + ngram", rnd.get(), rnd6},
                                   {"self-draft adaptive n8 + ngram", self.get(), mix}};
  const auto samplers = sampler_table();
  int n_cases = 0, n_drafted_total = 0;
  SpecStats random_stats;
  for (size_t pi = 0; pi < prompts.size(); ++pi) {
    const std::vector<int32_t> prompt = chat(prompts[pi]);
    for (const auto& [sname, sp0] : samplers) {
      for (int64_t seed : {1, 42}) {
        if (sp0.temp == 0 && seed != 1) continue;  // greedy: the seed changes nothing
        SamplerParams sp = sp0;
        sp.seed = seed;
        GenerateParams gp;
        gp.n_predict = 32;
        const Gen plain = run(prompt, sp, gp, nullptr);
        ASSERT_FALSE(plain.tokens.empty());
        for (const Mode& m : modes) {
          Speculator spec(m.p, m.model, 0);
          const Gen got = run(prompt, sp, gp, &spec);
          const std::string what = fmt::format("prompt {}, {}, seed {}, {}", pi, sname, seed, m.name);
          expect_same(plain, got, what);
          ++n_cases;
          n_drafted_total += static_cast<int>(got.spec.n_drafted);
          if (m.model == self.get() && sname == "greedy") {
            if (!m.p.adaptive) EXPECT_GT(got.spec.drafted_by[static_cast<size_t>(DraftSource::kModel)], 0) << what;
            EXPECT_EQ(got.spec.accepted_by[static_cast<size_t>(DraftSource::kModel)],
                      got.spec.drafted_by[static_cast<size_t>(DraftSource::kModel)])
                << what << ": a model drafting for itself greedily must be accepted every time";
          }
          if (m.model == rnd.get()) random_stats.add(got.spec);
        }
      }
    }
  }
  const size_t md = static_cast<size_t>(DraftSource::kModel);
  EXPECT_GT(random_stats.drafted_by[md], 100);
  EXPECT_LT(random_stats.accepted_by[md] * 10, random_stats.drafted_by[md]) << "the random draft should rarely agree";
  EXPECT_GT(n_drafted_total, 1000);
  std::printf("[identity] %d speculative runs identical to plain decoding (%d drafted tokens); random draft %lld/%lld accepted\n",
              n_cases, n_drafted_total, static_cast<long long>(random_stats.accepted_by[md]),
              static_cast<long long>(random_stats.drafted_by[md]));
}

TEST_F(SpecIdentity, StopsEndOfGenerationAndFullContextInsideARun) {
  auto self = draft(model_);
  ASSERT_TRUE(self);
  SpecParams p;
  p.n_max = 8;
  p.ngram = true;
  SamplerParams greedy;
  greedy.temp = 0;
  greedy.repeat_penalty = 1.0f;
  const std::vector<int32_t> prompt = chat("Copy this text exactly: the red fox and the blue bird sat on the old wall.");
  GenerateParams gp;
  gp.n_predict = 200;
  const Gen plain = run(prompt, greedy, gp, nullptr);
  ASSERT_EQ(plain.reason, StopReason::kEog) << "the test expects the reply to end by itself";
  {
    Speculator spec(p, self.get(), 0);
    const Gen got = run(prompt, greedy, gp, &spec);
    expect_same(plain, got, "end of generation");
    EXPECT_GT(got.spec.n_accepted, 0);
  }
  // Stop strings cut inside accepted runs: every word boundary of the reply in turn.
  int n_stops = 0;
  for (size_t at = 3; at + 2 < plain.text.size(); at += 5) {
    GenerateParams gs = gp;
    gs.stop = {plain.text.substr(at, 3)};
    const Gen a = run(prompt, greedy, gs, nullptr);
    Speculator spec(p, self.get(), 0);
    const Gen b = run(prompt, greedy, gs, &spec);
    expect_same(a, b, "stop '" + gs.stop[0] + "'");
    EXPECT_EQ(b.reason, StopReason::kStopString);
    ++n_stops;
  }
  EXPECT_GE(n_stops, 5);
  // The length limit and the context end inside runs: every -n up to the reply's length, and a
  // context that fills up (n_predict -1) right after the prompt.
  for (int n = 1; n <= static_cast<int>(plain.tokens.size()); n += 3) {
    GenerateParams gn = gp;
    gn.n_predict = n;
    const Gen a = run(prompt, greedy, gn, nullptr);
    Speculator spec(p, self.get(), 0);
    const Gen b = run(prompt, greedy, gn, &spec);
    expect_same(a, b, fmt::format("-n {}", n));
  }
  SamplerParams sampled;
  sampled.seed = 3;
  const std::vector<int32_t> filler = chat(std::string(60, 'a') + " Write a long essay.");
  for (int fill : {kCtx - static_cast<int>(filler.size()) - 7, kCtx - static_cast<int>(filler.size()) - 2}) {
    // Pre-fill the cache so that only a few positions stay free.
    session_->clear();
    std::vector<int32_t> pad(static_cast<size_t>(fill), tok_->find_token("a"));
    ASSERT_TRUE(session_->decode(pad, 1));
    GenerateParams gc;
    gc.n_predict = -1;
    gc.ignore_eog = true;
    const Gen a = run(filler, sampled, gc, nullptr, pad);
    session_->clear();
    ASSERT_TRUE(session_->decode(pad, 1));
    Speculator spec(p, self.get(), 0);
    const Gen b = run(filler, sampled, gc, &spec, pad);
    expect_same(a, b, fmt::format("context full after {} cached", fill));
    EXPECT_EQ(b.reason, StopReason::kContextFull);
  }
}

TEST_F(SpecIdentity, EmptyModelDraftsFallBackToNgram) {
  // p_min 1: the draft model never proposes anything; the n-gram draft must still be used (a
  // model that drafts nothing is a miss, not a better source).
  auto self = draft(model_);
  ASSERT_TRUE(self);
  SpecParams p;
  p.ngram = true;
  p.p_min = 1.0f;
  SamplerParams greedy;
  greedy.temp = 0;
  greedy.repeat_penalty = 1.0f;
  const std::vector<int32_t> prompt = chat(
      "Repeat the following text word for word:\n\nThe old lighthouse stood at the edge of the cliff for more than a "
      "hundred years. Every night its keeper climbed the narrow stairs and polished the great lens.");
  GenerateParams gp;
  gp.n_predict = 40;
  const Gen plain = run(prompt, greedy, gp, nullptr);
  Speculator spec(p, self.get(), 0);
  const Gen got = run(prompt, greedy, gp, &spec);
  expect_same(plain, got, "p_min 1 + n-gram");
  SpecParams only = p;
  only.model = false;
  Speculator ngram(only, nullptr, 0);
  const Gen alone = run(prompt, greedy, gp, &ngram);
  expect_same(plain, alone, "n-gram alone");
  const size_t ng = static_cast<size_t>(DraftSource::kNgram);
  EXPECT_EQ(got.spec.drafted_by[static_cast<size_t>(DraftSource::kModel)], 0);
  EXPECT_GT(alone.spec.drafted_by[ng], 10);
  EXPECT_GE(got.spec.drafted_by[ng] * 10, alone.spec.drafted_by[ng] * 8)
      << "with a silent draft model, n-gram drafts at most a few steps fewer than alone";
}

TEST_F(SpecIdentity, ConversationTruncationAndRemovedRange) {
  // Three turns on one session, each reply regenerated once (truncate back, same RNG state as
  // plain), then a range removed from the middle: the draft model follows by itself.
  auto self = draft(model_);
  ASSERT_TRUE(self);
  SamplerParams sp;
  sp.seed = 11;
  sp.min_p = 0.0f;  // the chain this conversation was written for (it reuses the draft cache)
  sp.repeat_penalty = 1.1f;
  GenerateParams gp;
  gp.n_predict = 30;
  auto conversation = [&](Speculator* spec) {
    std::vector<Gen> runs;
    session_->clear();
    std::vector<int32_t> cached;
    auto sampler = Sampler::create(sp, tok_->n_vocab());
    const char* users[] = {"Name three colors.", "Now three animals.", "Repeat the colors."};
    for (int t = 0; t < 3; ++t) {
      const std::vector<int32_t> prompt = tok_->encode(
          std::string("<|im_start|>user\n") + users[t] + "<|im_end|>\n<|im_start|>assistant\n", t == 0, true);
      for (int regen = 0; regen < 2; ++regen) {
        const int n_keep = static_cast<int>(cached.size());
        EXPECT_TRUE(session_->truncate(n_keep));
        Gen r;
        auto st = generate(*session_, *tok_, *sampler, prompt, gp, [&](std::string_view s) {
          r.text += s;
          return true;
        }, {}, GenerateSpec{spec, cached});
        EXPECT_TRUE(st) << (st ? "" : st.error().message);
        if (!st) return runs;
        r.tokens = st->tokens;
        r.n_past = session_->n_past();
        runs.push_back(r);
        if (regen == 1) {
          cached.insert(cached.end(), prompt.begin(), prompt.end());
          cached.insert(cached.end(), st->tokens.begin(), st->tokens.begin() + (session_->n_past() - static_cast<int>(cached.size())));
        }
      }
      if (t == 1) {  // a context shift: drop positions 5..25
        EXPECT_TRUE(session_->kv_remove(5, 25));
        cached.erase(cached.begin() + 5, cached.begin() + 25);
      }
    }
    return runs;
  };
  const std::vector<Gen> plain = conversation(nullptr);
  SpecParams p;
  p.ngram = true;
  p.adaptive = false;  // the draft model drafts every step: its cache edits are what is tested
  Speculator spec(p, self.get(), 0);
  const std::vector<Gen> got = conversation(&spec);
  ASSERT_EQ(plain.size(), got.size());
  for (size_t i = 0; i < plain.size(); ++i) expect_same(plain[i], got[i], fmt::format("reply {}", i));
  EXPECT_GT(spec.stats().n_accepted, 0);
  EXPECT_GT(self->n_reused(), 0) << "the removed range should have been removed from the draft cache too";
}

}  // namespace
}  // namespace minfer
