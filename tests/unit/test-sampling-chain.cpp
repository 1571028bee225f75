// The whole chain (sampling/sampler.h): validation, greedy, seeded determinism, frequencies of
// 10k draws against a known distribution, the penalty window, DRY on a repeated sequence,
// mirostat's mu, XTC in the chain, checkpoint/restore.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "sampling/sampler.h"

namespace minfer {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

std::vector<float> ln(std::vector<double> p) {
  std::vector<float> l;
  for (double v : p) l.push_back(static_cast<float>(std::log(v)));
  return l;
}

// Every filter off, penalties off: the draw sees the raw distribution.
SamplerParams plain(int64_t seed = 7) {
  SamplerParams p;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.repeat_penalty = 1.0f;
  p.temp = 1.0f;
  p.seed = seed;
  return p;
}

Sampler make(const SamplerParams& p, int32_t n_vocab) {
  auto s = Sampler::create(p, n_vocab);
  EXPECT_TRUE(s.has_value()) << (s ? "" : s.error().message);
  return std::move(*s);
}

std::string error_of(const SamplerParams& p, int32_t n_vocab = 10) {
  Status st = validate(p, n_vocab);
  return st ? std::string() : st.error().message;
}

TEST(sampling, defaults_follow_the_reference) {
  const SamplerParams p;  // llama.cpp's common_params_sampling defaults
  EXPECT_EQ(p.seed, kSeedRandom);
  EXPECT_EQ(p.temp, 0.8f);
  EXPECT_EQ(p.top_k, 40);
  EXPECT_EQ(p.top_p, 0.95f);
  EXPECT_EQ(p.min_p, 0.05f);
  EXPECT_EQ(p.typical_p, 1.0f);
  EXPECT_EQ(p.repeat_penalty, 1.0f);
  EXPECT_EQ(p.repeat_last_n, 64);
  EXPECT_EQ(p.dry_multiplier, 0.0f);
  EXPECT_EQ(p.dry_base, 1.75f);
  EXPECT_EQ(p.dry_allowed_length, 2);
  EXPECT_EQ(p.dry_penalty_last_n, 64);
  EXPECT_EQ(p.xtc_probability, 0.0f);
  EXPECT_EQ(p.xtc_threshold, 0.5f);
  EXPECT_EQ(p.mirostat, 0);
  EXPECT_EQ(p.mirostat_tau, 5.0f);
  EXPECT_EQ(p.mirostat_eta, 0.1f);
  EXPECT_EQ(p.mirostat_m, 100);
  EXPECT_EQ(p.seed, kSeedRandom);
  EXPECT_EQ(error_of(p), "");
}

TEST(sampling, validate_names_field_value_and_range) {
  struct Case {
    void (*set)(SamplerParams&);
    const char* expect;
  };
  const Case cases[] = {
      {[](SamplerParams& p) { p.top_k = -1; }, "top_k -1 must be an integer >= 0 (0 = off)"},
      {[](SamplerParams& p) { p.top_p = -0.1f; }, "top_p -0.1 must be in [0, 1]"},
      {[](SamplerParams& p) { p.top_p = 1.5f; }, "top_p 1.5 must be in [0, 1]"},
      {[](SamplerParams& p) { p.min_p = 1.5f; }, "min_p 1.5 must be in [0, 1]"},
      {[](SamplerParams& p) { p.typical_p = -0.1f; }, "typical_p -0.1 must be in [0, 1]"},
      {[](SamplerParams& p) { p.temp = -1.0f; }, "temperature -1 must be a finite value >= 0 (0 = greedy)"},
      {[](SamplerParams& p) { p.temp = std::nanf(""); }, "temperature nan must be"},
      {[](SamplerParams& p) { p.repeat_penalty = 0.5f; }, "repeat_penalty 0.5 must be"},
      {[](SamplerParams& p) { p.frequency_penalty = kInf; }, "frequency_penalty inf must be"},
      {[](SamplerParams& p) { p.repeat_last_n = -2; }, "repeat_last_n -2 must be an integer >= -1"},
      {[](SamplerParams& p) { p.dry_multiplier = -1.0f; }, "dry_multiplier -1 must be"},
      {[](SamplerParams& p) { p.dry_base = 0.5f; }, "dry_base 0.5 must be"},
      {[](SamplerParams& p) { p.dry_allowed_length = 0; }, "dry_allowed_length 0 must be"},
      {[](SamplerParams& p) { p.dry_penalty_last_n = -3; }, "dry_penalty_last_n -3"},
      {[](SamplerParams& p) { p.dry_multiplier = 0.8f, p.dry_penalty_last_n = 0; },
       "dry_penalty_last_n 0 leaves DRY nothing"},
      {[](SamplerParams& p) { p.dry_sequence_breakers = {{1}, {}}; }, "breaker 1 is empty"},
      {[](SamplerParams& p) { p.dry_sequence_breakers = {{1, 12}}; },
       "token id 12 is outside the vocabulary [0, 10)"},
      {[](SamplerParams& p) { p.xtc_probability = 2.0f; }, "xtc_probability 2 must be in [0, 1]"},
      {[](SamplerParams& p) { p.xtc_threshold = 0.6f; }, "xtc_threshold 0.6 must be in [0, 0.5]"},
      {[](SamplerParams& p) { p.mirostat = 3; }, "mirostat 3 must be in [0, 2] (0 = off, 1 = v1, 2 = v2)"},
      {[](SamplerParams& p) { p.top_n_sigma = kInf; }, "top_n_sigma inf must be finite"},
      {[](SamplerParams& p) { p.dynatemp_range = -0.5f; }, "dynatemp_range -0.5 must be a finite value >= 0"},
      {[](SamplerParams& p) { p.dynatemp_exponent = -1.0f; }, "dynatemp_exponent -1 must be a finite value >= 0"},
      {[](SamplerParams& p) { p.temp = 3e38f, p.dynatemp_range = 3e38f; }, "is not a finite temperature"},
      {[](SamplerParams& p) { p.mirostat_tau = 0.0f; }, "mirostat_tau 0 must be"},
      {[](SamplerParams& p) { p.mirostat_eta = -1.0f; }, "mirostat_eta -1 must be"},
      {[](SamplerParams& p) { p.mirostat_m = 0; }, "mirostat_m 0 must be an integer >= 1"},
      {[](SamplerParams& p) { p.logit_bias[10] = 1.0f; },
       "logit_bias token id 10 is outside the vocabulary [0, 10)"},
      {[](SamplerParams& p) { p.logit_bias[3] = 150.0f; },
       "logit_bias[3] 150 must be in [-100, 100]"},
      {[](SamplerParams& p) { p.logit_bias[3] = kInf; }, "logit_bias[3] inf must be in"},
      {[](SamplerParams& p) { p.seed = -2; }, "seed -2 must be an integer >= -1"},
  };
  for (const Case& c : cases) {
    SamplerParams p;
    c.set(p);
    const std::string e = error_of(p);
    EXPECT_NE(e.find(c.expect), std::string::npos) << "got: '" << e << "' want: " << c.expect;
    EXPECT_FALSE(Sampler::create(p, 10).has_value());
  }
  SamplerParams ok;  // documented sentinels and edges are accepted
  ok.top_k = 0;
  ok.top_p = 1.0f;
  ok.temp = 0.0f;
  ok.repeat_last_n = -1;
  ok.dry_penalty_last_n = 0;  // fine while DRY is off
  ok.logit_bias[9] = -kInf;
  ok.logit_bias[0] = -100.0f;
  ok.xtc_threshold = 0.5f;
  ok.top_n_sigma = -1.0f;  // llama.cpp's "off"
  ok.dynatemp_exponent = 0.0f;
  ok.seed = 0;
  EXPECT_EQ(error_of(ok), "");
}

TEST(sampling, greedy_at_temperature_zero) {
  SamplerParams p = plain();
  p.temp = 0.0f;
  Sampler s = make(p, 4);
  const Rng before = s.checkpoint().rng;
  EXPECT_EQ(*s.sample(std::vector<float>{0.1f, 2, 2, -1}), 1);  // tie: lowest id
  EXPECT_EQ(s.checkpoint().rng, before);                        // no draw when greedy
  p.logit_bias[1] = -kInf;                                       // greedy respects the bias
  Sampler b = make(p, 4);
  EXPECT_EQ(*b.sample(std::vector<float>{0.1f, 2, 2, -1}), 2);
  EXPECT_EQ(*s.sample(std::vector<float>{std::nanf(""), 0, -1, -2}), 1);  // NaN is masked
}

TEST(sampling, top_n_sigma_and_dynamic_temperature_in_the_chain) {
  // top-n-sigma runs before top-k: logits {4, 2, 0, -2, -4} (sigma 2.83) with n = 1 leave
  // {0, 1}, so a draw never returns 2..4 whatever the seed; the chain names both stages.
  SamplerParams p = plain();
  p.top_k = 0, p.top_p = 1.0f, p.min_p = 0.0f;
  p.top_n_sigma = 1.0f;
  p.dynatemp_range = 0.5f;
  Sampler s = make(p, 5);
  EXPECT_NE(s.describe().find("top-n-sigma 1"), std::string::npos) << s.describe();
  EXPECT_NE(s.describe().find("dynatemp(temp 1, range 0.5, exponent 1)"), std::string::npos) << s.describe();
  const std::vector<float> l = {4, 2, 0, -2, -4};
  for (int i = 0; i < 200; ++i) {
    const int32_t t = *s.sample(l);
    EXPECT_TRUE(t == 0 || t == 1) << t;
  }
  // The draw's temperature is the dynamic one: survivors {0, 1} at temperature 1 have
  // p = {0.881, 0.119}, H / ln 2 = 0.527; temp 1 +- 0.5 spans [0.5, 1.5], so T = 0.5 + 1.0 *
  // 0.527 = 1.027 and p(1) at T is 1 / (1 + e^(2 / T)) = 0.1248 (0.119 at T = 1).
  EXPECT_NEAR(s.last_probability(1), 1.0 / (1.0 + std::exp(2.0 / 1.0271)), 2e-4);
  // temp <= range and one sure survivor: the dynamic temperature is 0, the top token is taken
  // with no draw (a plain draw at 0.5 would pick the same token but advance the RNG).
  p.top_n_sigma = -1.0f;
  p.temp = 0.5f;
  Sampler z = make(p, 3);
  for (int i = 0; i < 20; ++i) {
    const Rng before = z.checkpoint().rng;
    EXPECT_EQ(*z.sample(std::vector<float>{-1000, 0, -1000}), 1);
    EXPECT_EQ(z.checkpoint().rng, before);
  }
  EXPECT_EQ(z.last_probability(1), 1.0f);
  // Mirostat ignores the dynamic temperature as it ignores temp.
  p.mirostat = 2;
  EXPECT_EQ(make(p, 3).describe().find("dynatemp"), std::string::npos);
}

TEST(sampling, top_n_sigma_runs_before_top_k) {
  // Logits {4, 3.9, 0, 0, 0}: over all five sigma = 1.94, so n = 1 keeps {0, 1} and top-k 2
  // keeps both. Had top-k run first, sigma over {4, 3.9} would be 0.05 and only token 0 would
  // stay. At temperature 1, p(1) = 0.475: it must come up in 200 draws.
  SamplerParams p = plain();
  p.top_k = 2, p.top_p = 1.0f, p.min_p = 0.0f;
  p.top_n_sigma = 1.0f;
  Sampler s = make(p, 5);
  const std::vector<float> l = {4, 3.9f, 0, 0, 0};
  int ones = 0;
  for (int i = 0; i < 200; ++i) {
    const int32_t t = *s.sample(l);
    EXPECT_TRUE(t == 0 || t == 1) << t;
    ones += t == 1;
  }
  EXPECT_GT(ones, 40);
}

TEST(sampling, greedy_sees_penalties) {
  // Repeat penalty 1.1 after token 0: 2 / 1.1 = 1.82 < 1.9, so greedy picks token 1.
  SamplerParams p;
  p.temp = 0.0f;
  p.repeat_penalty = 1.1f;
  Sampler s = make(p, 3);
  s.accept(0);
  EXPECT_EQ(*s.sample(std::vector<float>{2.0f, 1.9f, 0.0f}), 1);
}

TEST(sampling, all_masked_is_an_error) {
  for (float temp : {0.0f, 1.0f}) {
    SamplerParams p = plain();
    p.temp = temp;
    for (int32_t id = 0; id < 3; ++id) p.logit_bias[id] = -kInf;
    Sampler s = make(p, 3);
    auto t = s.sample(std::vector<float>{1, 2, 3});
    ASSERT_FALSE(t.has_value());
    EXPECT_NE(t.error().message.find("all 3 tokens are masked"), std::string::npos);
  }
}

// A fixed pseudo-random logits row per step, so runs can be compared.
std::vector<float> step_logits(int step, int32_t n_vocab) {
  std::vector<float> l(static_cast<size_t>(n_vocab));
  uint64_t s = static_cast<uint64_t>(step) * 7919u + 1;
  for (auto& v : l) v = static_cast<float>(splitmix64_next(s) % 1000) / 250.0f;  // [0, 4)
  return l;
}

std::vector<int32_t> run(Sampler& s, int n, int first_step = 0) {
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) out.push_back(*s.sample_and_accept(step_logits(first_step + i, 50)));
  return out;
}

