#include "runtime/session.h"

#include <algorithm>
#include <cstring>

#include "models/model.h"

namespace minfer {

Expected<std::unique_ptr<Session>> Session::create(std::shared_ptr<const Model> model, const SessionParams& p) {
  MINFER_ASSERT(model != nullptr);
  if (p.n_ctx < 0) return make_error("session: n_ctx {} is negative", p.n_ctx);
  ContextParams cp;
  cp.n_seq = 1;
  cp.n_ctx_seq = p.n_ctx;
  cp.n_batch = p.n_batch;
  cp.n_threads = p.n_threads;
  cp.kv_type = p.kv_type;
  cp.backends = p.backends;
  cp.fuse = p.fuse;
  cp.attn = p.attn;
  cp.swa_full = p.swa_full;
  cp.offload = p.offload;
  auto ctx = Context::create(std::move(model), cp);
  if (!ctx) return make_error("{}", ctx.error().message);
  std::unique_ptr<Session> s(new Session());
  s->params_ = p;
  s->ctx_ = std::move(*ctx);
  return s;
}

Session::~Session() = default;

Expected<std::span<const float>> Session::decode(std::span<const int32_t> tokens, int n_out, const DecodeProgress& progress) {
  const int total = static_cast<int>(tokens.size());
  if (total == 0) return make_error("decode: no tokens");
  if (n_out < 1 || n_out > total) return make_error("decode: n_out {} is outside 1..{} (the number of tokens)", n_out, total);
  const int n_past0 = n_past();
  if (n_past0 + total > n_ctx())
    return make_error("decode: context full: {} cached + {} new tokens > n_ctx {}", n_past0, total, n_ctx());
  for (int i = 0; i < total; ++i) {
    const int32_t t = tokens[static_cast<size_t>(i)];
    if (t < 0 || t >= n_vocab()) return make_error("decode: token {} at index {} is outside the vocabulary 0..{}", t, i, n_vocab() - 1);
  }
  const size_t n_vocab_z = static_cast<size_t>(n_vocab());
  logits_.resize(static_cast<size_t>(n_out) * n_vocab_z);
  const int first_out = total - n_out;  // index of the first token whose logits we return
  const int n_batch = ctx_->n_batch();
  for (int start = 0; start < total; start += n_batch) {
    const int len = std::min(n_batch, total - start);
    batch_.clear();
    for (int i = start; i < start + len; ++i)
      batch_.add(tokens[static_cast<size_t>(i)], n_past0 + i, 0, i >= first_out);
    auto rows = ctx_->decode(batch_);
    if (!rows) {
      // An error leaves the session as it was; a sliding-window cache that has already moved
      // past n_past0 cannot go back, and starts empty instead (n_past() says so).
      if (!ctx_->seq_rm(0, n_past0, -1)) ctx_->seq_clear(0);
      return rows.error();
    }
    if (!rows->empty())
      std::memcpy(logits_.data() + static_cast<size_t>(std::max(start, first_out) - first_out) * n_vocab_z, rows->data(),
                  rows->size_bytes());
    if (progress && start + len < total && !progress(start + len, total)) {
      if (!ctx_->seq_rm(0, n_past0, -1)) ctx_->seq_clear(0);  // as after an error
      return make_error("decode: cancelled after {} of {} tokens", start + len, total);
    }
  }
  return std::span<const float>(logits_);
}

}  // namespace minfer
