// Adaptive draft length: how many tokens to draft next, from the acceptance measured at each
// depth and the measured costs of drafting and of the target's passes.
//
//   PassCost pass;                           // one per target sequence, shared by the sources
//   DraftLength len(8);
//   int k = len.choose(room, pass);          // 0 .. min(8, room)
//   ... draft k (draft_s), the target's pass over k + 1 rows (pass_s), j of them accepted ...
//   len.record(k, j, draft_s);
//   pass.record(k + 1, pass_s);              // plain steps too: pass.record(1, pass_s)
//
// With a_d the chance that the draft token at depth d is accepted once the ones before it were,
// a draft of k tokens yields
//   E(k) = 1 + a_1 + a_1 a_2 + ... + a_1 ... a_k        tokens per step (the 1: the target's own)
// for a cost of
//   C(k) = k * t_draft + t_pass(k + 1)                 (t_pass: PassCost, every pass measured)
// and k maximizes E(k) / C(k); k = 0 (a plain step) is one of the choices, so drafting stops
// when it does not pay. A pass is at most one row longer than the longest one tried (CPU passes
// grow faster than linearly past a few rows on some types, Q4_1 among them: a 5-row verify can
// cost 3 plain steps), so lengths ramp up as their costs become known.
//
// Acceptances are exponentially forgetting counts, forgotten per drafted step (a run of plain
// steps keeps what was learnt); a depth with few tries leans on the one before it (depth 1 on
// kPrior), so longer drafts get tried when shorter ones hold. A run of plain steps is broken by
// a probe (the shortest draft allowed), on the kProbeEvery-th plain step at first, twice as late
// after each probe that did not change the choice (up to kProbeMax), and soon again after one
// that held: a source that never agrees costs under 1%, and one that starts to agree is found
// again.
#pragma once

#include <vector>

namespace minfer {

// Seconds of the target's pass over `rows` rows of one sequence, from measured passes (the
// first of each row count is left out: it builds that count's graph), as scale x shape(rows):
// the shape is a forgetting mean per row count of the passes' times over the scale (shape(1) = 1
// once a 1-row pass was measured), the scale a faster-forgetting mean over every pass of its
// time over its row count's shape. When other processes slow the machine down, every estimate
// moves with the passes of any row count, so the costs of drafts stay right relative to a plain
// step (a per-count mean alone would keep the old speed for the counts not run lately). A
// sample is clipped at 3x the estimate. Between measured counts the shape is linear; past the
// largest it grows by the steeper of the measured slope and kPerRowPrior of a 1-row pass per
// row (CPU passes grow with rows: the output head is computed for each one).
class PassCost {
 public:
  explicit PassCost(int max_rows = 64);
  void record(int rows, double seconds);  // rows 1..max_rows; seconds <= 0 (not known): counts as tried only
  double operator()(int rows) const;      // nothing measured: 1 + kPerRowPrior * (rows - 1)
  int tried() const;                      // the most rows a pass has had (0: none)
  static constexpr double kPerRowPrior = 0.25;

 private:
  std::vector<double> sum_, weight_;  // [rows - 1]: time / scale_
  std::vector<bool> seen_;            // [rows - 1]: a pass of that many rows ran (the first is not counted)
  double scale_ = 0;                  // seconds per unit of shape (0: nothing measured)
  double mean(size_t i) const { return sum_[i] / weight_[i]; }
  double shape(int rows) const;
};

class DraftLength {
 public:
  explicit DraftLength(int n_max);
  // 0 (a plain step) or a length in max(1, n_min)..min(n_max, limit): limit is the most tokens
  // the caller can draft now, n_min the shortest draft it would verify.
  int choose(int limit, const PassCost& pass, int n_min = 0);
  // A step that drafted n tokens (n may be less than chosen; 0: nothing to record) and
  // accepted j of them, spending draft_s drafting.
  void record(int n, int j, double draft_s);
  double acceptance(int depth) const;  // a_depth (1-based), the current estimate
  static constexpr int kProbeEvery = 8, kProbeMax = 128;
  static constexpr double kPrior = 0.5;  // a_1 before any draft was compared

 private:
  int n_max_;
  std::vector<double> tries_, hits_;  // [depth - 1]
  double draft_s_ = 0, draft_n_ = 0;  // seconds per drafted token: draft_s_ / draft_n_
  int zero_steps_ = 0, probe_every_ = kProbeEvery;
  bool probing_ = false;  // the last choice was a probe
};

}  // namespace minfer
