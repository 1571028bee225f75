// Adaptive draft length: how many tokens to draft next, from the acceptance measured at each
// depth and the measured cost of drafting and of verifying. With a_d the chance that the draft
// token at depth d is accepted once the ones before it were, a draft of k tokens yields
//   E(k) = 1 + a_1 + a_1 a_2 + ... + a_1 ... a_k        tokens per step (the 1: the target's own)
// for a cost of
//   C(k) = k * t_draft + t_verify(k + 1)               (t_verify: a linear fit of measured passes)
// and k maximizes E(k) / C(k). Estimates are exponentially forgetting counts, optimistic where
// nothing was measured ((hits + 1/2) / (tries + 1/2): an untried depth counts as accepted, so
// deeper drafts get tried); a run of steps at k = 0 is broken by a probe at k = 1 every
// kProbeEvery steps, so a bad start does not stop drafting for good.
//
//   DraftLength len(8);
//   int k = len.choose(room);                 // 0 .. min(8, room)
//   ... draft k, verify, j of them accepted ...
//   len.record(k, j, draft_s, verify_s);
#pragma once

#include <vector>

namespace minfer {

class DraftLength {
 public:
  explicit DraftLength(int n_max);
  int choose(int limit);  // limit: the most tokens the caller can draft now
  // A step that drafted n tokens (n may be less than chosen), accepted j of them, spending
  // draft_s drafting and verify_s in the target's pass over n + 1 rows (negative: unknown, the
  // time fit is left as it was).
  void record(int n, int j, double draft_s, double verify_s);
  double acceptance(int depth) const;  // a_depth (1-based), the current estimate
  static constexpr int kProbeEvery = 8;

 private:
  int n_max_;
  std::vector<double> tries_, hits_;  // [depth - 1]
  double draft_s_ = 0, draft_n_ = 0;  // seconds per drafted token: draft_s_ / draft_n_
  // Least-squares fit of verify seconds against rows: sums of w, w*x, w*x^2, w*y, w*x*y.
  double sw_ = 0, sx_ = 0, sxx_ = 0, sy_ = 0, sxy_ = 0;
  int zero_steps_ = 0;
  double verify_cost(int rows) const;
};

}  // namespace minfer