TEST(sampling, fixed_seed_is_deterministic) {
  SamplerParams p;  // the default chain, everything that draws included
  p.seed = 42;
  p.xtc_probability = 0.5f;
  p.xtc_threshold = 0.1f;
  p.min_p = 0.05f;
  Sampler a = make(p, 50), b = make(p, 50);
  const std::vector<int32_t> ra = run(a, 64);
  EXPECT_EQ(ra, run(b, 64));
  a.reset();  // reset re-seeds: the first run again
  EXPECT_EQ(run(a, 64), ra);
  p.seed = 43;
  Sampler c = make(p, 50);
  EXPECT_NE(run(c, 64), ra);
}

TEST(sampling, random_seed_is_reported_and_replays) {
  Sampler a = make(plain(kSeedRandom), 50);
  ASSERT_LE(a.seed(), static_cast<uint64_t>(std::numeric_limits<int64_t>::max()));
  Sampler b = make(plain(static_cast<int64_t>(a.seed())), 50);  // the printed seed replays
  EXPECT_EQ(run(a, 32), run(b, 32));
}

TEST(sampling, frequencies_match_distribution) {
  // p = {0.1, 0.2, 0.3, 0.4}. 10k draws: the standard deviation of a frequency is at most
  // sqrt(0.25 / 10000) = 0.005, so 0.02 is a 4-sigma band (and the seed is fixed).
  const std::vector<float> l = ln({0.1, 0.2, 0.3, 0.4});
  {
    Sampler s = make(plain(123), 4);
    int count[4] = {};
    for (int i = 0; i < 10000; ++i) ++count[*s.sample(l)];
    const double want[4] = {0.1, 0.2, 0.3, 0.4};
    for (int t = 0; t < 4; ++t) EXPECT_NEAR(count[t] / 1e4, want[t], 0.02) << t;
  }
  {
    // Temperature 2: p^(1/2) = {0.3162, 0.4472, 0.5477, 0.6325} / 1.9436
    //              = {0.1627, 0.2301, 0.2818, 0.3254}.
    SamplerParams p = plain(321);
    p.temp = 2.0f;
    Sampler s = make(p, 4);
    int count[4] = {};
    for (int i = 0; i < 10000; ++i) ++count[*s.sample(l)];
    const double want[4] = {0.1627, 0.2301, 0.2818, 0.3254};
    for (int t = 0; t < 4; ++t) EXPECT_NEAR(count[t] / 1e4, want[t], 0.02) << t;
  }
  {
    // top_k 2 then top_p 0.5: top-2 leaves {0.3, 0.4} -> {3/7, 4/7}; 4/7 = 0.571 >= 0.5, so
    // only token 3 survives top-p.
    SamplerParams p = plain(5);
    p.top_k = 2;
    p.top_p = 0.5f;
    Sampler s = make(p, 4);
    for (int i = 0; i < 100; ++i) EXPECT_EQ(*s.sample(l), 3);
  }
}

