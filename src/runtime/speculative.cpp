#include "runtime/speculative.h"

#include <algorithm>
#include <chrono>

#include "runtime/draft-model.h"

namespace minfer {

Status validate(const SpecParams& p) {
  if (p.n_max < 1 || p.n_max > kSpecMaxDraft)
    return make_error("--spec-draft-n {} is outside 1..{} (a longer verify pass changes the attention arithmetic, "
                      "so the output would no longer be that of plain decoding)",
                      p.n_max, kSpecMaxDraft);
  if (p.n_min < 0 || p.n_min > p.n_max)
    return make_error("speculative n_min {} is outside 0..{} (n_max)", p.n_min, p.n_max);
  if (!(p.p_min >= 0.0f && p.p_min <= 1.0f)) return make_error("speculative p_min {} is outside [0, 1]", p.p_min);
  if (p.ngram_params.n_min < 1 || p.ngram_params.n_max < p.ngram_params.n_min || p.ngram_params.n_max > 64)
    return make_error("n-gram sizes {}..{} are not within 1..64 (min <= max)", p.ngram_params.n_min, p.ngram_params.n_max);
  return Status::ok();
}

const char* draft_source_name(DraftSource s) {
  switch (s) {
    case DraftSource::kNone: return "none";
    case DraftSource::kNgram: return "ngram";
    case DraftSource::kModel: return "draft";
  }
  return "?";
}

void SpecStats::add(const SpecStats& o) {
  n_drafted += o.n_drafted;
  n_accepted += o.n_accepted;
  n_steps += o.n_steps;
  for (size_t i = 0; i < drafted_by.size(); ++i) {
    drafted_by[i] += o.drafted_by[i];
    accepted_by[i] += o.accepted_by[i];
  }
  draft_s += o.draft_s;
  n_draft_errors += o.n_draft_errors;
  if (!o.last_draft_error.empty()) last_draft_error = o.last_draft_error;
  verify_s += o.verify_s;
  n_verify_rows += o.n_verify_rows;
}

SpecStats SpecStats::since(const SpecStats& b) const {
  SpecStats d = *this;
  d.n_drafted -= b.n_drafted;
  d.n_accepted -= b.n_accepted;
  d.n_steps -= b.n_steps;
  for (size_t i = 0; i < d.drafted_by.size(); ++i) {
    d.drafted_by[i] -= b.drafted_by[i];
    d.accepted_by[i] -= b.accepted_by[i];
  }
  d.draft_s -= b.draft_s;
  d.n_draft_errors -= b.n_draft_errors;
  if (d.n_draft_errors == 0) d.last_draft_error.clear();
  d.verify_s -= b.verify_s;
  d.n_verify_rows -= b.n_verify_rows;
  return d;
}

std::string spec_summary(const SpecStats& s, std::string_view label) {
  std::string out = fmt::format("{} drafted {}, accepted {} ({:.1f}%)", label, s.n_drafted, s.n_accepted, 100.0 * s.acceptance());
  const size_t ng = static_cast<size_t>(DraftSource::kNgram), md = static_cast<size_t>(DraftSource::kModel);
  if (s.drafted_by[ng] > 0 && s.drafted_by[md] > 0)
    out += fmt::format("; ngram {}/{}, draft model {}/{}", s.accepted_by[ng], s.drafted_by[ng], s.accepted_by[md],
                       s.drafted_by[md]);
  if (s.n_draft_errors > 0)
    out += fmt::format("; the draft model failed {} times (last: {})", s.n_draft_errors, s.last_draft_error);
  return out;
}

Speculator::Speculator(const SpecParams& p, DraftModel* model, int seq)
    : p_(p), model_(p.model ? model : nullptr), seq_(seq), len_{DraftLength(p.n_max), DraftLength(p.n_max), DraftLength(p.n_max)} {}

Speculator::Plan Speculator::plan(std::span<const int32_t> history, int limit) {
  Plan plan;
  limit = std::min(limit, p_.n_max);
  if (limit < std::max(1, p_.n_min) || history.empty()) return plan;
  auto length = [&](DraftSource s) {
    return p_.adaptive ? len_[static_cast<size_t>(s)].choose(limit, pass_, p_.n_min) : limit;
  };
  const int n_model = model_ ? length(DraftSource::kModel) : 0;  // once per step: choose() counts steps
  if (p_.ngram) {
    const int n = length(DraftSource::kNgram);
    NgramDraft d = n > 0 ? ngram_draft(history, p_.ngram_params, n) : NgramDraft{};
    // The better source: the n-gram draft unless the draft model has been accepted more often.
    const bool prefer = len_[static_cast<size_t>(DraftSource::kNgram)].acceptance(1) >=
                        len_[static_cast<size_t>(DraftSource::kModel)].acceptance(1);
    if (!d.tokens.empty() && (prefer || n_model == 0)) {
      plan.source = DraftSource::kNgram;
      plan.n = n;
      plan.tokens = std::move(d.tokens);
      return plan;
    }
    plan.fallback = std::move(d.tokens);
  }
  if (n_model > 0) {
    plan.source = DraftSource::kModel;
    plan.n = n_model;
  }
  return plan;
}

Expected<Speculator::Plan> Speculator::draft(std::span<const int32_t> history, int limit) {
  Plan p = plan(history, limit);
  if (p.source != DraftSource::kModel) return p;
  const auto t0 = std::chrono::steady_clock::now();
  DraftRequest r{.seq = seq_, .history = history, .n_max = p.n, .p_min = p_.p_min, .out = {}};
  if (Status st = model_->propose({&r, 1}); !st) {  // decode without a draft this step
    stats_.n_draft_errors++;
    stats_.last_draft_error = st.error().message;
    r.out.clear();
  }
  p.tokens = std::move(r.out);
  p.draft_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  settle(p);
  return p;
}

bool Speculator::settle(Plan& p) {
  if (p.source == DraftSource::kModel && p.tokens.empty()) {
    len_[static_cast<size_t>(DraftSource::kModel)].record(1, 0, p.draft_s);  // a miss at depth 1
    if (!p.fallback.empty()) {
      p.source = DraftSource::kNgram;
      p.n = static_cast<int>(p.fallback.size());
      p.tokens = std::move(p.fallback);
      p.draft_s = 0;
    }
  }
  p.fallback.clear();
  if (!usable(p)) p.tokens.clear();
  return !p.tokens.empty();
}

bool Speculator::usable(const Plan& p) const {
  return !p.tokens.empty() && static_cast<int>(p.tokens.size()) >= p_.n_min;
}

void Speculator::record(const Plan& p, int n_compared, int n_agreed, double verify_s) {
  const int n = usable(p) ? n_compared : 0;
  const int j = std::min(n_agreed, n);
  stats_.draft_s += p.draft_s;
  pass_.record(static_cast<int>(p.tokens.size()) + 1, verify_s);
  if (p.source != DraftSource::kNone) len_[static_cast<size_t>(p.source)].record(n, j, p.draft_s);
  if (n == 0) return;
  stats_.n_drafted += n;
  stats_.n_accepted += j;
  stats_.n_steps++;
  if (verify_s > 0) stats_.verify_s += verify_s;
  stats_.n_verify_rows += static_cast<int64_t>(p.tokens.size()) + 1;
  stats_.drafted_by[static_cast<size_t>(p.source)] += n;
  stats_.accepted_by[static_cast<size_t>(p.source)] += j;
}

}  // namespace minfer
