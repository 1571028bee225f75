// The speculative verify step, one place for generate() (sequence 0 of a Session) and every
// server slot (its sequence of the shared Context). The pass [next, d1 .. dk] has been decoded
// with a logits row per token; the target samples row 0, 1, ... in order with its own TokenStep
// (sampler chain and RNG, grammar, stop strings, -n and context limits), exactly as plain
// decoding would: row i follows d_i, so its sample is plain decoding's next token as long as
// every draft before agreed. It keeps the drafts its samples agree with and stops at the first
// disagreement (that sample is the token decoded next, the "bonus") or at the end of generation;
// then it records the acceptance with the Speculator and rolls the rows after the last kept
// token back from the KV cache. Nothing is sampled from a row plain decoding would not have
// computed, so the sampler has nothing to roll back.
//
//   std::vector<int32_t> pass = {next};                       // next: sampled, not decoded yet
//   pass.insert(pass.end(), plan.tokens.begin(), plan.tokens.end());
//   auto logits = session.decode(pass, static_cast<int>(pass.size()));   // a row per token
//   auto v = verify_drafts(session.context(), 0, step, *logits, plan, {.spec = spec, .verify_s = dt},
//                          [&](int i, std::span<const float> row, TokenStep::Result& r) {
//                            return write(r.text);           // false: generation ends with r.token
//                          });
//   if (!v) return v.error();            // the cache could not be rolled back
//   if (!v->sampled) return v->sampled.error();  // a grammar dead end; the cache is rolled back
//   // v->n_accepted drafts are in the cache now; v->next is decoded next (-1: generation ended)
#pragma once

#include <cstdint>
#include <functional>
#include <span>

#include "core/status.h"
#include "runtime/context.h"
#include "runtime/speculative.h"
#include "runtime/step.h"

namespace minfer {

struct VerifyParams {
  // The server's context shift frees positions before the next pass, so the sampler never sees
  // a full context (TokenStep's room is unbounded); otherwise room is what the sequence has left.
  bool context_shift = false;
  Speculator* spec = nullptr;  // records the acceptance (null: a pass without drafts)
  double verify_s = 0;         // the pass's time for the adaptive length (<= 0: not known)
};

// Called after each sampled row i with the step's result (its text may be moved out): emit it,
// count it. Returns false to end generation with this token (cancelled, a deadline).
using VerifySink = std::function<bool(int i, std::span<const float> row, TokenStep::Result& r)>;

struct VerifyResult {
  int n_accepted = 0;     // drafts kept: their K/V stays in the cache after row 0's token
  int n_compared = 0;     // drafts a sample was compared with (fewer than k when generation ended)
  int n_agreed = 0;       // of those, the ones it agreed with (a final token can agree too)
  int n_rolled_back = 0;  // rows removed from the end of the sequence
  int32_t next = -1;      // the token to decode next; -1: generation ended (or sampling failed)
  Status sampled;         // TokenStep::next's error, when sampling failed: generation cannot go on
};

// `logits` holds the pass's rows, [plan.tokens.size() + 1][n_vocab], for the last rows of
// sequence `seq` of `ctx`. Errors: only a rollback the cache refused (its state is then unknown).
Expected<VerifyResult> verify_drafts(Context& ctx, int seq, TokenStep& step, std::span<const float> logits,
                                     const Speculator::Plan& plan, const VerifyParams& p, const VerifySink& sink);

// The most tokens a draft after the next token may have: the pass [next, drafts] must fit in the
// n_free positions it may use, and no draft may sample past n_predict (-1: no limit) with n_gen
// tokens sampled so far.
int draft_limit(int n_free, int n_predict, int n_gen);

}  // namespace minfer