TEST(sampling, penalty_window_last_n) {
  // Logits {3, 2.9, 2.8, 0}, repeat 2, greedy; accepted tokens 0 then 1.
  //   last_n 1:  window {1}     -> {3, 1.45, 2.8}      -> 0
  //   last_n 2:  window {0, 1}  -> {1.5, 1.45, 2.8}    -> 2
  //   last_n 0:  off            -> 0
  //   last_n -1: everything     -> 2
  const std::vector<float> l = {3.0f, 2.9f, 2.8f, 0.0f};
  const std::pair<int32_t, int32_t> cases[] = {{1, 0}, {2, 2}, {0, 0}, {-1, 2}};
  for (auto [last_n, want] : cases) {
    SamplerParams p = plain();
    p.temp = 0.0f;
    p.repeat_penalty = 2.0f;
    p.repeat_last_n = last_n;
    Sampler s = make(p, 4);
    const std::vector<int32_t> prompt = {0, 1};
    s.accept_prompt(prompt);
    EXPECT_EQ(*s.sample(l), want) << "last_n " << last_n;
  }
}

TEST(sampling, window_keeps_the_last_n_over_long_runs) {
  SamplerParams p;  // repeat_last_n 64
  p.repeat_penalty = 1.1f;  // a penalty stage keeps the window
  Sampler s = make(p, 5000);
  for (int32_t t = 0; t < 3000; ++t) s.accept(t);
  const auto w = s.window(64);
  ASSERT_EQ(w.size(), 64u);
  EXPECT_EQ(w.front(), 3000 - 64);
  EXPECT_EQ(w.back(), 2999);
  EXPECT_LE(s.checkpoint().history.size(), 2u * 64 + 64);  // trimmed, not growing
  p.repeat_last_n = -1;
  Sampler all = make(p, 5000);
  for (int32_t t = 0; t < 3000; ++t) all.accept(t);
  EXPECT_EQ(all.window(-1).size(), 3000u);
}

