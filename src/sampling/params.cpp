#include "sampling/params.h"

#include <fmt/format.h>

#include <cmath>

#include "sampling/fields.h"

namespace minfer {

namespace {

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
  // Every number against its row of the field table (sampling/fields.h): one range everywhere.
  GenerationSettings g;
  g.sampling = p;
  for (const Field& f : fields()) {
    if (!f.is_sampler() || !f.is_number()) continue;
    MINFER_TRY(check_value(f, f.number(g), fmt::format("sampling: {}", f.key)));
  }
  // What one row cannot say: combinations, and the token ids of the vocabulary.
  if (!std::isfinite(p.temp + p.dynatemp_range)) {
    return make_error("sampling: temperature {} + dynatemp_range {} is not a finite temperature", p.temp, p.dynatemp_range);
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
  const Field& bias_row = *find_field("logit_bias");
  for (const auto& [id, bias] : p.logit_bias) {
    MINFER_TRY(check_id("logit_bias", id, n_vocab));
    if (std::isinf(bias) && bias < 0.0f) continue;  // a ban
    MINFER_TRY(check_value(bias_row, bias, fmt::format("sampling: logit_bias[{}]", id)));
  }
  return Status::ok();
}

}  // namespace minfer
