// DRY ("don't repeat yourself", p-e-w 2024, as in KoboldCpp and llama.cpp): penalize the token
// that would extend a sequence already present in the window. The longest match of the window's
// suffix ending at every earlier position comes from one Z-array over the reversed window, so a
// step costs O(window) whatever the repeats look like.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <utility>

#include "sampling/stages.h"

namespace minfer::sampling {

namespace {

// Tokens after the end of the most recent complete breaker occurrence in `w` (w.size() if none):
// a repeat may not reach back past that point.
int64_t breaker_limit(std::span<const int32_t> w,
                      const std::vector<std::vector<int32_t>>& breakers) {
  const int64_t n = static_cast<int64_t>(w.size());
  int64_t limit = n;
  for (const auto& b : breakers) {
    const int64_t len = static_cast<int64_t>(b.size());
    if (len == 0 || len > n) continue;
    // Occurrence ending at e (exclusive); one ending at or before n - limit cannot lower it.
    for (int64_t e = n; e >= len && n - e < limit; --e) {
      if (std::equal(b.begin(), b.end(), w.begin() + (e - len))) {
        limit = n - e;
        break;
      }
    }
  }
  return limit;
}

}  // namespace

void dry(std::span<float> logits, std::span<const int32_t> window, float multiplier,
         float base, int32_t allowed_length, const std::vector<std::vector<int32_t>>& breakers) {
  const int64_t n = static_cast<int64_t>(window.size());
  if (multiplier <= 0.0f || n < 2) return;
  const int64_t limit = breaker_limit(window, breakers);
  if (limit < allowed_length) return;

  // r(k) = window[n-1-k]: the window read backwards. z[i] = length of the longest common prefix
  // of r and r[i..], i.e. how many tokens ending at window[n-1-i] equal the window's last ones.
  auto r = [&](int64_t k) { return window[static_cast<size_t>(n - 1 - k)]; };
  std::vector<int64_t> z(static_cast<size_t>(n), 0);
  z[0] = n;
  for (int64_t i = 1, lo = 0, hi = 0; i < n; ++i) {  // [lo, hi): rightmost match box
    int64_t len = i < hi ? std::min(hi - i, z[static_cast<size_t>(i - lo)]) : 0;
    while (i + len < n && r(len) == r(i + len)) ++len;
    z[static_cast<size_t>(i)] = len;
    if (i + len > hi) {
      lo = i;
      hi = i + len;
    }
  }

  // (candidate, repeat length) for each earlier end position j = n-1-i whose match qualifies.
  std::vector<std::pair<int32_t, int64_t>> hits;
  for (int64_t i = 1; i < n; ++i) {
    const int64_t len = std::min(z[static_cast<size_t>(i)], limit);
    if (len < allowed_length) continue;
    const int32_t cand = window[static_cast<size_t>(n - i)];  // the token after j
    if (cand < 0 || static_cast<size_t>(cand) >= logits.size()) continue;
    const bool is_breaker = std::any_of(breakers.begin(), breakers.end(), [&](const auto& b) {
      return b.size() == 1 && b[0] == cand;
    });
    if (!is_breaker) hits.emplace_back(cand, len);
  }
  if (hits.empty()) return;
  std::sort(hits.begin(), hits.end(), [](const auto& a, const auto& b) {
    return a.first < b.first || (a.first == b.first && a.second > b.second);
  });

  // Largest exponent keeping multiplier * base^e below FLT_MAX / 2, so the logit stays finite.
  const double max_exp = base > 1.0f ? std::log(FLT_MAX / 2.0 / multiplier) / std::log(base)
                                     : static_cast<double>(n);
  for (size_t i = 0; i < hits.size(); ++i) {
    if (i > 0 && hits[i].first == hits[i - 1].first) continue;  // first is the longest
    const double e = std::min(static_cast<double>(hits[i].second - allowed_length), max_exp);
    logits[hits[i].first] -= static_cast<float>(multiplier * std::pow(base, e));
  }
}

}  // namespace minfer::sampling