TEST(sampling, dry_breaks_a_repeated_sequence) {
  // Prompt 1 2 3 4 1 2 3; greedy would continue with 4 (logit 1.0 vs 0.5 for token 5). DRY
  // (multiplier 1, base 2, allowed 2) sees "1 2 3" repeated (L = 3): 4 loses 2^1 = 2 -> -1.
  const std::vector<int32_t> prompt = {1, 2, 3, 4, 1, 2, 3};
  const std::vector<float> l = {0, 0, 0, 0, 1.0f, 0.5f};
  SamplerParams p = plain();
  p.temp = 0.0f;
  Sampler off = make(p, 6);
  off.accept_prompt(prompt);
  EXPECT_EQ(*off.sample(l), 4);
  p.dry_multiplier = 1.0f;
  p.dry_base = 2.0f;
  Sampler on = make(p, 6);
  on.accept_prompt(prompt);
  EXPECT_EQ(*on.sample(l), 5);
  p.dry_penalty_last_n = 3;  // window "1 2 3" holds no earlier occurrence
  Sampler narrow = make(p, 6);
  narrow.accept_prompt(prompt);
  EXPECT_EQ(*narrow.sample(l), 4);
}

TEST(sampling, mirostat_v2_updates_mu_on_accept) {
  // tau 5, eta 0.1: mu starts at 2 * tau = 10. p = {1/2, 1/4, 1/8, 1/8} with surprises
  // {1, 2, 3, 3} bits, all <= 10, so nothing is cut and mu' = 10 - 0.1 * (s - 5).
  const std::vector<float> l = ln({0.5, 0.25, 0.125, 0.125});
  SamplerParams p = plain(11);
  p.mirostat = 2;
  p.temp = 3.0f;  // ignored by mirostat
  Sampler s = make(p, 4);
  EXPECT_FLOAT_EQ(s.mirostat_mu(), 10.0f);
  const int32_t t = *s.sample(l);
  EXPECT_FLOAT_EQ(s.mirostat_mu(), 10.0f);  // sample() alone changes nothing
  s.accept(t);
  const float surprise[4] = {1, 2, 3, 3};
  EXPECT_NEAR(s.mirostat_mu(), 10.0f - 0.1f * (surprise[t] - 5.0f), 1e-5);
  // mu 1.5 keeps token 0 alone (surprise 1; the next is 2). Renormalized p = 1, surprise 0:
  // mu' = 1.5 - 0.1 * (0 - 5) = 2.0.
  s.set_mirostat_mu(1.5f);
  EXPECT_EQ(*s.sample_and_accept(l), 0);
  EXPECT_NEAR(s.mirostat_mu(), 2.0f, 1e-6);
  // A token outside the last distribution, or a prompt token: no update.
  s.set_mirostat_mu(1.5f);
  (void)s.sample(l);
  s.accept(2);
  EXPECT_FLOAT_EQ(s.mirostat_mu(), 1.5f);
}

