// A draft model for speculative decoding: a smaller model with the target's vocabulary, on its
// own Context (one sequence per target sequence), proposing tokens greedily. Each call first
// brings the draft's cache in line with the target sequence's tokens (the history), so it
// follows whatever the caller did to the target: rolled-back drafts, a regenerated reply, a
// context shift (a removed range is removed here too, re-roped, rather than prefilled again),
// a new conversation. Requests of several sequences run in one batch per draft depth.
//
//   auto dm = DraftModel::create(draft_model, draft_tok, target_tok, {.n_seq = 1, .n_ctx_seq = 4096});
//   if (!dm) return fail(dm.error());               // a different vocabulary is refused here
//   DraftRequest r{.seq = 0, .history = tokens, .n_max = 4};
//   if (Status st = (*dm)->propose({&r, 1}); !st) return st;
//   r.out;                                          // up to 4 tokens continuing `tokens`
//
// Not thread-safe: one thread drives it (as its Context).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/status.h"
#include "runtime/context.h"
#include "tokenizer/tokenizer.h"

namespace minfer {

class Model;

struct DraftRequest {
  int seq = 0;                          // the draft context's sequence for this target sequence
  std::span<const int32_t> history;     // every token before the first one to propose (not empty)
  int n_max = 4;                        // most tokens proposed
  float p_min = 0.0f;                   // stop at a token whose draft probability is below this
  std::vector<int32_t> out;             // the proposal (may be shorter, even empty)
};

// OK when the draft's ids mean what the target's mean: the same tokenizer model, the same text
// for every id both vocabularies have (sizes within 128), the same special ids where both define
// them. Otherwise an error naming the first difference.
Status check_draft_vocab(const Tokenizer& target, const Tokenizer& draft);

class DraftModel {
 public:
  // `target` is the target model's tokenizer (checked against the draft's, check_draft_vocab);
  // cp.n_ctx_seq is capped at the draft model's training context (a longer history: no draft).
  static Expected<std::unique_ptr<DraftModel>> create(std::shared_ptr<const Model> model, const Tokenizer& draft_tok,
                                                      const Tokenizer& target, const ContextParams& cp);

  // Fills each request's `out`. Errors (a failed forward pass) clear the affected caches.
  Status propose(std::span<DraftRequest> reqs);
  void forget(int seq);                 // the sequence starts over (its cache is dropped)

  int n_seq() const { return ctx_->n_seq(); }
  int n_ctx_seq() const { return ctx_->n_ctx_seq(); }
  double seconds() const { return seconds_; }   // time spent in propose()
  int64_t n_reused() const { return n_reused_; } // cache rows kept by a removal instead of a prefill
  const Context& context() const { return *ctx_; }

 private:
  DraftModel() = default;
  // Brings sequence s's cache to history[0 .. n) (n < history.size(): the last token is fed).
  Status sync(int s, std::span<const int32_t> history, size_t& keep);

  std::unique_ptr<Context> ctx_;
  std::vector<std::vector<int32_t>> cached_;  // [n_seq] tokens whose K/V are in the cache
  int32_t n_vocab_ = 0;                       // ids a proposal may use: both vocabularies have them
  double seconds_ = 0;
  int64_t n_reused_ = 0;
  Batch batch_;
};

}  // namespace minfer
