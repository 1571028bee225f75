// GrammarMatcher: where a text is in a grammar (gbnf.h), as the set of pushdown stacks of the
// parses still possible (llama.cpp's method): each stack holds positions of elements still to
// match, its top a character set; an empty stack is a complete parse. Text is fed as bytes
// (any split, UTF-8 sequences may span calls).
//
//   auto g = std::make_shared<const Grammar>(*parse_gbnf(text));
//   GrammarMatcher m(g);
//   if (!m.accept("{\"a\"")) ...      // false: the bytes cannot continue the text (m unchanged)
//   m.can_end();                      // the text so far is a complete match
//   m.must_end();                     // ... and nothing can follow it
//
// The steps are also offered pure (advance, feasible) for the token mask (token-mask.h), which
// caches masks per state.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "grammar/gbnf.h"

namespace minfer {

// A UTF-8 sequence cut short: its bits so far and how many continuation bytes it still needs.
struct Utf8Partial {
  uint32_t bits = 0;
  int need = 0;  // 0: none pending
  int len = 0;   // bytes of the sequence (for the smallest valid value)
  bool operator==(const Utf8Partial&) const = default;
  auto operator<=>(const Utf8Partial&) const = default;
};

using GrammarStack = std::vector<int32_t>;  // element positions, top last
using GrammarStacks = std::vector<GrammarStack>;  // sorted, unique

class GrammarMatcher {
 public:
  explicit GrammarMatcher(std::shared_ptr<const Grammar> g);

  bool accept(std::string_view bytes);
  bool can_end() const;
  bool must_end() const;
  bool failed() const { return stacks_.empty(); }

  const Grammar& grammar() const { return *g_; }
  const GrammarStacks& stacks() const { return stacks_; }
  const Utf8Partial& partial() const { return partial_; }

  // Pure steps on a state, for token-mask.h. advance(): the stacks after one code point
  // (empty: rejected). feasible(): some stack can take a code point starting with `partial`.
  GrammarStacks advance(const GrammarStacks& s, uint32_t cp) const;
  bool feasible(const GrammarStacks& s, const Utf8Partial& partial) const;
  // One byte of UTF-8 onto `partial`: false for an invalid byte; *cp set when a code point ends
  // (-1 otherwise).
  static bool utf8_step(Utf8Partial& partial, uint8_t byte, int64_t* cp);

 private:
  std::shared_ptr<const Grammar> g_;
  GrammarStacks stacks_;
  Utf8Partial partial_;
  void expand(GrammarStack s, GrammarStacks& out) const;
  static void normalize(GrammarStacks& s);
};

}  // namespace minfer