TEST(sampling, mirostat_v1_draws_within_k) {
  // Zipf s = 2 over 8 tokens with mu = 3 gives k = 3 (see the stage test): only the top three.
  std::vector<float> l(8);
  for (int r = 0; r < 8; ++r) l[r] = static_cast<float>(-2.0 * std::log(r + 1.0));
  SamplerParams p = plain(9);
  p.mirostat = 1;
  Sampler s = make(p, 8);
  for (int i = 0; i < 200; ++i) {
    s.set_mirostat_mu(3.0f);
    const int32_t t = *s.sample(l);
    EXPECT_LT(t, 3);
  }
}

TEST(sampling, xtc_in_chain_never_picks_the_top_choice) {
  // p = {0.4, 0.3, 0.2, 0.1}, threshold 0.25, probability 1: token 0 is always excluded and the
  // rest renormalize to {0.3, 0.2, 0.1} / 0.6 = {0.5, 0.333, 0.167}.
  SamplerParams p = plain(77);
  p.xtc_probability = 1.0f;
  p.xtc_threshold = 0.25f;
  Sampler s = make(p, 4);
  int count[4] = {};
  for (int i = 0; i < 10000; ++i) ++count[*s.sample(ln({0.4, 0.3, 0.2, 0.1}))];
  EXPECT_EQ(count[0], 0);
  EXPECT_NEAR(count[1] / 1e4, 0.5, 0.02);
  EXPECT_NEAR(count[2] / 1e4, 1.0 / 3, 0.02);
  EXPECT_NEAR(count[3] / 1e4, 1.0 / 6, 0.02);
}

