// Speculative decoding's drafting policy for one target sequence: where the next draft comes
// from (n-gram prompt lookup, draft-ngram.h; a draft model, draft-model.h; the better of the two
// when both are on) and how long it is (fixed, or chosen from measured acceptance and costs,
// draft-length.h). The verification is verify_drafts (verify.h), one step for generate() and
// the server's slots: the target samples each drafted position with its own full sampler chain
// and RNG and keeps the drafts while they agree, so the output is exactly that of plain decoding.
//
//   SpecParams sp;  sp.n_max = 4;  sp.ngram = true;
//   Speculator spec(sp, draft_model.get(), /*seq=*/0);     // draft_model may be null
//   auto plan = spec.draft(history, limit);                // history: every token before the next
//   ... decode [next, plan->tokens...] ...
//   verify_drafts(ctx, 0, step, rows, *plan, {.spec = &spec, .verify_s = dt}, sink);  // calls record()
//   std::fprintf(stderr, "%s\n", spec_summary(spec.stats()).c_str());  // [spec] drafted N, accepted M (P%)
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "runtime/draft-length.h"
#include "runtime/draft-ngram.h"

namespace minfer {

class DraftModel;

// A verify pass of more than 63 rows of one sequence would switch the CLI's attention to its
// wide arithmetic (AttnArith::kByBatch), and its logits would no longer be those of plain
// decoding: drafts are at most this long.
inline constexpr int kSpecMaxDraft = 62;

struct SpecParams {
  int n_max = 4;          // most tokens drafted per step
  int n_min = 0;          // a shorter draft is not verified (the step decodes one token)
  float p_min = 0.0f;     // the draft model stops at a token it gives less probability than this
  bool adaptive = true;   // choose each draft's length from measured acceptance and costs (draft-length.h); false: n_max
  bool ngram = false;     // n-gram self-drafting from the prompt and the output
  bool model = true;      // use the draft model when there is one
  NgramParams ngram_params;
};

// OK, or an error naming the bad field and value.
Status validate(const SpecParams& p);

enum class DraftSource : uint8_t { kNone, kNgram, kModel };
const char* draft_source_name(DraftSource s);  // "none", "ngram", "draft"

struct SpecStats {
  int64_t n_drafted = 0;   // drafted tokens the target's sample at their position was compared with
  int64_t n_accepted = 0;  // of those, the ones it agreed with
  int64_t n_steps = 0;     // verify passes that carried a draft
  std::array<int64_t, 3> drafted_by{}, accepted_by{};  // [DraftSource]
  double draft_s = 0;      // time spent drafting
  int64_t n_draft_errors = 0;  // draft model failures (those steps decoded without a draft)
  std::string last_draft_error;
  double verify_s = 0;     // time in the target's passes that carried a draft
  int64_t n_verify_rows = 0;  // rows in those passes (each drafted token plus the one before them)
  void add(const SpecStats& o);
  SpecStats since(const SpecStats& before) const;  // what was counted after `before`
  double acceptance() const { return n_drafted > 0 ? static_cast<double>(n_accepted) / n_drafted : 0.0; }
};
// "[spec] drafted N, accepted M (P%)", and per source when both drafted.
std::string spec_summary(const SpecStats& s, std::string_view label = "[spec]");

class Speculator {
 public:
  // `model` (may be null) drafts on its sequence `seq`; it must outlive the speculator.
  Speculator(const SpecParams& p, DraftModel* model, int seq);

  struct Plan {
    DraftSource source = DraftSource::kNone;
    int n = 0;                      // tokens asked of the source
    std::vector<int32_t> tokens;    // the draft (for kModel: after DraftModel::propose)
    std::vector<int32_t> fallback;  // kModel with n-gram on: the n-gram draft, used when the model drafts nothing
    double draft_s = 0;
  };
  // Decides what to draft after `history` (every token of the sequence before the next one, the
  // last being the token about to be decoded), at most `limit` tokens. An n-gram draft is made
  // here; for kModel the caller runs DraftModel::propose with n (batching several sequences) and
  // stores the result in tokens, or calls draft() which does it for one sequence.
  Plan plan(std::span<const int32_t> history, int limit);
  Expected<Plan> draft(std::span<const int32_t> history, int limit);
  // After the draft model ran (tokens filled): an empty model draft falls back to the n-gram
  // one (counted as a model miss); then whether the draft is long enough to verify
  // (SpecParams::n_min; at least one token). A plan that is not usable has its tokens cleared.
  bool settle(Plan& p);
  // A failed DraftModel::propose for this sequence's plan (the step goes on without a draft).
  void note_draft_error(const std::string& msg) {
    stats_.n_draft_errors++;
    stats_.last_draft_error = msg;
  }
  bool usable(const Plan& p) const;
  // After the pass that verified `p` (every pass, plain ones too: their time is the 1-row cost
  // the adaptive length weighs drafts against): the target's samples were compared with its
  // first n_compared tokens (fewer when generation ended inside the draft) and agreed with the
  // first n_agreed; the pass took verify_s (<= 0: not known, e.g. a pass shared with a prefill).
  void record(const Plan& p, int n_compared, int n_agreed, double verify_s);

  const SpecParams& params() const { return p_; }
  DraftModel* model() const { return model_; }
  int seq() const { return seq_; }
  const SpecStats& stats() const { return stats_; }
  void reset_stats() { stats_ = {}; }

 private:
  SpecParams p_;
  DraftModel* model_;
  int seq_;
  SpecStats stats_;
  std::array<DraftLength, 3> len_;  // [DraftSource]: lengths and acceptance per source
  PassCost pass_{kSpecMaxDraft + 1};  // the target's pass time by rows
};

}  // namespace minfer
