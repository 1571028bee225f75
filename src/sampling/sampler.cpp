#include "sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

namespace minfer {

namespace {

constexpr const char* kAllMasked =
    "sampling: all {} tokens are masked (-inf or NaN logits, or banned by logit_bias)";

// Tokens the window must keep for a stage with this last-n setting (-1: all, 0: none).
size_t window_need(int32_t last_n) {
  return last_n < 0 ? std::numeric_limits<size_t>::max() : static_cast<size_t>(last_n);
}

}  // namespace

Expected<Sampler> Sampler::create(const SamplerParams& params, int32_t n_vocab) {
  MINFER_TRY(validate(params, n_vocab));
  // A drawn seed keeps 63 bits so that it can be passed back as SamplerParams::seed.
  const uint64_t seed = params.seed == kSeedRandom ? random_seed() >> 1
                                                   : static_cast<uint64_t>(params.seed);
  return Sampler(params, n_vocab, seed);
}

Sampler::Sampler(const SamplerParams& params, int32_t n_vocab, uint64_t seed)
    : params_(params), n_vocab_(n_vocab), seed_(seed) {
  const bool penalties_on = params.repeat_penalty != 1.0f || params.frequency_penalty != 0.0f ||
                            params.presence_penalty != 0.0f;
  if (penalties_on) history_cap_ = window_need(params.repeat_last_n);
  if (params.dry_multiplier > 0.0f) {
    history_cap_ = std::max(history_cap_, window_need(params.dry_penalty_last_n));
  }
  reset();
}

void Sampler::reset() {
  state_.history.clear();
  state_.mirostat_mu = 2.0f * params_.mirostat_tau;
  state_.rng = Rng(seed_);
  state_.last_ids.clear();
  state_.last_probs.clear();
}

std::span<const int32_t> Sampler::window(int32_t n) const {
  const auto& h = state_.history;
  const size_t keep = std::min({h.size(), window_need(n), history_cap_});
  return std::span<const int32_t>(h).subspan(h.size() - keep);
}

void Sampler::accept(int32_t token) {
  auto& s = state_;
  if (!s.last_ids.empty()) {
    const auto it = std::lower_bound(s.last_ids.begin(), s.last_ids.end(), token);
    const double p = it != s.last_ids.end() && *it == token
                         ? s.last_probs[static_cast<size_t>(it - s.last_ids.begin())]
                         : 0.0;
    if (p > 0.0) {
      const float surprise = static_cast<float>(-std::log2(p));
      s.mirostat_mu = sampling::mirostat_update(s.mirostat_mu, surprise, params_.mirostat_tau,
                                                params_.mirostat_eta);
    }
    s.last_ids.clear();
    s.last_probs.clear();
  }
  if (history_cap_ == 0) return;
  s.history.push_back(token);
  // Trim in batches so accept() stays amortized O(1).
  const bool bounded = history_cap_ != std::numeric_limits<size_t>::max();
  if (bounded && s.history.size() >= 2 * history_cap_ + 64) {
    s.history.erase(s.history.begin(), s.history.end() - static_cast<ptrdiff_t>(history_cap_));
  }
}

void Sampler::accept_prompt(std::span<const int32_t> tokens) {
  state_.last_ids.clear();
  state_.last_probs.clear();
  for (int32_t t : tokens) accept(t);
}

Expected<int32_t> Sampler::sample(std::span<const float> logits) {
  MINFER_ASSERT(logits.size() == static_cast<size_t>(n_vocab_));
  const SamplerParams& p = params_;
  auto& s = state_;
  s.last_ids.clear();
  s.last_probs.clear();

  // Stages 1-3 edit the whole row.
  cand_.load(logits);
  sampling::logit_bias(cand_.logits, p.logit_bias);
  if (p.repeat_last_n != 0) {
    sampling::penalties(cand_.logits, window(p.repeat_last_n), p.repeat_penalty,
                        p.frequency_penalty, p.presence_penalty);
  }
  if (p.dry_multiplier > 0.0f) {
    sampling::dry(cand_.logits, window(p.dry_penalty_last_n), p.dry_multiplier, p.dry_base,
                  p.dry_allowed_length, p.dry_sequence_breakers);
  }
  last_ = Drew::kNothing;
  if (p.temp < kGreedyTemp) {
    const int32_t best = sampling::argmax(cand_.logits);
    if (best < 0) {
      return make_error(kAllMasked, n_vocab_);
    }
    last_ = Drew::kGreedy;
    last_greedy_ = best;
    return best;
  }

  // Stages 6-11 work on the survivors.
  cand_.collect();
  if (cand_.ids.empty()) {
    return make_error(kAllMasked, n_vocab_);
  }
  sampling::top_n_sigma(cand_, p.top_n_sigma);
  sampling::top_k(cand_, p.top_k);
  sampling::typical(cand_, p.typical_p);
  sampling::top_p(cand_, p.top_p);
  sampling::min_p(cand_, p.min_p);
  sampling::xtc(cand_, p.xtc_probability, p.xtc_threshold, s.rng);
  last_ = Drew::kDraw;
  if (p.mirostat == 0) {
    last_temp_ = p.dynatemp_range > 0.0f ? sampling::dynamic_temperature(cand_, p.temp, p.dynatemp_range, p.dynatemp_exponent)
                                          : p.temp;
    if (last_temp_ >= kGreedyTemp) return sampling::draw(cand_, last_temp_, s.rng);
    // A dynamic temperature of 0 (temp <= range and one sure token): the top survivor.
    int32_t best = cand_.ids[0];
    for (int32_t id : cand_.ids)
      if (cand_.logits[id] > cand_.logits[best]) best = id;
    last_ = Drew::kGreedy;
    last_greedy_ = best;
    return best;
  }
  last_temp_ = 1.0f;

  // Mirostat ignores the temperature: truncate by surprise, draw at temperature 1, and keep the
  // distribution so accept() can measure the surprise of the token actually kept.
  if (p.mirostat == 1) {
    sampling::mirostat_v1(cand_, s.mirostat_mu, p.mirostat_m, n_vocab_);
  } else {
    sampling::mirostat_v2(cand_, s.mirostat_mu);
  }
  const int32_t tok = sampling::draw(cand_, 1.0f, s.rng);
  s.last_ids = cand_.ids;
  s.last_probs = sampling::probabilities(cand_);
  return tok;
}

std::vector<std::pair<int32_t, float>> Sampler::last_distribution(size_t n) const {
  std::vector<std::pair<int32_t, float>> out;
  if (n == 0 || last_ == Drew::kNothing) return out;
  if (last_ == Drew::kGreedy) {
    out.emplace_back(last_greedy_, 1.0f);
    return out;
  }
  const std::vector<double> p = sampling::probabilities(cand_, last_temp_);
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] > 0.0) out.emplace_back(cand_.ids[i], static_cast<float>(p[i]));
  }
  const size_t k = std::min(n, out.size());
  std::partial_sort(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(k), out.end(),
                    [](const auto& a, const auto& b) {
                      return a.second > b.second || (a.second == b.second && a.first < b.first);
                    });
  out.resize(k);
  return out;
}