TEST(sampling, describe_lists_active_stages) {
  SamplerParams p;
  p.seed = 42;
  EXPECT_EQ(make(p, 1000).describe(), "top-k 40 -> top-p 0.95 -> min-p 0.05 -> temp 0.8 -> draw(seed 42)");
  p.repeat_penalty = 1.1f;
  EXPECT_EQ(make(p, 1000).describe(),
            "penalties(last_n 64, repeat 1.1, frequency 0, presence 0) -> top-k 40 -> "
            "top-p 0.95 -> min-p 0.05 -> temp 0.8 -> draw(seed 42)");
  p.temp = 0.0f;
  p.repeat_penalty = 1.0f;
  EXPECT_EQ(make(p, 1000).describe(), "greedy");
  p.temp = 1.0f;
  p.mirostat = 2;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  EXPECT_EQ(make(p, 1000).describe(), "mirostat v2(tau 5, eta 0.1) -> draw(seed 42)");
}

// What llama-server's post_sampling_probs shows: the distribution after the filters, at the
// draw's temperature, renormalised; greedy is the chosen token at 1.
TEST(sampling, last_distribution_is_what_the_draw_saw) {
  SamplerParams p = plain();
  p.top_k = 3;
  p.temp = 0.5f;
  Sampler s = make(p, 5);
  EXPECT_TRUE(s.last_distribution(10).empty());
  const std::vector<float> logits = ln({0.1, 0.4, 0.05, 0.3, 0.15});
  ASSERT_TRUE(s.sample(logits).has_value());
  const auto d = s.last_distribution(10);
  ASSERT_EQ(d.size(), 3u);  // top-k 3: ids 1, 3, 4
  // At temperature 0.5 the weights are p^2: 0.16, 0.09, 0.0225 of 0.2725.
  EXPECT_EQ(d[0].first, 1);
  EXPECT_NEAR(d[0].second, 0.16 / 0.2725, 1e-6);
  EXPECT_EQ(d[1].first, 3);
  EXPECT_NEAR(d[1].second, 0.09 / 0.2725, 1e-6);
  EXPECT_EQ(d[2].first, 4);
  EXPECT_NEAR(d[2].second, 0.0225 / 0.2725, 1e-6);
  EXPECT_EQ(s.last_distribution(2).size(), 2u);
  EXPECT_NEAR(s.last_probability(3), 0.09 / 0.2725, 1e-6);
  EXPECT_EQ(s.last_probability(0), 0.0f);  // cut by top-k

  SamplerParams g = plain();
  g.temp = 0.0f;
  Sampler greedy = make(g, 5);
  ASSERT_EQ(*greedy.sample(logits), 1);
  const auto one = greedy.last_distribution(10);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].first, 1);
  EXPECT_EQ(one[0].second, 1.0f);
  EXPECT_EQ(greedy.last_probability(1), 1.0f);
  EXPECT_EQ(greedy.last_probability(3), 0.0f);
}

TEST(sampling, checkpoint_restore_replays) {
  SamplerParams p;
  p.seed = 5;
  p.repeat_penalty = 1.1f;
  Sampler s = make(p, 50);
  run(s, 5);
  const SamplerState cp = s.checkpoint();
  const std::vector<int32_t> first = run(s, 10, 100);
  s.restore(cp);
  EXPECT_EQ(run(s, 10, 100), first);
  EXPECT_EQ(s.window(64).size(), 15u);  // nothing entered the window twice
}

}  // namespace
}  // namespace minfer
