// Each sampler stage (sampling/stages.h) on small vocabularies whose expected result is worked
// out by hand in the comments. Logits are often written as ln(p) so the probabilities are exact
// in the comments; thresholds are chosen away from boundaries that float rounding could flip.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <limits>
#include <vector>

#include "sampling/rng.h"
#include "sampling/stages.h"

namespace minfer {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

std::vector<float> ln(std::vector<double> p) {
  std::vector<float> l;
  for (double v : p) l.push_back(static_cast<float>(std::log(v)));
  return l;
}

Candidates make(const std::vector<float>& logits) {
  Candidates c;
  c.load(logits);
  c.collect();
  return c;
}

using Ids = std::vector<int32_t>;

// ---- RNG: the published reference outputs -------------------------------------------------

TEST(sampling, rng_xoshiro_reference_vector) {
  // State {1,2,3,4}. Output 1 = rotl(s1*5, 7)*9 = rotl(10, 7)*9 = 1280*9 = 11520. The update
  // makes s1 = 2^(3^1) = 0, so output 2 = 0; then s1 = 262149 and output 3 = 262149*5*128*9.
  Rng r = Rng::from_state({1, 2, 3, 4});
  EXPECT_EQ(r.next_u64(), 11520u);
  EXPECT_EQ(r.next_u64(), 0u);
  EXPECT_EQ(r.next_u64(), 1509978240u);
}

TEST(sampling, rng_splitmix_reference_vector) {
  uint64_t s = 0;  // splitmix64's published first outputs from seed 0
  EXPECT_EQ(splitmix64_next(s), 0xe220a8397b1dcdafull);
  EXPECT_EQ(splitmix64_next(s), 0x6e789e6aa1b965f4ull);
  EXPECT_EQ(splitmix64_next(s), 0x06c45d188009454full);
}

TEST(sampling, rng_seeding_and_double_range) {
  Rng a(42), b(42), c(43);
  uint64_t s = 42;
  EXPECT_EQ(a.state()[0], splitmix64_next(s));  // state = consecutive splitmix64 outputs
  for (int i = 0; i < 1000; ++i) {
    const double u = a.next_double();
    EXPECT_EQ(u, b.next_double());
    EXPECT_GE(u, 0.0);
    EXPECT_LT(u, 1.0);
  }
  EXPECT_NE(Rng(42).next_u64(), c.next_u64());
}

// ---- 1. logit bias ------------------------------------------------------------------------

TEST(sampling, logit_bias_adds_and_bans) {
  std::vector<float> l = {1, 2, 3, 4};
  sampling::logit_bias(l, {{0, 1.5f}, {3, -kInf}, {9, 5.0f}, {-1, 5.0f}});  // 9, -1: skipped
  EXPECT_EQ(l, (std::vector<float>{2.5f, 2, 3, -kInf}));
}

// ---- 2. penalties -------------------------------------------------------------------------

TEST(sampling, repeat_penalty_halves_positive_doubles_negative) {
  // repeat 2: 4 -> 4/2 = 2; -2 -> -2*2 = -4; 0 counts as non-positive: 0*2 = 0; id 3 unseen.
  std::vector<float> l = {4, -2, 0, 1};
  const Ids window = {0, 1, 2, 0};  // a repeat inside the window is still one application
  sampling::penalties(l, window, 2.0f, 0.0f, 0.0f);
  EXPECT_EQ(l, (std::vector<float>{2, -4, 0, 1}));
}

TEST(sampling, penalties_formula_and_order) {
  // frequency 0.5, presence 0.25, repeat 2; window counts: id0 x2, id1 x1, id3 x1 (7 and -2 lie
  // outside the 5-token row and are skipped).
  //   id0:  2   - (2*0.5 + 0.25) = 0.75  > 0 -> /2 = 0.375
  //   id1: -1   - (1*0.5 + 0.25) = -1.75     -> *2 = -3.5
  //   id3:  3   - 0.75           = 2.25      -> /2 = 1.125
  //   id2, id4 untouched.
  std::vector<float> l = {2, -1, 0.5f, 3, 1};
  const Ids window = {0, 0, 1, 3, 7, -2};
  sampling::penalties(l, window, 2.0f, 0.5f, 0.25f);
  EXPECT_EQ(l, (std::vector<float>{0.375f, -3.5f, 0.5f, 1.125f, 1}));
}

TEST(sampling, penalties_subtraction_can_flip_sign_before_repeat) {
  // 0.5 - 1*1 = -0.5 is now negative, so repeat 2 multiplies: -1 (the subtraction comes first).
  std::vector<float> l = {0.5f, 1};
  sampling::penalties(l, Ids{0}, 2.0f, 1.0f, 0.0f);
  EXPECT_EQ(l[0], -1.0f);
  EXPECT_EQ(l[1], 1.0f);
}

TEST(sampling, penalties_negative_frequency_encourages) {
  std::vector<float> l = {1, 1};
  sampling::penalties(l, Ids{1, 1, 1}, 1.0f, -0.5f, 0.0f);  // 1 - 3*(-0.5) = 2.5
  EXPECT_EQ(l, (std::vector<float>{1, 2.5f}));
}

// ---- 3. DRY -------------------------------------------------------------------------------

std::vector<float> dry_on(const Ids& window, int32_t n_vocab, float mult, float base,
                          int32_t allowed, const std::vector<Ids>& breakers = {}) {
  std::vector<float> l(static_cast<size_t>(n_vocab), 0.0f);
  sampling::dry(l, window, mult, base, allowed, breakers);
  return l;
}

TEST(sampling, dry_penalizes_continuation_of_repeat) {
  // Window 1 2 3 4 1 2 3: its suffix "1 2 3" also ends at position 2, followed by 4. No other
  // earlier position ends with the last token 3, so only token 4 is hit, with L = 3:
  // penalty = 1 * 2^(3 - 2) = 2.
  const Ids w = {1, 2, 3, 4, 1, 2, 3};
  EXPECT_EQ(dry_on(w, 6, 1.0f, 2.0f, 2), (std::vector<float>{0, 0, 0, 0, -2, 0}));
  // allowed_length 3: 2^0 = 1. allowed_length 4 > L: nothing.
  EXPECT_EQ(dry_on(w, 6, 1.0f, 2.0f, 3), (std::vector<float>{0, 0, 0, 0, -1, 0}));
  EXPECT_EQ(dry_on(w, 6, 1.0f, 2.0f, 4), std::vector<float>(6, 0.0f));
  // multiplier scales: 0.8 * 1.75^1 = 1.4.
  EXPECT_FLOAT_EQ(dry_on(w, 6, 0.8f, 1.75f, 2)[4], -1.4f);
}

TEST(sampling, dry_overlapping_run_uses_longest_match) {
  // 4 4 4 4: the suffix matches 3 tokens ending at position 2 (then 4 follows), 2 ending at
  // position 1, 1 at position 0. The longest, 3, counts: 1 * 2^(3-2) = 2 on token 4.
  EXPECT_EQ(dry_on({4, 4, 4, 4}, 5, 1.0f, 2.0f, 2), (std::vector<float>{0, 0, 0, 0, -2}));
}

TEST(sampling, dry_breaker_caps_match_length) {
  // 1 8 2 3 4 1 8 2 3: without breakers the suffix "1 8 2 3" recurs before 4: L = 4, 2^2 = 4.
  const Ids w = {1, 8, 2, 3, 4, 1, 8, 2, 3};
  EXPECT_EQ(dry_on(w, 9, 1.0f, 2.0f, 2)[4], -4.0f);
  // Breaker {8}: its last occurrence is at position 6, two tokens follow, so L = min(4, 2) = 2
  // and the penalty is 2^0 = 1.
  EXPECT_EQ(dry_on(w, 9, 1.0f, 2.0f, 2, {{8}})[4], -1.0f);
  // Two-token breaker {1, 8} ends at position 6 as well: same cap.
  EXPECT_EQ(dry_on(w, 9, 1.0f, 2.0f, 2, {{1, 8}})[4], -1.0f);
  // {8, 1} never occurs: no cap.
  EXPECT_EQ(dry_on(w, 9, 1.0f, 2.0f, 2, {{8, 1}})[4], -4.0f);
  // Breaker {3} is the last token: nothing may repeat, no penalty at all.
  EXPECT_EQ(dry_on(w, 9, 1.0f, 2.0f, 2, {{3}}), std::vector<float>(9, 0.0f));
}

TEST(sampling, dry_single_token_breaker_is_never_penalized) {
  // 1 2 7 1 2: "1 2" recurs before 7 (L = 2 = allowed, penalty 1). With {7} as a breaker, the
  // cap is 2 (tokens after position 2) so L is still 2, but 7 itself is exempt.
  const Ids w = {1, 2, 7, 1, 2};
  EXPECT_EQ(dry_on(w, 8, 1.0f, 2.0f, 2)[7], -1.0f);
  EXPECT_EQ(dry_on(w, 8, 1.0f, 2.0f, 2, {{7}}), std::vector<float>(8, 0.0f));
}

TEST(sampling, dry_exponent_is_clamped) {
  // 400 copies of token 1: L = 399, 1.75^397 overflows float; the clamp keeps it finite.
  const Ids w(400, 1);
  const std::vector<float> l = dry_on(w, 2, 0.8f, 1.75f, 2);
  EXPECT_TRUE(std::isfinite(l[1]));
  EXPECT_LT(l[1], -1e37f);
  EXPECT_EQ(l[0], 0.0f);
}

// ---- greedy -------------------------------------------------------------------------------

TEST(sampling, argmax_lowest_id_on_ties) {
  EXPECT_EQ(sampling::argmax(std::vector<float>{0.1f, 2, 2, -1}), 1);
  EXPECT_EQ(sampling::argmax(std::vector<float>{-kInf, -kInf}), -1);
  EXPECT_EQ(sampling::argmax(std::vector<float>{}), -1);
}

TEST(sampling, load_masks_nan) {
  Candidates c = make({std::nanf(""), 1, -kInf, 0});
  EXPECT_EQ(c.ids, (Ids{1, 3}));
}

TEST(sampling, probabilities_with_temperature) {
  // logits 0 and 2 ln 2: exp gives 1 : 4 -> {0.2, 0.8}; at T = 2, 1 : 2 -> {1/3, 2/3};
  // at T = 0.5, 1 : 16 -> {1/17, 16/17}.
  Candidates c = make({0.0f, static_cast<float>(2 * std::log(2.0))});
  auto p = sampling::probabilities(c, 1.0f);
  EXPECT_NEAR(p[0], 0.2, 1e-6);
  EXPECT_NEAR(p[1], 0.8, 1e-6);
  p = sampling::probabilities(c, 2.0f);
  EXPECT_NEAR(p[0], 1.0 / 3, 1e-6);
  p = sampling::probabilities(c, 0.5f);
  EXPECT_NEAR(p[0], 1.0 / 17, 1e-6);
}

// ---- 6. top-k -----------------------------------------------------------------------------

TEST(sampling, top_k_basic) {
  // Ranking: id1 (3), id3 (3, after id1 on the tie), id2 (2), id0 (1), id4 (0).
  const std::vector<float> l = {1, 3, 2, 3, 0};
  Candidates c = make(l);
  sampling::top_k(c, 2);
  EXPECT_EQ(c.ids, (Ids{1, 3}));
  c = make(l);
  sampling::top_k(c, 3);
  EXPECT_EQ(c.ids, (Ids{1, 2, 3}));
  EXPECT_EQ(c.logits, l);  // masked by the id list, never rewritten
}

TEST(sampling, top_k_ties_keep_lower_ids_and_off_values) {
  Candidates c = make({5, 1, 5, 5});
  sampling::top_k(c, 2);  // three 5s, two slots: ids 0 and 2
  EXPECT_EQ(c.ids, (Ids{0, 2}));
  for (int32_t k : {0, 4, 10}) {
    c = make({5, 1, 5, 5});
    sampling::top_k(c, k);
    EXPECT_EQ(c.ids, (Ids{0, 1, 2, 3})) << k;
  }
}

// ---- 7. typical ---------------------------------------------------------------------------

TEST(sampling, typical_keeps_tokens_near_entropy) {
  // p = {1/2, 1/4, 1/8, 1/8}. H = (1/2*1 + 1/4*2 + 2*1/8*3) ln 2 = 1.75 ln 2.
  // -ln p = {1, 2, 3, 3} ln 2, so |-ln p - H| = {0.75, 0.25, 1.25, 1.25} ln 2.
  // Ranking: id1, id0, id2, id3 (tie keeps id order). Cumulative mass: 0.25, 0.75, 0.875, 1.
  const std::vector<float> l = ln({0.5, 0.25, 0.125, 0.125});
  Candidates c = make(l);
  sampling::typical(c, 0.5f);  // 0.75 is the first to exceed 0.5
  EXPECT_EQ(c.ids, (Ids{0, 1}));
  c = make(l);
  sampling::typical(c, 0.2f);  // 0.25 > 0.2 already: the most likely token is dropped
  EXPECT_EQ(c.ids, (Ids{1}));
  c = make(l);
  sampling::typical(c, 0.8f);  // 0.875 > 0.8 after id2; id3 loses the tie
  EXPECT_EQ(c.ids, (Ids{0, 1, 2}));
  c = make(l);
  sampling::typical(c, 1.0f);  // off
  EXPECT_EQ(c.ids.size(), 4u);
}

// ---- 8. top-p -----------------------------------------------------------------------------

TEST(sampling, top_p_shortest_prefix_reaching_p) {
  // id: 0 -> 1/8, 1 -> 1/2, 2 -> 1/8, 3 -> 1/4. Ranking id1, id3, id0, id2 (tie by id).
  // Cumulative: 0.5, 0.75, 0.875, 1.
  const std::vector<float> l = ln({0.125, 0.5, 0.125, 0.25});
  Candidates c = make(l);
  sampling::top_p(c, 0.7f);
  EXPECT_EQ(c.ids, (Ids{1, 3}));
  c = make(l);
  sampling::top_p(c, 0.8f);
  EXPECT_EQ(c.ids, (Ids{0, 1, 3}));
  c = make(l);
  sampling::top_p(c, 0.3f);
  EXPECT_EQ(c.ids, (Ids{1}));
  c = make(l);
  sampling::top_p(c, 1.0f);
  EXPECT_EQ(c.ids.size(), 4u);
  EXPECT_EQ(c.logits, l);  // logits untouched (no probabilities written back)
}

TEST(sampling, top_p_large_nucleus) {
  // 3000 equal logits: each 1/3000. p = 0.5005 needs 1502 tokens (1501/3000 = 0.50033 < p,
  // 1502/3000 = 0.50067 >= p); ties keep ids 0..1501.
  Candidates c = make(std::vector<float>(3000, 0.25f));
  sampling::top_p(c, 0.5005f);
  ASSERT_EQ(c.ids.size(), 1502u);
  EXPECT_EQ(c.ids.front(), 0);
  EXPECT_EQ(c.ids.back(), 1501);
}

// Reference implementations by full sort, for the randomized comparison below.
Ids sorted_prefix(const Candidates& c, const std::vector<double>& key, double p, bool strict) {
  const std::vector<double> prob = sampling::probabilities(c);
  std::vector<size_t> order(c.ids.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return key[a] < key[b] || (key[a] == key[b] && a < b);
  });
  Ids kept;
  double cum = 0.0;
  for (size_t i : order) {
    kept.push_back(c.ids[i]);
    cum += prob[i];
    if (strict ? cum > p : cum >= p) break;
  }
  std::sort(kept.begin(), kept.end());
  return kept;
}

