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
  // Until two row counts are known: every extra row costs 10% of a single-row pass.
  const double det = sw_ * sxx_ - sx_ * sx_;
  if (sw_ > 0 && det > 1e-12 * sw_ * sw_) {
    const double b = (sw_ * sxy_ - sx_ * sy_) / det;
    const double a = (sy_ - b * sx_) / sw_;
    const double v = a + b * rows;
    if (v > 0) return v;
  }
  const double base = sw_ > 0 ? sy_ / sw_ : 1.0;
  return base * (1.0 + 0.1 * (rows - 1));
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
  const double x = n + 1;
  sw_ = sw_ * kForget + 1.0;
  sx_ = sx_ * kForget + x;
  sxx_ = sxx_ * kForget + x * x;
  sy_ = sy_ * kForget + verify_s;
  sxy_ = sxy_ * kForget + x * verify_s;
}

}  // namespace minfer
