#include "runtime/draft-ngram.h"

#include <algorithm>

namespace minfer {

namespace {

// The latest occurrence of key = history[end - n, end) that starts before end - n and has at
// least `gap` + 1 tokens after it inside history; the proposal starts `gap` tokens after the
// occurrence. False when there is none.
bool lookup(std::span<const int32_t> history, int end, int n, int gap, int n_draft, NgramDraft& d) {
  const int h = static_cast<int>(history.size());
  const auto key = history.subspan(static_cast<size_t>(end - n), static_cast<size_t>(n));
  // Latest occurrence first: start positions end - n - 1 down to 0 (the key itself excluded).
  for (int start = std::min(end - n - 1, h - n - gap - 1); start >= 0; --start) {
    if (!std::equal(key.begin(), key.end(), history.begin() + start)) continue;
    const int from = start + n + gap;  // < h: at least one token follows
    const int len = std::min(n_draft, h - from);
    d.tokens.assign(history.begin() + from, history.begin() + from + len);
    d.match = n;
    return true;
  }
  return false;
}

}  // namespace

NgramDraft ngram_draft(std::span<const int32_t> history, const NgramParams& p, int n_draft) {
  NgramDraft d;
  const int h = static_cast<int>(history.size());
  if (n_draft < 1 || p.n_min < 1) return d;
  for (int n = std::min(p.n_max, h - 1); n >= p.n_min; --n)
    if (lookup(history, h, n, 0, n_draft, d)) return d;
  // A substitution: the n tokens before the last one, then any token, then the proposal.
  if (p.skip) {
    for (int n = std::min(p.n_max, h - 2); n >= p.n_min; --n) {
      if (lookup(history, h - 1, n, 1, n_draft, d)) {
        d.skipped = true;
        return d;
      }
    }
  }
  return d;
}

}  // namespace minfer
