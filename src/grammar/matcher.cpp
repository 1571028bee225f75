#include "grammar/matcher.h"

#include <algorithm>
#include <set>

namespace minfer {

GrammarMatcher::GrammarMatcher(std::shared_ptr<const Grammar> g) : g_(std::move(g)) {
  for (int32_t start : g_->alts[static_cast<size_t>(g_->root)]) {
    GrammarStack s;
    if (g_->elems[static_cast<size_t>(start)].kind != GrammarElem::kEnd) s.push_back(start);
    expand(std::move(s), stacks_);
  }
  normalize(stacks_);
}

// Until the top is a character set (or the stack is empty): a rule reference on top is
// replaced by each of its alternatives, above the rest of the referencing alternative. A stack
// seen before in this expansion is dropped, so rules that reach themselves through empty
// matches without growing the stack (( [x]* )*) end; the parser refused the cycles that grow it.
void GrammarMatcher::expand(GrammarStack s0, GrammarStacks& out) const {
  std::vector<GrammarStack> todo{std::move(s0)};
  std::set<GrammarStack> seen;
  while (!todo.empty()) {
    GrammarStack s = std::move(todo.back());
    todo.pop_back();
    if (!seen.insert(s).second) continue;
    if (s.empty()) {
      out.push_back(std::move(s));
      continue;
    }
    const int32_t p = s.back();
    const GrammarElem& e = g_->elems[static_cast<size_t>(p)];
    if (e.kind == GrammarElem::kChars) {
      out.push_back(std::move(s));
      continue;
    }
    s.pop_back();
    if (g_->elems[static_cast<size_t>(p) + 1].kind != GrammarElem::kEnd) s.push_back(p + 1);
    for (int32_t start : g_->alts[static_cast<size_t>(e.arg)]) {
      GrammarStack t = s;
      if (g_->elems[static_cast<size_t>(start)].kind != GrammarElem::kEnd) t.push_back(start);
      todo.push_back(std::move(t));
    }
  }
}

void GrammarMatcher::normalize(GrammarStacks& s) {
  std::sort(s.begin(), s.end());
  s.erase(std::unique(s.begin(), s.end()), s.end());
}

GrammarStacks GrammarMatcher::advance(const GrammarStacks& in, uint32_t cp) const {
  GrammarStacks out;
  for (const GrammarStack& s : in) {
    if (s.empty()) continue;
    const int32_t p = s.back();
    const GrammarElem& e = g_->elems[static_cast<size_t>(p)];
    if (!g_->sets[static_cast<size_t>(e.arg)].matches(cp)) continue;
    GrammarStack t(s.begin(), s.end() - 1);
    if (g_->elems[static_cast<size_t>(p) + 1].kind != GrammarElem::kEnd) t.push_back(p + 1);
    expand(std::move(t), out);
  }
  normalize(out);
  return out;
}

// The code points a partial sequence can still become: its bits followed by any continuation
// bits, no smaller than the least value of its length (no overlong forms), no surrogates.
bool GrammarMatcher::feasible(const GrammarStacks& in, const Utf8Partial& u) const {
  if (u.need == 0) return !in.empty();
  static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
  const uint32_t lo = std::max(u.bits << (6 * u.need), kMin[u.len]);
  const uint32_t hi = std::min((u.bits << (6 * u.need)) | ((1u << (6 * u.need)) - 1), 0x10ffffu);
  if (lo > hi) return false;
  for (const GrammarStack& s : in) {
    if (s.empty()) continue;
    const GrammarElem& e = g_->elems[static_cast<size_t>(s.back())];
    if (g_->sets[static_cast<size_t>(e.arg)].matches_any(lo, hi)) return true;
  }
  return false;
}

bool GrammarMatcher::utf8_step(Utf8Partial& u, uint8_t b, int64_t* cp) {
  *cp = -1;
  if (u.need == 0) {
    if (b < 0x80) {
      *cp = b;
      return true;
    }
    const int n = (b >> 5) == 6 ? 1 : (b >> 4) == 14 ? 2 : (b >> 3) == 30 ? 3 : -1;
    if (n < 0 || b == 0xc0 || b == 0xc1 || b > 0xf4) return false;
    u = {static_cast<uint32_t>(b & (0x3f >> n)), n, n + 1};
    return true;
  }
  if ((b & 0xc0) != 0x80) return false;
  u.bits = (u.bits << 6) | (b & 0x3f);
  if (--u.need > 0) {
    // Refuse early what can only end overlong, a surrogate or beyond U+10FFFF.
    static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
    const uint32_t lo = u.bits << (6 * u.need), hi = lo | ((1u << (6 * u.need)) - 1);
    return hi >= kMin[u.len] && lo <= 0x10ffff && !(lo >= 0xd800 && hi <= 0xdfff);
  }
  const uint32_t v = u.bits;
  static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
  const int len = u.len;
  u = {};
  if (v < kMin[len] || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff)) return false;
  *cp = v;
  return true;
}

bool GrammarMatcher::accept(std::string_view bytes) {
  GrammarStacks s = stacks_;
  Utf8Partial u = partial_;
  for (char c : bytes) {
    int64_t cp;
    if (!utf8_step(u, static_cast<uint8_t>(c), &cp)) return false;
    if (cp >= 0) {
      s = advance(s, static_cast<uint32_t>(cp));
      if (s.empty()) return false;
    } else if (!feasible(s, u)) {
      return false;
    }
  }
  stacks_ = std::move(s);
  partial_ = u;
  return true;
}

bool GrammarMatcher::can_end() const {
  return partial_.need == 0 && std::any_of(stacks_.begin(), stacks_.end(), [](const GrammarStack& s) { return s.empty(); });
}

bool GrammarMatcher::must_end() const {
  return partial_.need == 0 && !stacks_.empty() &&
         std::all_of(stacks_.begin(), stacks_.end(), [](const GrammarStack& s) { return s.empty(); });
}

}  // namespace minfer
