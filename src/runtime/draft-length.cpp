#include "runtime/draft-length.h"

#include <algorithm>

namespace minfer {

namespace {
constexpr double kForgetAcceptance = 0.98;  // weight of the past per drafted step
constexpr double kForgetShape = 0.9;        // weight of the past per pass of the same rows
constexpr double kForgetScale = 0.8;        // weight of the past per pass (the machine's speed now)
constexpr double kClip = 3.0;               // a pass counts at most this many times its estimate
}  // namespace

PassCost::PassCost(int max_rows)
    : sum_(static_cast<size_t>(std::max(1, max_rows)), 0.0), weight_(sum_.size(), 0.0), seen_(sum_.size(), false) {}

void PassCost::record(int rows, double seconds) {
  if (rows < 1 || static_cast<size_t>(rows) > sum_.size()) return;
  const size_t i = static_cast<size_t>(rows - 1);
  if (!(seconds > 0) || !seen_[i]) {  // the first pass of a row count builds its graph: not a measure of the next ones
    seen_[i] = true;
    return;
  }
  if (scale_ <= 0) {
    scale_ = seconds / shape(rows);
  } else {
    seconds = std::min(seconds, kClip * scale_ * shape(rows));
    if (weight_[i] > 0 || i == 0) scale_ = scale_ * kForgetScale + (1.0 - kForgetScale) * seconds / shape(rows);
  }
  if (i == 0) {  // the unit of the shape: a 1-row pass is the scale
    sum_[0] = weight_[0] = 1.0;
    return;
  }
  sum_[i] = sum_[i] * kForgetShape + seconds / scale_;
  weight_[i] = weight_[i] * kForgetShape + 1.0;
}

double PassCost::operator()(int rows) const { return (scale_ > 0 ? scale_ : 1.0) * shape(rows); }

double PassCost::shape(int rows) const {
  rows = std::clamp(rows, 1, static_cast<int>(sum_.size()));
  const size_t r = static_cast<size_t>(rows - 1);
  if (weight_[r] > 0) return mean(r);
  // The nearest measured counts below and above.
  int lo = -1, hi = -1;
  for (int i = static_cast<int>(r) - 1; i >= 0 && lo < 0; --i)
    if (weight_[static_cast<size_t>(i)] > 0) lo = i;
  for (size_t i = r + 1; i < sum_.size() && hi < 0; ++i)
    if (weight_[i] > 0) hi = static_cast<int>(i);
  if (lo < 0 && hi < 0) return 1.0 + kPerRowPrior * static_cast<double>(r);  // nothing measured
  auto at = [&](int i) { return mean(static_cast<size_t>(i)); };
  const double one = [&] {  // a 1-row pass, as far as anything says
    if (weight_[0] > 0) return at(0);
    const int ref = lo >= 0 ? lo : hi;
    return at(ref) / (1.0 + kPerRowPrior * ref);
  }();
  if (lo >= 0 && hi >= 0) return at(lo) + (at(hi) - at(lo)) * (static_cast<double>(r) - lo) / (hi - lo);
  if (lo < 0) return std::min(at(hi), one * (1.0 + kPerRowPrior * static_cast<double>(r)));  // r below every measured count
  // Past the largest measured count: the steeper of the measured slope and the prior's.
  double slope = kPerRowPrior * one;
  for (int i = lo - 1; i >= 0; --i)
    if (weight_[static_cast<size_t>(i)] > 0) {
      slope = std::max(slope, (at(lo) - at(i)) / (lo - i));
      break;
    }
  return at(lo) + slope * (static_cast<double>(r) - lo);
}

int PassCost::tried() const {
  for (size_t i = seen_.size(); i > 0; --i)
    if (seen_[i - 1]) return static_cast<int>(i);
  return 0;
}

DraftLength::DraftLength(int n_max)
    : n_max_(std::max(0, n_max)), tries_(static_cast<size_t>(n_max_), 0.0), hits_(static_cast<size_t>(n_max_), 0.0) {}

double DraftLength::acceptance(int depth) const {
  // One pseudo-try at the estimate of the depth before (kPrior for depth 1).
  double a = kPrior;
  for (int d = 1; d <= depth; ++d) {
    const size_t i = static_cast<size_t>(d - 1);
    a = (hits_[i] + a) / (tries_[i] + 1.0);
  }
  return a;
}

int DraftLength::choose(int limit, const PassCost& pass, int n_min) {
  const int lo = std::max(1, n_min);  // the shortest draft worth a verify pass
  const int hi = std::min({n_max_, limit, std::max(pass.tried(), lo)});  // k + 1 rows: one past the longest tried
  if (hi < lo) return 0;
  const double t_draft = draft_n_ > 0 ? draft_s_ / draft_n_ : 0.0;
  int best_k = 0;
  double best = 1.0 / pass(1);
  double e = 1.0, chain = 1.0, a = kPrior;
  for (int k = 1; k <= hi; ++k) {
    const size_t i = static_cast<size_t>(k - 1);
    a = (hits_[i] + a) / (tries_[i] + 1.0);  // acceptance(k), built on acceptance(k - 1)
    chain *= a;
    e += chain;
    const double rate = e / (k * t_draft + pass(k + 1));
    if (k >= lo && rate > best) {
      best = rate;
      best_k = k;
    }
  }
  if (best_k > 0) {
    probe_every_ = kProbeEvery;  // drafting pays (again): probe soon after it stops
    probing_ = false;
    zero_steps_ = 0;
    return best_k;
  }
  if (probing_) probe_every_ = std::min(2 * probe_every_, kProbeMax);  // the probe changed nothing
  probing_ = false;
  if (++zero_steps_ < probe_every_) return 0;
  zero_steps_ = 0;
  probing_ = true;
  return lo;
}

void DraftLength::record(int n, int j, double draft_s) {
  n = std::min(n, n_max_);
  if (n <= 0) return;
  if (probing_ && j > 0) {  // a probe held: the next one comes soon
    probe_every_ = kProbeEvery;
    probing_ = false;
  }
  for (double& v : tries_) v *= kForgetAcceptance;
  for (double& v : hits_) v *= kForgetAcceptance;
  for (int d = 1; d <= n && d <= j + 1; ++d) {  // depth d was tried when the d - 1 before it held
    tries_[static_cast<size_t>(d - 1)] += 1.0;
    if (d <= j) hits_[static_cast<size_t>(d - 1)] += 1.0;
  }
  draft_s_ = draft_s_ * kForgetAcceptance + draft_s;
  draft_n_ = draft_n_ * kForgetAcceptance + n;
}

}  // namespace minfer