float Sampler::last_probability(int32_t id) const {
  if (last_ == Drew::kNothing) return 0.0f;
  if (last_ == Drew::kGreedy) return id == last_greedy_ ? 1.0f : 0.0f;
  const auto it = std::lower_bound(cand_.ids.begin(), cand_.ids.end(), id);  // ids ascending
  if (it == cand_.ids.end() || *it != id) return 0.0f;
  return static_cast<float>(sampling::probabilities(cand_, last_temp_)[static_cast<size_t>(it - cand_.ids.begin())]);
}

std::string Sampler::describe() const {
  const SamplerParams& p = params_;
  std::string out;
  const auto stage = [&out](std::string s) { out += out.empty() ? s : " -> " + s; };
  if (!p.logit_bias.empty()) stage(fmt::format("logit-bias({} ids)", p.logit_bias.size()));
  if (p.repeat_last_n != 0 && (p.repeat_penalty != 1.0f || p.frequency_penalty != 0.0f ||
                               p.presence_penalty != 0.0f)) {
    stage(fmt::format("penalties(last_n {}, repeat {}, frequency {}, presence {})",
                      p.repeat_last_n, p.repeat_penalty, p.frequency_penalty, p.presence_penalty));
  }
  if (p.dry_multiplier > 0.0f) {
    stage(fmt::format("dry(multiplier {}, base {}, allowed_length {}, last_n {}, {} breakers)",
                      p.dry_multiplier, p.dry_base, p.dry_allowed_length, p.dry_penalty_last_n,
                      p.dry_sequence_breakers.size()));
  }
  if (p.temp < kGreedyTemp) {
    stage("greedy");
    return out;
  }
  if (p.top_n_sigma > 0.0f) stage(fmt::format("top-n-sigma {}", p.top_n_sigma));
  if (p.top_k > 0 && p.top_k < n_vocab_) stage(fmt::format("top-k {}", p.top_k));
  if (p.typical_p < 1.0f) stage(fmt::format("typical {}", p.typical_p));
  if (p.top_p < 1.0f) stage(fmt::format("top-p {}", p.top_p));
  if (p.min_p > 0.0f) stage(fmt::format("min-p {}", p.min_p));
  if (p.xtc_probability > 0.0f) {
    stage(fmt::format("xtc(probability {}, threshold {})", p.xtc_probability, p.xtc_threshold));
  }
  if (p.mirostat == 0 && p.dynatemp_range > 0.0f) {
    stage(fmt::format("dynatemp(temp {}, range {}, exponent {})", p.temp, p.dynatemp_range, p.dynatemp_exponent));
  } else if (p.mirostat == 0) {
    stage(fmt::format("temp {}", p.temp));
  } else {
    stage(fmt::format("mirostat v{}(tau {}, eta {}{})", p.mirostat, p.mirostat_tau,
                      p.mirostat_eta, p.mirostat == 1 ? fmt::format(", m {}", p.mirostat_m) : ""));
  }
  stage(fmt::format("draw(seed {})", seed_));
  return out;
}

Expected<int32_t> Sampler::sample_and_accept(std::span<const float> logits) {
  Expected<int32_t> tok = sample(logits);
  if (tok) accept(*tok);
  return tok;
}

}  // namespace minfer
