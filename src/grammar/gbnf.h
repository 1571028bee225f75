// GBNF grammars (llama.cpp's syntax) parsed into a flat rule table that GrammarMatcher
// (matcher.h) runs as a set of pushdown stacks over Unicode code points.
//
//   auto g = parse_gbnf(R"(root ::= "yes" | "no" [.!]?)");   // Expected<Grammar>
//   if (!g) fail(g.error().message);                        // "gbnf 1:12: ..." line:column
//
// Syntax: `name ::= alternatives` rules (names of letters, digits, '-' and '_'; a rule ends
// at a newline outside parentheses, or continues after '|'), "literals" with escapes
// (\n \r \t \\ \" \[ \] \xHH \uHHHH \UHHHHHHHH), [character classes] with ranges, '^'
// negation and the same escapes, '.' (any character), rule references, ( groups ), the
// postfix operators * + ? {m} {m,} {m,n}, and '#' comments. `root` is the start rule.
// Refused with a line:column message: syntax errors, undefined rules, a missing root, and
// left recursion (a rule that can reach itself without consuming a character), which a
// pushdown matcher could not run.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace minfer {

// A set of code points: the union of ranges, or its complement when negated.
struct CharSet {
  std::vector<std::pair<uint32_t, uint32_t>> ranges;  // inclusive [lo, hi]
  bool negated = false;
  bool matches(uint32_t cp) const;
  // Whether some code point in [lo, hi] matches (for a partial UTF-8 sequence).
  bool matches_any(uint32_t lo, uint32_t hi) const;
};

struct GrammarElem {
  enum Kind : uint8_t { kEnd, kChars, kRule };
  Kind kind = kEnd;
  int32_t arg = 0;  // kChars: index into Grammar::sets; kRule: rule index
};

// Alternatives are runs of elements in `elems`, each closed by a kEnd element; a position is an
// index into `elems` (the next element to match).
struct Grammar {
  std::vector<GrammarElem> elems;
  std::vector<CharSet> sets;
  std::vector<std::vector<int32_t>> alts;  // [rule] start positions of its alternatives
  std::vector<std::string> names;          // [rule] ("root"; "name#3" for the rules made for name's groups and repetitions)
  std::vector<bool> generated;             // [rule] made for a group or a repetition
  int32_t root = -1;
};

Expected<Grammar> parse_gbnf(std::string_view text);

}  // namespace minfer