TEST(sampling, top_p_and_typical_match_a_full_sort) {
  // The selection works by bucketing; a plain sort-and-accumulate must keep the same set.
  Rng rng(31);
  for (size_t n : {10u, 100u, 5000u}) {
    for (double spread : {0.05, 3.0, 30.0, 2000.0}) {  // 2000: many p underflow to 0
      for (int iter = 0; iter < 10; ++iter) {
        std::vector<float> l(n);
        for (float& v : l) v = static_cast<float>((rng.next_double() - 0.5) * spread);
        l[rng.next_u64() % n] = l[rng.next_u64() % n];  // a tie now and then
        const float p = static_cast<float>(0.05 + 0.9 * rng.next_double());
        Candidates c = make(l);
        const std::vector<double> prob = sampling::probabilities(c);
        std::vector<double> key(n);
        for (size_t i = 0; i < n; ++i) key[i] = -static_cast<double>(l[i]);
        Ids want = sorted_prefix(c, key, p, false);
        sampling::top_p(c, p);
        EXPECT_EQ(c.ids, want) << "top_p n " << n << " spread " << spread << " p " << p;
        c = make(l);
        double h = 0.0;
        for (double q : prob) h -= q > 0.0 ? q * std::log(q) : 0.0;
        for (size_t i = 0; i < n; ++i) key[i] = std::fabs(-std::log(prob[i]) - h);
        want = sorted_prefix(c, key, p, true);
        sampling::typical(c, p);
        EXPECT_EQ(c.ids, want) << "typical n " << n << " spread " << spread << " p " << p;
      }
    }
  }
}

