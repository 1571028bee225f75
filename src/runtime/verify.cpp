#include "runtime/verify.h"

#include <algorithm>
#include <cstdint>

namespace minfer {

Expected<VerifyResult> verify_drafts(Context& ctx, int seq, TokenStep& step, std::span<const float> logits,
                                     const Speculator::Plan& plan, const VerifyParams& p, const VerifySink& sink) {
  const size_t n_vocab = static_cast<size_t>(ctx.n_vocab());
  const int k = static_cast<int>(plan.tokens.size());  // drafts in the pass
  MINFER_ASSERT(logits.size() == static_cast<size_t>(k + 1) * n_vocab);
  const int n_past0 = ctx.seq_len(seq) - (k + 1);  // cached before the pass's first row
  MINFER_ASSERT(n_past0 >= 0);
  VerifyResult v;
  for (int i = 0; i <= k; ++i) {
    const std::span<const float> row = logits.subspan(static_cast<size_t>(i) * n_vocab, n_vocab);
    const int room = p.context_shift ? INT32_MAX : ctx.n_ctx_seq() - (n_past0 + i + 1);
    auto r = step.next(row, room);
    v.n_compared += i < k;
    if (!r) {
      v.sampled = r.error();
      break;
    }
    const bool agree = i < k && r->token == plan.tokens[static_cast<size_t>(i)];
    v.n_agreed += agree;
    if (!sink(i, row, *r) || r->done) break;
    if (agree) {
      ++v.n_accepted;
      continue;
    }
    v.next = r->token;
    break;
  }
  if (p.spec) p.spec->record(plan, v.n_compared, v.n_agreed, p.verify_s);
  // The rows after the last kept draft were computed for tokens the target did not pick (or
  // after the end: plain decoding never decodes the last token either).
  if (k > v.n_accepted) {
    v.n_rolled_back = k - v.n_accepted;
    MINFER_TRY(ctx.seq_rollback(seq, v.n_rolled_back));
  }
  return v;
}

int draft_limit(int n_free, int n_predict, int n_gen) {
  int limit = n_free - 1;
  if (n_predict >= 0) limit = std::min(limit, n_predict - n_gen - 1);
  return limit;
}

}  // namespace minfer
