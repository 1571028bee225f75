// The sampler's stages as plain functions, each testable on its own; Sampler (sampler.h) runs
// them in the reference's order. Stages 1-3 edit a full logits row in place. Stages 6-11 work
// on Candidates: the row plus the ascending list of surviving ids. A filter removes ids from
// the list (their logits are left as they were, never replaced by probabilities), and never
// reorders it, so the final draw walks the survivors in id order whatever the stages did.
// Ties in every ranking are broken by the lower token id.
//
//   Candidates c;
//   c.load(logits);                                  // copy of [n_vocab]
//   sampling::penalties(c.logits, window, 1.1f, 0, 0);
//   c.collect();                                     // ids = every finite logit
//   sampling::top_k(c, 40);
//   sampling::top_p(c, 0.95f);
//   int32_t tok = sampling::draw(c, 0.8f, rng);
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <utility>
#include <vector>

#include "sampling/rng.h"

namespace minfer {

struct Candidates {
  std::vector<float> logits;  // [n_vocab]; -inf marks a masked token
  std::vector<int32_t> ids;   // surviving ids, ascending; filled by collect()

  // Working memory of the stages, kept between steps: freeing and re-allocating megabyte
  // vectors every token costs more in page faults than the arithmetic.
  struct Scratch {
    std::vector<double> prob, key;  // [ids.size()]
    std::vector<float> lv;          // [ids.size()]
    std::vector<uint32_t> pos, bucket;
    std::vector<uint8_t> keep;
    std::vector<std::pair<float, int32_t>> heap;
  };
  mutable Scratch scratch;

  // Copies a row of logits; NaN becomes -inf (a NaN would break every ordering below).
  void load(std::span<const float> row);
  // ids = every id whose logit is not -inf.
  void collect();
};

namespace sampling {

// 1. logits[id] += bias for each entry; ids outside the row are skipped.
void logit_bias(std::span<float> logits, const std::map<int32_t, float>& bias);

// 2. For each distinct id in `window` (ids outside the row are skipped), with count c:
//    logit -= c * frequency + presence; then, if repeat != 1, logit /= repeat when positive
//    and logit *= repeat otherwise (both make the token less likely for repeat > 1).
void penalties(std::span<float> logits, std::span<const int32_t> window, float repeat,
               float frequency, float presence);

// 3. DRY over `window` (oldest first). For every earlier position j whose tokens match the
//    window's last L tokens (L capped so the match never includes a token of the most recent
//    sequence breaker), the token after j would continue the repeat; with L >= allowed_length
//    it loses multiplier * base^(L - allowed_length) (largest L per token; exponent clamped so
//    the penalty stays finite). One-token breakers are never penalized.
void dry(std::span<float> logits, std::span<const int32_t> window, float multiplier,
         float base, int32_t allowed_length, const std::vector<std::vector<int32_t>>& breakers);

// The highest logit's id (the lowest id among equals); -1 if the row is empty or all -inf.
int32_t argmax(std::span<const float> logits);

// Probabilities of c.ids (same order) at temperature `temp` > 0: softmax of logit / temp.
std::vector<double> probabilities(const Candidates& c, float temp = 1.0f);

// 6a. Top-n-sigma: with m the highest logit and sigma the standard deviation of the survivors'
//     logits (population: divided by their count), keeps ids whose logit is >= m - n * sigma
//     (so the top token always survives). n <= 0 or a single survivor does nothing.
void top_n_sigma(Candidates& c, float n);

// 6. Keeps the k highest logits (exactly k; equal logits rank by id). k <= 0 or k >= the
//    number of survivors does nothing. O(n): a selection, not a sort.
void top_k(Candidates& c, int32_t k);

// 7. Locally typical sampling: with H the entropy of the survivors' distribution, ranks tokens
//    by |-ln p - H| (closest to "typical" first) and keeps the shortest prefix of that ranking
//    whose probability mass exceeds p (at least one token). p >= 1 does nothing.
void typical(Candidates& c, float p);

// 8. Nucleus: ranks by probability and keeps the shortest prefix whose mass is >= p (at least
//    one token). p >= 1 does nothing. O(n) expected (a halving selection, not a sort), also
//    for typical: a flat distribution can put most of the vocabulary in the nucleus.
void top_p(Candidates& c, float p);

// 9. Keeps tokens with logit >= max_logit + ln p, i.e. probability >= p * top probability (the
//    top token always survives). p <= 0 does nothing.
void min_p(Candidates& c, float p);

// 10. XTC. When probability > 0 and at least two tokens survive, draws one u from `rng`; if
//     u < probability, every token with probability >= threshold except the least likely of
//     them (on equal probabilities, the highest id) is removed. Returns whether any was.
bool xtc(Candidates& c, float probability, float threshold, Rng& rng);

// 11'. Mirostat truncation; the caller then draws at temperature 1 and feeds the surprise
//      -log2 p(chosen) of the truncated distribution back into mu (mirostat_update).
// v1 (Basu et al. 2021, alg. 1): estimates Zipf's exponent s from the top m probabilities,
// derives k from s, mu and n_vocab, and keeps the top k.
void mirostat_v1(Candidates& c, float mu, int32_t m, int32_t n_vocab);
// v2: keeps tokens whose surprise -log2 p is <= mu (at least the top one).
void mirostat_v2(Candidates& c, float mu);
// mu <- mu - eta * (surprise - tau)
float mirostat_update(float mu, float surprise, float tau, float eta);

// 11. Dynamic temperature: lo + (hi - lo) * (H / ln n)^exponent with lo = max(0, temp - range),
//     hi = temp + range, H the entropy (nats) of the survivors' distribution at temperature 1
//     and n their count. A single survivor gives temp. range <= 0 returns temp.
float dynamic_temperature(const Candidates& c, float temp, float range, float exponent);

// 11. One inverse-CDF draw: u from `rng`, then the first id (ascending) whose cumulative
//     probability at `temp` exceeds u. c.ids must not be empty.
int32_t draw(const Candidates& c, float temp, Rng& rng);

}  // namespace sampling
}  // namespace minfer