// ---- 9. min-p -----------------------------------------------------------------------------

TEST(sampling, min_p_relative_to_top) {
  // Logits {2, 1, 0, -1}: p / p_max = {1, e^-1 = 0.368, e^-2 = 0.135, e^-3 = 0.050}.
  const std::vector<float> l = {2, 1, 0, -1};
  Candidates c = make(l);
  sampling::min_p(c, 0.3f);
  EXPECT_EQ(c.ids, (Ids{0, 1}));
  c = make(l);
  sampling::min_p(c, 0.1f);
  EXPECT_EQ(c.ids, (Ids{0, 1, 2}));
  c = make(l);
  sampling::min_p(c, 1.0f);  // only the top survives
  EXPECT_EQ(c.ids, (Ids{0}));
  c = make(l);
  sampling::min_p(c, 0.0f);  // off
  EXPECT_EQ(c.ids.size(), 4u);
}

// ---- 6a. top-n-sigma -----------------------------------------------------------------------

TEST(sampling, top_n_sigma_keeps_logits_within_n_deviations_of_the_top) {
  // Logits {4, 2, 0, -2, -4}: mean 0, population variance (16 + 4 + 0 + 4 + 16) / 5 = 8,
  // sigma = 2.828. n = 1: threshold 4 - 2.828 = 1.17 keeps {0, 1}; n = 2: 4 - 5.66 = -1.66
  // keeps {0, 1, 2}; n = 3: -4.49 keeps all five.
  const std::vector<float> l = {4, 2, 0, -2, -4};
  Candidates c = make(l);
  sampling::top_n_sigma(c, 1.0f);
  EXPECT_EQ(c.ids, (Ids{0, 1}));
  c = make(l);
  sampling::top_n_sigma(c, 2.0f);
  EXPECT_EQ(c.ids, (Ids{0, 1, 2}));
  c = make(l);
  sampling::top_n_sigma(c, 3.0f);
  EXPECT_EQ(c.ids.size(), 5u);
  for (float off : {0.0f, -1.0f}) {  // <= 0 is off
    c = make(l);
    sampling::top_n_sigma(c, off);
    EXPECT_EQ(c.ids.size(), 5u);
  }
}

