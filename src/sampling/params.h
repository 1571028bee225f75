// Sampler parameters: one struct, defaults as llama.cpp's (CLI and server alike; docs/sampling.md
// lists each with its meaning), and validate() refusing bad values with a message that names the
// field, the value and the allowed range. The ranges, names and help of every field are rows of
// one table (sampling/fields.h); the comments below say what a value does. Nothing is clamped.
//
//   SamplerParams p;                  // temp 0.8, top_k 40, top_p 0.95, min_p 0.05, random seed ...
//   p.top_p = 0.9f;
//   p.logit_bias[198] = -100.0f;      // token id -> added to its logit
//   if (Status st = validate(p, n_vocab); !st) return st.error();
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "core/status.h"

namespace minfer {

// The value of SamplerParams::seed that asks for a random seed (std::random_device).
inline constexpr int64_t kSeedRandom = -1;
// Below this temperature the chain is greedy (argmax after logit bias, penalties and DRY).
inline constexpr float kGreedyTemp = 1e-6f;

struct SamplerParams {
  // 11. temperature; <= kGreedyTemp means greedy (argmax, no RNG draw).
  float temp = 0.8f;
  // 11. dynamic temperature: with range > 0 the draw's temperature is
  //     lo + (hi - lo) * (H / ln n)^exponent, lo = max(0, temp - range), hi = temp + range, H the
  //     entropy of the n survivors' distribution at temperature 1 (flat -> hi, one sure token
  //     -> lo); 0 disables.
  float dynatemp_range = 0.0f;
  float dynatemp_exponent = 1.0f;
  // 6a. top-n-sigma: keep tokens whose logit is >= max - top_n_sigma * sigma (sigma: the
  //     standard deviation of the survivors' logits); <= 0 disables (-1, llama.cpp's default).
  float top_n_sigma = -1.0f;
  // 6. keep the k highest logits; 0 (or k >= n_vocab) disables.
  int32_t top_k = 40;
  // 7. locally typical sampling; 1 disables.
  float typical_p = 1.0f;
  // 8. nucleus: keep the smallest prefix (by probability) whose mass reaches top_p; 1 disables; 0 keeps
  //    the most likely token only.
  float top_p = 0.95f;
  // 9. keep tokens whose probability is >= min_p times the top probability; 0 disables.
  float min_p = 0.05f;

  // 2. penalties over the last repeat_last_n accepted tokens (-1: all accepted tokens since
  //    the last reset; 0: off). repeat_penalty 1 is off; negative frequency and presence
  //    penalties encourage repetition.
  float repeat_penalty = 1.0f;
  float frequency_penalty = 0.0f;
  float presence_penalty = 0.0f;
  int32_t repeat_last_n = 64;

  // 3. DRY ("don't repeat yourself"): a token that would extend a repeat of length L >=
  //    dry_allowed_length loses dry_multiplier * dry_base^(L - dry_allowed_length).
  //    multiplier 0 is off; penalty_last_n is the window (-1: all
  //    accepted tokens; 0 is refused while DRY is on).
  float dry_multiplier = 0.0f;
  float dry_base = 1.75f;
  int32_t dry_allowed_length = 2;
  int32_t dry_penalty_last_n = 64;
  // Token-id sequences a repeat may not cross (the caller tokenizes breaker strings such as
  // "\n" or ":"). A candidate that is itself a one-token breaker is never penalized.
  std::vector<std::vector<int32_t>> dry_sequence_breakers;

  // 10. XTC ("exclude top choices"): with probability xtc_probability (one RNG draw), remove
  //     every token whose probability is >= xtc_threshold except the least likely of them.
  //     probability 0 is off.
  float xtc_probability = 0.0f;
  float xtc_threshold = 0.5f;

  // 11'. mirostat 0 (off), 1 or 2 replaces the temperature draw; temperature is ignored
  //      (temp 0 is still greedy). tau is the target surprise in bits, eta the
  //      learning rate, m the number of top tokens v1 uses to estimate Zipf's exponent.
  int32_t mirostat = 0;
  float mirostat_tau = 5.0f;
  float mirostat_eta = 0.1f;
  int32_t mirostat_m = 100;

  // 1. added to the logit of each id; id in [0, n_vocab); bias in [-100, 100], or -infinity
  //    to ban the token.
  std::map<int32_t, float> logit_bias;

  // kSeedRandom (-1) draws one from std::random_device; any value >= 0 reproduces a run on
  // every machine. Like llama.cpp, every front end draws one unless a seed is given.
  int64_t seed = kSeedRandom;
};

// OK, or an error naming the first bad field, its value and the allowed range. n_vocab bounds
// the token ids of logit_bias and dry_sequence_breakers.
Status validate(const SamplerParams& p, int32_t n_vocab);

}  // namespace minfer
