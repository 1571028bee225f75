// Sampler: turns one row of logits into a token with the reference's chain (docs/sampling.md):
//
//   1 logit bias -> 2 penalties -> 3 DRY -> [greedy if temp < 1e-6] -> 6a top-n-sigma -> 6 top-k
//   -> 7 typical -> 8 top-p -> 9 min-p -> 10 XTC -> 11 (dynamic) temperature + draw | mirostat v1/v2
//
// It owns the state the chain needs between steps: the window of accepted tokens (penalties,
// DRY), mirostat's mu and the seeded RNG. The caller decides end of generation (the
// tokenizer's is_eog) and feeds every kept token back through accept().
//
//   SamplerParams p;                            // llama.cpp's defaults; p.seed = 42 to reproduce a run
//   auto s = Sampler::create(p, n_vocab);       // validates p
//   if (!s) return s.error();
//   s->accept_prompt(prompt_ids);               // seeds the penalty / DRY window
//   while (n_out < n_predict) {
//     Expected<int32_t> tok = s->sample(logits);  // std::span<const float>, [n_vocab]
//     if (!tok) return tok.error();               // every token was masked
//     s->accept(*tok);                            // window, mirostat mu
//     if (vocab.is_eog(*tok)) break;
//     ...
//   }
//
// Speculative decoding (pitfall 21): checkpoint() before accepting draft tokens and restore() to
// undo the rejected ones, so no token enters the window twice; keep the one Sampler for the
// whole generation rather than re-creating (and re-seeding) it.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "sampling/params.h"
#include "sampling/rng.h"
#include "sampling/stages.h"

namespace minfer {

// Everything a step changes: restore() puts a sampler back exactly where checkpoint() was.
struct SamplerState {
  std::vector<int32_t> history;  // accepted tokens, oldest first (trimmed to the largest window)
  float mirostat_mu = 0.0f;
  Rng rng;
  // The last mirostat draw's distribution (ids ascending, probabilities), for accept().
  std::vector<int32_t> last_ids;
  std::vector<double> last_probs;
};

class Sampler {
 public:
  static Expected<Sampler> create(const SamplerParams& params, int32_t n_vocab);

  // One token from `logits` ([n_vocab]). Advances the RNG (one draw, plus one for XTC when it
  // applies; none when greedy; no final draw when a dynamic temperature comes out below 1e-6)
  // but not the window: call accept() with the token you keep.
  // Fails only when every token is masked (-inf), e.g. by logit_bias.
  Expected<int32_t> sample(std::span<const float> logits);
  // Appends `token` to the window and, after a mirostat sample(), updates mu with the token's
  // surprise -log2 p in that step's truncated distribution (no update if the token was not in
  // it, e.g. a token forced by the caller).
  void accept(int32_t token);
  // Appends prompt tokens to the window (no mirostat update).
  void accept_prompt(std::span<const int32_t> tokens);
  Expected<int32_t> sample_and_accept(std::span<const float> logits);
  // The distribution the last sample() drew from, most likely first (equal ones by id): at
  // most n tokens of probability > 0, the survivors of the chain at its temperature (mirostat:
  // 1); greedy: the chosen token at 1. Empty before the first sample(). llama-server's
  // post_sampling_probs.
  std::vector<std::pair<int32_t, float>> last_distribution(size_t n) const;
  // The probability of `id` in that distribution (0 outside it, or before the first sample()).
  float last_probability(int32_t id) const;

  // Empties the window, resets mu to 2 * tau and re-seeds the RNG with seed(): a reset sampler
  // repeats its first run.
  void reset();
  SamplerState checkpoint() const { return state_; }
  void restore(const SamplerState& s) { state_ = s; }

  // The active stages in order with their settings, e.g. "penalties(last_n 64, repeat 1.1,
  // frequency 0, presence 0) -> top-k 40 -> top-p 0.95 -> temp 0.8 -> draw(seed 42)".
  std::string describe() const;

  const SamplerParams& params() const { return params_; }
  int32_t n_vocab() const { return n_vocab_; }
  // The seed in use: params().seed, or the one drawn for kSeedRandom (print it to reproduce).
  uint64_t seed() const { return seed_; }
  float mirostat_mu() const { return state_.mirostat_mu; }
  void set_mirostat_mu(float mu) { state_.mirostat_mu = mu; }
  // The last n accepted tokens, oldest first (n = -1: all kept). Only what the active stages
  // need is kept (nothing when penalties and DRY are off), so this may return fewer.
  std::span<const int32_t> window(int32_t n) const;

 private:
  Sampler(const SamplerParams& params, int32_t n_vocab, uint64_t seed);

  SamplerParams params_;
  int32_t n_vocab_ = 0;
  uint64_t seed_ = 0;
  size_t history_cap_ = 0;  // tokens kept: the largest window in use (SIZE_MAX for -1)
  SamplerState state_;
  Candidates cand_;         // scratch, reused between steps; the last draw's survivors
  enum class Drew { kNothing, kGreedy, kDraw };
  Drew last_ = Drew::kNothing;  // how the last sample() chose
  int32_t last_greedy_ = -1;    // kGreedy: the token
  float last_temp_ = 1.0f;      // kDraw: the temperature of the draw
};

}  // namespace minfer