TEST(sampling, top_n_sigma_counts_only_the_survivors) {
  // Token 4 masked (-inf) and token 3 filtered out before: the statistics are over {6, 4, 2}
  // (mean 4, sigma sqrt(8 / 3) = 1.633), so n = 1 keeps logits >= 4.37: only token 0. Over all
  // five finite logits it would have kept {0, 1}.
  Candidates c;
  c.load(std::vector<float>{6, 4, 2, -20, -kInf});
  c.collect();
  c.ids = {0, 1, 2};  // as if an earlier stage had removed token 3
  sampling::top_n_sigma(c, 1.0f);
  EXPECT_EQ(c.ids, (Ids{0}));
  c = make(std::vector<float>{1, 1, 1});  // sigma 0: every token equals the top and stays
  sampling::top_n_sigma(c, 1.0f);
  EXPECT_EQ(c.ids.size(), 3u);
}

// ---- 11. dynamic temperature --------------------------------------------------------------

TEST(sampling, dynamic_temperature_follows_the_entropy) {
  // Flat over 4 tokens: H = ln 4, H / ln n = 1 -> the top of the range, temp + range.
  Candidates flat = make(std::vector<float>{0, 0, 0, 0});
  EXPECT_FLOAT_EQ(sampling::dynamic_temperature(flat, 1.0f, 0.5f, 1.0f), 1.5f);
  // p = {1/2, 1/4, 1/8, 1/8}: H = (1/2) ln 2 + (1/4) ln 4 + 2 (1/8) ln 8 = 1.75 ln 2, ln 4 =
  // 2 ln 2, so H / ln n = 0.875; temp 1, range 0.5: 0.5 + 1.0 * 0.875 = 1.375; with exponent
  // 2: 0.5 + 0.765625 = 1.265625.
  Candidates c = make(ln({0.5, 0.25, 0.125, 0.125}));
  EXPECT_NEAR(sampling::dynamic_temperature(c, 1.0f, 0.5f, 1.0f), 1.375f, 1e-5f);
  EXPECT_NEAR(sampling::dynamic_temperature(c, 1.0f, 0.5f, 2.0f), 1.265625f, 1e-5f);
  // The low end never goes below 0: temp 0.3, range 0.5 spans [0, 0.8]: 0.8 * 0.875 = 0.7.
  EXPECT_NEAR(sampling::dynamic_temperature(c, 0.3f, 0.5f, 1.0f), 0.7f, 1e-5f);
  // Off (range 0) and a single survivor give the plain temperature.
  EXPECT_EQ(sampling::dynamic_temperature(c, 0.8f, 0.0f, 1.0f), 0.8f);
  Candidates one = make(std::vector<float>{-kInf, 3, -kInf});
  EXPECT_EQ(sampling::dynamic_temperature(one, 0.8f, 0.5f, 1.0f), 0.8f);
  // One token holding all the mass (the others underflow): H = 0 -> the low end.
  Candidates sure = make(std::vector<float>{0, -1000, -1000});
  EXPECT_NEAR(sampling::dynamic_temperature(sure, 1.0f, 0.25f, 1.0f), 0.75f, 1e-6f);
}

