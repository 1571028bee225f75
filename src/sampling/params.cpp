#include "sampling/params.h"

#include <cmath>

namespace minfer {

namespace {

bool in_closed(float v, float lo, float hi) { return v >= lo && v <= hi; }  // false for NaN

Status check_id(const char* field, int32_t id, int32_t n_vocab) {
  if (id < 0 || id >= n_vocab) {
    return make_error("sampling: {} token id {} is outside the vocabulary [0, {})", field, id,
                      n_vocab);
  }
  return Status::ok();
}

}  // namespace

Status validate(const SamplerParams& p, int32_t n_vocab) {
  if (n_vocab <= 0) return make_error("sampling: vocabulary size {} must be positive", n_vocab);
  if (!(p.temp >= 0.0f) || !std::isfinite(p.temp)) {
    return make_error("sampling: temp {} must be a finite value >= 0 (0 = greedy)", p.temp);
  }
  if (p.top_k < 0) return make_error("sampling: top_k {} must be >= 0 (0 = off)", p.top_k);
  if (!(p.dynatemp_range >= 0.0f) || !std::isfinite(p.dynatemp_range)) {
    return make_error("sampling: dynatemp_range {} must be a finite value >= 0 (0 = off)", p.dynatemp_range);
  }
  if (!std::isfinite(p.temp + p.dynatemp_range)) {
    return make_error("sampling: temp {} + dynatemp_range {} is not a finite temperature", p.temp, p.dynatemp_range);
  }
  if (!(p.dynatemp_exponent >= 0.0f) || !std::isfinite(p.dynatemp_exponent)) {
    return make_error("sampling: dynatemp_exponent {} must be a finite value >= 0", p.dynatemp_exponent);
  }
  if (!std::isfinite(p.top_n_sigma)) {
    return make_error("sampling: top_n_sigma {} must be finite (<= 0 = off)", p.top_n_sigma);
  }
  if (!in_closed(p.typical_p, 0.0f, 1.0f)) {
    return make_error("sampling: typical_p {} is outside [0, 1] (1 = off)", p.typical_p);
  }
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) {
    return make_error("sampling: top_p {} is outside (0, 1] (1 = off)", p.top_p);
  }
  if (!in_closed(p.min_p, 0.0f, 1.0f)) {
    return make_error("sampling: min_p {} is outside [0, 1] (0 = off)", p.min_p);
  }

  if (!(p.repeat_penalty >= 1.0f) || !std::isfinite(p.repeat_penalty)) {
    return make_error("sampling: repeat_penalty {} must be a finite value >= 1 (1 = off)",
                      p.repeat_penalty);
  }
  if (!std::isfinite(p.frequency_penalty)) {
    return make_error("sampling: frequency_penalty {} must be finite", p.frequency_penalty);
  }
  if (!std::isfinite(p.presence_penalty)) {
    return make_error("sampling: presence_penalty {} must be finite", p.presence_penalty);
  }
  if (p.repeat_last_n < -1) {
    return make_error("sampling: repeat_last_n {} must be >= -1 (-1 = whole context, 0 = off)",
                      p.repeat_last_n);
  }

  if (!(p.dry_multiplier >= 0.0f) || !std::isfinite(p.dry_multiplier)) {
    return make_error("sampling: dry_multiplier {} must be a finite value >= 0 (0 = off)",
                      p.dry_multiplier);
  }
  if (!(p.dry_base >= 1.0f) || !std::isfinite(p.dry_base)) {
    return make_error("sampling: dry_base {} must be a finite value >= 1", p.dry_base);
  }
  if (p.dry_allowed_length < 1) {
    return make_error("sampling: dry_allowed_length {} must be >= 1", p.dry_allowed_length);
  }
  if (p.dry_penalty_last_n < -1) {
    return make_error("sampling: dry_penalty_last_n {} must be >= -1 (-1 = whole context)",
                      p.dry_penalty_last_n);
  }
  if (p.dry_multiplier > 0.0f && p.dry_penalty_last_n == 0) {
    return make_error("sampling: dry_penalty_last_n 0 leaves DRY nothing to look at while "
                      "dry_multiplier is {}; use -1 or a window > 0", p.dry_multiplier);
  }
  for (size_t i = 0; i < p.dry_sequence_breakers.size(); ++i) {
    const auto& seq = p.dry_sequence_breakers[i];
    if (seq.empty()) return make_error("sampling: dry sequence breaker {} is empty", i);
    for (int32_t id : seq) MINFER_TRY(check_id("dry sequence breaker", id, n_vocab));
  }

  if (!in_closed(p.xtc_probability, 0.0f, 1.0f)) {
    return make_error("sampling: xtc_probability {} is outside [0, 1] (0 = off)",
                      p.xtc_probability);
  }
  if (!in_closed(p.xtc_threshold, 0.0f, 0.5f)) {
    return make_error("sampling: xtc_threshold {} is outside [0, 0.5]", p.xtc_threshold);
  }

  if (p.mirostat < 0 || p.mirostat > 2) {
    return make_error("sampling: mirostat {} must be 0 (off), 1 or 2", p.mirostat);
  }
  if (!(p.mirostat_tau > 0.0f) || !std::isfinite(p.mirostat_tau)) {
    return make_error("sampling: mirostat_tau {} must be a finite value > 0", p.mirostat_tau);
  }
  if (!(p.mirostat_eta > 0.0f) || !std::isfinite(p.mirostat_eta)) {
    return make_error("sampling: mirostat_eta {} must be a finite value > 0", p.mirostat_eta);
  }
  if (p.mirostat_m < 1) return make_error("sampling: mirostat_m {} must be >= 1", p.mirostat_m);

  for (const auto& [id, bias] : p.logit_bias) {
    MINFER_TRY(check_id("logit_bias", id, n_vocab));
    const bool ban = std::isinf(bias) && bias < 0.0f;
    if (!ban && !in_closed(bias, -100.0f, 100.0f)) {
      return make_error("sampling: logit_bias for token {} is {}, outside [-100, 100] "
                        "(-inf bans the token)", id, bias);
    }
  }

  if (p.seed < kSeedRandom) {
    return make_error("sampling: seed {} must be >= 0, or -1 for a random seed", p.seed);
  }
  return Status::ok();
}

}  // namespace minfer
