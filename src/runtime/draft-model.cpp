#include "runtime/draft-model.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "models/model.h"
#include "runtime/prefix-reuse.h"

namespace minfer {

namespace {

// Vocabularies whose sizes differ by more than this are not the same vocabulary padded.
constexpr int32_t kMaxVocabSizeDifference = 128;
// A removed range is removed in the draft's cache too only when at least this many rows after it
// are kept; a shorter tail is cheaper to prefill again.
constexpr size_t kMinReuse = 16;
// Candidate removals tried before prefilling instead.
constexpr int kMaxCutTries = 64;

// The greedy choice among the ids both vocabularies have, and its probability when wanted.
struct Pick {
  int32_t id = -1;
  float p = 1.0f;
};
Pick pick(std::span<const float> row, int32_t n_vocab, bool want_p) {
  Pick r;
  float best = -INFINITY;
  for (int32_t i = 0; i < n_vocab; ++i) {
    if (row[static_cast<size_t>(i)] > best) {
      best = row[static_cast<size_t>(i)];
      r.id = i;
    }
  }
  if (r.id < 0 || !want_p) return r;
  double sum = 0;  // over the shared ids: the draft's own extra ids are never proposed
  for (int32_t i = 0; i < n_vocab; ++i) sum += std::exp(static_cast<double>(row[static_cast<size_t>(i)] - best));
  r.p = static_cast<float>(1.0 / sum);
  return r;
}

}  // namespace

Status check_draft_vocab(const Tokenizer& target, const Tokenizer& draft) {
  if (target.model() != draft.model())
    return make_error("the draft model's tokenizer is '{}' but the target's is '{}': not the same vocabulary",
                      draft.model(), target.model());
  const int32_t nt = target.n_vocab(), nd = draft.n_vocab();
  if (std::abs(nt - nd) > kMaxVocabSizeDifference)
    return make_error("the draft model has {} tokens but the target has {} (more than {} apart): not the same vocabulary",
                      nd, nt, kMaxVocabSizeDifference);
  const int32_t n = std::min(nt, nd);
  int32_t first = -1, n_diff = 0;
  for (int32_t i = 0; i < n; ++i) {
    if (target.token_text(i) == draft.token_text(i)) continue;
    if (first < 0) first = i;
    ++n_diff;
  }
  if (first >= 0)
    return make_error("token {} is '{}' in the draft model but '{}' in the target ({} of {} shared ids differ): not the same vocabulary",
                      first, draft.token_text(first), target.token_text(first), n_diff, n);
  struct Special {
    const char* name;
    int32_t t, d;
  };
  const Special specials[] = {{"bos", target.bos_id(), draft.bos_id()},
                              {"eos", target.eos_id(), draft.eos_id()},
                              {"eot", target.eot_id(), draft.eot_id()},
                              {"unk", target.unk_id(), draft.unk_id()},
                              {"pad", target.pad_id(), draft.pad_id()}};
  for (const Special& s : specials) {
    if (s.t >= 0 && s.d >= 0 && s.t != s.d)
      return make_error("the draft model's {} token is {} but the target's is {}: not the same vocabulary", s.name, s.d, s.t);
  }
  return Status::ok();
}

Expected<std::unique_ptr<DraftModel>> DraftModel::create(std::shared_ptr<const Model> model, const Tokenizer& draft_tok,
                                                         const Tokenizer& target, const ContextParams& cp) {
  MINFER_TRY(check_draft_vocab(target, draft_tok));
  ContextParams dcp = cp;  // positions past the draft's training context would only draft noise
  const int64_t n_train = model->hparams().n_ctx_train;
  if (n_train > 0 && dcp.n_ctx_seq > n_train) dcp.n_ctx_seq = static_cast<int>(n_train);
  auto ctx = Context::create(std::move(model), dcp);
  if (!ctx) return make_error("draft model: {}", ctx.error().message);
  std::unique_ptr<DraftModel> d(new DraftModel());
  d->ctx_ = std::move(*ctx);
  d->cached_.resize(static_cast<size_t>(d->ctx_->n_seq()));
  d->n_vocab_ = std::min({target.n_vocab(), draft_tok.n_vocab(), d->ctx_->n_vocab()});
  return d;
}

void DraftModel::forget(int seq) {
  if (seq < 0 || seq >= n_seq()) return;
  ctx_->seq_clear(seq);
  cached_[static_cast<size_t>(seq)].clear();
}

Status DraftModel::sync(int s, std::span<const int32_t> history, size_t& keep) {
  std::vector<int32_t>& c = cached_[static_cast<size_t>(s)];
  const size_t h = history.size();
  keep = std::min(common_prefix(c, history), h - 1);
  if (keep < c.size()) {
    // A range removed from the target (a context shift): c[keep + d ..] continues history[keep ..].
    const size_t rest = c.size() - keep;
    int tries = 0;
    for (size_t d = 1; d < rest && tries < kMaxCutTries; ++d) {
      if (c[keep + d] != history[keep]) continue;
      ++tries;
      const size_t m = std::min(rest - d, h - 1 - keep);
      if (m < kMinReuse) break;
      if (!std::equal(c.begin() + static_cast<std::ptrdiff_t>(keep + d),
                      c.begin() + static_cast<std::ptrdiff_t>(keep + d + m),
                      history.begin() + static_cast<std::ptrdiff_t>(keep)))
        continue;
      // A sliding-window cache that cannot shift this far: cut back below instead.
      if (!ctx_->seq_rm(s, static_cast<int>(keep), static_cast<int>(keep + d))) break;
      c.erase(c.begin() + static_cast<std::ptrdiff_t>(keep), c.begin() + static_cast<std::ptrdiff_t>(keep + d));
      n_reused_ += static_cast<int64_t>(m);
      keep = std::min(common_prefix(c, history), h - 1);
      break;
    }
    if (keep < c.size()) {
      if (!ctx_->can_keep(s, static_cast<int>(keep))) keep = 0;  // the ring lost the window before keep
      MINFER_TRY(keep_prefix(*ctx_, s, c, keep));
    }
  }
  return Status::ok();
}

Status DraftModel::propose(std::span<DraftRequest> reqs) {
  const auto t0 = std::chrono::steady_clock::now();
  struct Live {
    DraftRequest* r;
    int n = 0;        // tokens it may propose
    Pick cur;         // the next proposal (id -1: none yet)
    bool done = false;
  };
  std::vector<Live> live;
  live.reserve(reqs.size());
  for (DraftRequest& r : reqs) {
    r.out.clear();
    if (r.seq < 0 || r.seq >= n_seq()) return make_error("draft model: sequence {} is outside 0..{}", r.seq, n_seq() - 1);
    const int h = static_cast<int>(r.history.size());
    // The draft decodes the history and all but the last proposed token.
    const int n = std::min(r.n_max, n_ctx_seq() - h + 1);
    if (h == 0 || n < 1) continue;
    // A target id the draft does not have (added tokens past its vocabulary) cannot be fed to
    // it: no draft for this history.
    const int32_t nv = ctx_->n_vocab();
    if (std::any_of(r.history.begin(), r.history.end(), [nv](int32_t t) { return t < 0 || t >= nv; })) continue;
    live.push_back({&r, n, {}, false});
  }
  std::vector<Live*> row_owner;  // [flagged row] of the batch being built
  const bool want_p = std::any_of(live.begin(), live.end(), [](const Live& l) { return l.r->p_min > 0.0f; });
  auto fail = [&](const Error& e) {
    for (Live& l : live) forget(l.r->seq);
    seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return Status(make_error("draft model: {}", e.message));
  };
  auto flush = [&]() -> Status {
    if (batch_.size() == 0) return Status::ok();
    auto rows = ctx_->decode(batch_);
    if (!rows) return rows.error();
    const size_t nv = static_cast<size_t>(ctx_->n_vocab());
    for (size_t i = 0; i < row_owner.size(); ++i) row_owner[i]->cur = pick(rows->subspan(i * nv, nv), n_vocab_, want_p);
    batch_.clear();
    row_owner.clear();
    return Status::ok();
  };

  // Catch up: every sequence's cache becomes its history, the last token's logits kept.
  batch_.clear();
  for (Live& l : live) {
    size_t keep = 0;
    if (Status st = sync(l.r->seq, l.r->history, keep); !st) return fail(st.error());
    std::vector<int32_t>& c = cached_[static_cast<size_t>(l.r->seq)];
    for (size_t i = keep; i < l.r->history.size(); ++i) {
      if (batch_.size() == ctx_->n_batch())
        if (Status st = flush(); !st) return fail(st.error());
      const bool last = i + 1 == l.r->history.size();
      batch_.add(l.r->history[i], static_cast<int32_t>(c.size()), l.r->seq, last);
      c.push_back(l.r->history[i]);
      if (last) row_owner.push_back(&l);
    }
  }
  if (Status st = flush(); !st) return fail(st.error());

  // Greedy drafting: one batch per depth over the sequences still drafting.
  for (;;) {
    for (Live& l : live) {
      if (l.done) continue;
      DraftRequest& r = *l.r;
      if (l.cur.id < 0 || l.cur.p < r.p_min) {
        l.done = true;
        continue;
      }
      r.out.push_back(l.cur.id);
      if (static_cast<int>(r.out.size()) >= l.n) {
        l.done = true;
        continue;
      }
      std::vector<int32_t>& c = cached_[static_cast<size_t>(r.seq)];
      batch_.add(l.cur.id, static_cast<int32_t>(c.size()), r.seq, true);
      c.push_back(l.cur.id);
      row_owner.push_back(&l);
      l.cur = {};
    }
    if (batch_.size() == 0) break;
    if (Status st = flush(); !st) return fail(st.error());
  }
  seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return Status::ok();
}

}  // namespace minfer