// ---- 10. XTC ------------------------------------------------------------------------------

TEST(sampling, xtc_removes_top_choices_but_the_least_likely) {
  // p = {0.4, 0.3, 0.2, 0.1}, threshold 0.25: ids 0 and 1 are above; 1 is the least likely of
  // them and stays, 0 goes.
  const std::vector<float> l = ln({0.4, 0.3, 0.2, 0.1});
  Candidates c = make(l);
  Rng rng(1);
  EXPECT_TRUE(sampling::xtc(c, 1.0f, 0.25f, rng));
  EXPECT_EQ(c.ids, (Ids{1, 2, 3}));
  // threshold 0.35: only id0 is above, nothing to exclude.
  c = make(l);
  EXPECT_FALSE(sampling::xtc(c, 1.0f, 0.35f, rng));
  EXPECT_EQ(c.ids.size(), 4u);
}

TEST(sampling, xtc_ties_keep_highest_id) {
  // p = {0.3, 0.3, 0.4}, threshold 0.25: all three above; least likely 0.3 is shared by ids 0
  // and 1, and the later in the ranking (id 1) stays.
  Candidates c = make(ln({0.3, 0.3, 0.4}));
  Rng rng(1);
  sampling::xtc(c, 1.0f, 0.25f, rng);
  EXPECT_EQ(c.ids, (Ids{1}));
}

