#include "runtime/draft-length.h"

#include <algorithm>

namespace minfer {

namespace {
constexpr double kForget = 0.98;  // weight of the past per recorded step
}  // namespace

DraftLength::DraftLength(int n_max)
    : n_max_(std::max(0, n_max)), tries_(static_cast<size_t>(n_max_), 0.0), hits_(static_cast<size_t>(n_max_), 0.0) {}

double DraftLength::acceptance(int depth) const {
  const size_t d = static_cast<size_t>(depth - 1);
  return (hits_[d] + 0.5) / (tries_[d] + 0.5);
}

double DraftLength::verify_cost(int rows) const {
  const double det = sw_ * sxx_ - sx_ * sx_;
  if (sw_ > 0 && det > 1e-6 * sw_ * sw_) {
    const double b = (sw_ * sxy_ - sx_ * sy_) / det;
    const double a = (sy_ - b * sx_) / sw_;
    const double v = a + b * rows;
    if (v > 0 && b >= 0) return v;
  }
  // One row count seen so far (or none): assume every extra row costs 25% of a single-row
  // pass, anchored at the mean of what was measured. Pessimistic on purpose: CPU passes grow
  // quickly with rows (the output head is computed for every one), and a draft that is too long
  // costs more than one that is too short.
  constexpr double kPerRow = 0.25;
  if (sw_ <= 0) return 1.0 + kPerRow * (rows - 1);
  const double mean_x = sx_ / sw_, mean_y = sy_ / sw_;
  return mean_y * (1.0 + kPerRow * (rows - 1)) / (1.0 + kPerRow * (mean_x - 1));
}

int DraftLength::choose(int limit) {
  const int hi = std::min(n_max_, limit);
  if (hi <= 0) return 0;
  const double t_draft = draft_n_ > 0 ? draft_s_ / draft_n_ : 0.0;
  int best_k = 0;
  double best = 1.0 / verify_cost(1);
  double e = 1.0, chain = 1.0;
  for (int k = 1; k <= hi; ++k) {
    chain *= acceptance(k);
    e += chain;
    const double rate = e / (k * t_draft + verify_cost(k + 1));
    if (rate > best) {
      best = rate;
      best_k = k;
    }
  }
  if (best_k == 0 && ++zero_steps_ >= kProbeEvery) {
    zero_steps_ = 0;
    return 1;
  }
  return best_k;
}

void DraftLength::record(int n, int j, double draft_s, double verify_s) {
  n = std::min(n, n_max_);
  for (double& v : tries_) v *= kForget;
  for (double& v : hits_) v *= kForget;
  for (int d = 1; d <= n && d <= j + 1; ++d) {  // depth d was tried when the d - 1 before it held
    tries_[static_cast<size_t>(d - 1)] += 1.0;
    if (d <= j) hits_[static_cast<size_t>(d - 1)] += 1.0;
  }
  if (n > 0) {
    draft_s_ = draft_s_ * kForget + draft_s;
    draft_n_ = draft_n_ * kForget + n;
  }
  if (verify_s < 0) return;  // the pass's time is not this draft's alone
  const double x = n + 1;
  sw_ = sw_ * kForget + 1.0;
  sx_ = sx_ * kForget + x;
  sxx_ = sxx_ * kForget + x * x;
  sy_ = sy_ * kForget + verify_s;
  sxy_ = sxy_ * kForget + x * verify_s;
}

}  // namespace minfer
