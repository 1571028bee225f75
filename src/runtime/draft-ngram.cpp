#include "runtime/draft-ngram.h"

#include <algorithm>

namespace minfer {

NgramDraft ngram_draft(std::span<const int32_t> history, const NgramParams& p, int n_draft) {
  NgramDraft d;
  const int h = static_cast<int>(history.size());
  if (n_draft < 1 || p.n_min < 1) return d;
  for (int n = std::min(p.n_max, h - 1); n >= p.n_min; --n) {
    const std::span<const int32_t> suffix = history.subspan(static_cast<size_t>(h - n));
    // Latest occurrence first: start positions h - n - 1 down to 0 (the suffix itself excluded).
    for (int start = h - n - 1; start >= 0; --start) {
      if (!std::equal(suffix.begin(), suffix.end(), history.begin() + start)) continue;
      const int from = start + n;  // < h: at least one token follows the occurrence
      const int len = std::min(n_draft, h - from);
      d.tokens.assign(history.begin() + from, history.begin() + from + len);
      d.match = n;
      return d;
    }
  }
  return d;
}

}  // namespace minfer