TEST(sampling, xtc_draws_exactly_once_when_it_applies) {
  const std::vector<float> l = ln({0.4, 0.3, 0.2, 0.1});
  Rng rng(7);
  const Rng before = rng;
  Candidates c = make(l);
  sampling::xtc(c, 0.0f, 0.25f, rng);  // probability 0: no draw
  EXPECT_EQ(rng, before);
  Candidates one = make({1.0f});
  sampling::xtc(one, 1.0f, 0.25f, rng);  // a single survivor: no draw
  EXPECT_EQ(rng, before);
  for (int i = 0; i < 20; ++i) {
    Rng expect = rng;
    const bool fires = expect.next_double() < 0.5;
    c = make(l);
    EXPECT_EQ(sampling::xtc(c, 0.5f, 0.25f, rng), fires);
    EXPECT_EQ(rng, expect);  // one draw, fired or not
  }
}

// ---- 11'. mirostat ------------------------------------------------------------------------

TEST(sampling, mirostat_v2_truncates_by_surprise) {
  // p = {1/2, 1/4, 1/8, 1/8}: surprise -log2 p = {1, 2, 3, 3} bits.
  const std::vector<float> l = ln({0.5, 0.25, 0.125, 0.125});
  Candidates c = make(l);
  sampling::mirostat_v2(c, 2.5f);
  EXPECT_EQ(c.ids, (Ids{0, 1}));
  c = make(l);
  sampling::mirostat_v2(c, 0.5f);  // nothing under mu: the top token alone
  EXPECT_EQ(c.ids, (Ids{0}));
  c = make(l);
  sampling::mirostat_v2(c, 10.0f);
  EXPECT_EQ(c.ids.size(), 4u);
}

TEST(sampling, mirostat_v1_k_from_zipf_estimate) {
  // Rank r (0-based) has p ~ (r+1)^-2, an exact Zipf law with s = 2: every
  // ln(p_r / p_r+1) = 2 ln((r+2)/(r+1)), so the fit gives s = 2, eps = 1. With N = 8:
  //   k = (eps * 2^mu / (1 - N^-eps))^(1/s) = (2^mu / 0.875)^(1/2)
  //   mu = 1: sqrt(2.286) = 1.51 -> 1;  mu = 3: sqrt(9.143) = 3.02 -> 3;
  //   mu = 5: sqrt(36.57) = 6.05 -> 6.
  // Ranks live at ids perm[r] to check the ranking is by probability, not by id.
  const int32_t perm[8] = {3, 0, 6, 1, 7, 2, 5, 4};
  std::vector<float> l(8);
  for (int r = 0; r < 8; ++r) l[perm[r]] = static_cast<float>(-2.0 * std::log(r + 1.0));
  Candidates c = make(l);
  sampling::mirostat_v1(c, 1.0f, 100, 8);
  EXPECT_EQ(c.ids, (Ids{3}));
  c = make(l);
  sampling::mirostat_v1(c, 3.0f, 100, 8);
  EXPECT_EQ(c.ids, (Ids{0, 3, 6}));
  c = make(l);
  sampling::mirostat_v1(c, 5.0f, 100, 8);
  EXPECT_EQ(c.ids, (Ids{0, 1, 2, 3, 6, 7}));
}

TEST(sampling, mirostat_v1_s_equal_one_limit) {
  // p ~ (r+1)^-1: s = 1, eps = 0, where k -> 2^mu / ln N. N = 8, mu = 3: 8 / 2.079 = 3.85 -> 3.
  std::vector<float> l(8);
  for (int r = 0; r < 8; ++r) l[r] = static_cast<float>(-std::log(r + 1.0));
  Candidates c = make(l);
  sampling::mirostat_v1(c, 3.0f, 100, 8);
  EXPECT_EQ(c.ids, (Ids{0, 1, 2}));
}

TEST(sampling, mirostat_update_rule) {
  // mu - eta * (surprise - tau): 10 - 0.1 * (1 - 5) = 10.4; 10 - 0.1 * (8 - 5) = 9.7.
  EXPECT_FLOAT_EQ(sampling::mirostat_update(10.0f, 1.0f, 5.0f, 0.1f), 10.4f);
  EXPECT_FLOAT_EQ(sampling::mirostat_update(10.0f, 8.0f, 5.0f, 0.1f), 9.7f);
}

// ---- 11. draw -----------------------------------------------------------------------------

TEST(sampling, draw_inverse_cdf_in_id_order) {
  // p = {0.1, 0.2, 0.3, 0.4}: cumulative 0.1, 0.3, 0.6, 1.0 over ids 0..3.
  const double cum[4] = {0.1, 0.3, 0.6, 1.0};
  Candidates c = make(ln({0.1, 0.2, 0.3, 0.4}));
  Rng rng(2024);
  for (int i = 0; i < 200; ++i) {
    Rng peek = rng;
    const double u = peek.next_double();
    int32_t expect = 0;
    while (u >= cum[expect]) ++expect;
    EXPECT_EQ(sampling::draw(c, 1.0f, rng), expect) << "u = " << u;
    EXPECT_EQ(rng, peek);  // exactly one draw
  }
}

TEST(sampling, draw_only_from_survivors) {
  Candidates c = make({5, 0, 5, 0});
  c.ids = {1, 3};  // as a filter would leave them
  Rng rng(3);
  for (int i = 0; i < 100; ++i) {
    const int32_t t = sampling::draw(c, 1.0f, rng);
    EXPECT_TRUE(t == 1 || t == 3);
  }
}

}  // namespace
}  // namespace minfer
