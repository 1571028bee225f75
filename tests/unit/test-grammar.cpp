// GBNF: parse errors that name the place, the matcher on texts, and the token mask (trie walk,
// per-state cache) against checking each token's bytes one by one on a fresh matcher.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "grammar/gbnf.h"
#include "grammar/matcher.h"
#include "grammar/token-mask.h"

namespace minfer {
namespace {

std::shared_ptr<const Grammar> grammar(const std::string& text) {
  auto g = parse_gbnf(text);
  EXPECT_TRUE(g) << (g ? "" : g.error().message);
  return std::make_shared<const Grammar>(g ? std::move(*g) : Grammar{});
}

// "match", "incomplete" or "no" for a whole text fed in pieces of `step` bytes.
std::string verdict(const std::shared_ptr<const Grammar>& g, const std::string& text, size_t step = 1) {
  GrammarMatcher m(g);
  for (size_t i = 0; i < text.size(); i += step)
    if (!m.accept(std::string_view(text).substr(i, step))) return "no";
  return m.can_end() ? "match" : "incomplete";
}

std::string error_of(const std::string& text) {
  auto g = parse_gbnf(text);
  return g ? "" : g.error().message;
}

TEST(Gbnf, ErrorsNameTheLineAndColumn) {
  EXPECT_EQ(error_of("root ::= \"a\"\nfoo ::= bar"), "gbnf 2:9: undefined rule 'bar'");
  EXPECT_EQ(error_of("root := \"a\""), "gbnf 1:6: expected '::=' after rule name 'root'");
  EXPECT_EQ(error_of("item ::= \"a\""), "gbnf: no 'root' rule (the start rule must be named root)");
  EXPECT_NE(error_of("root ::= x\nx ::= x").find("matches nothing"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"a\" root").find("matches nothing"), std::string::npos);
  EXPECT_EQ(error_of("root ::= \"a\" root | \"b\""), "");
  EXPECT_EQ(error_of("root ::= \"abc"), "gbnf 1:14: unterminated string literal");
  EXPECT_EQ(error_of("root ::= [a-"), "gbnf 1:13: unterminated character class");
  EXPECT_EQ(error_of("root ::= [z-a]"), "gbnf 1:14: character range out of order");
  EXPECT_EQ(error_of("root ::= * \"a\""), "gbnf 1:10: '*' with nothing before it");
  EXPECT_EQ(error_of("root ::= \"a\"{3,1}"), "gbnf 1:17: repetition {m,n} with n < m");
  EXPECT_EQ(error_of("root ::= \"\\q\""), "gbnf 1:11: unknown escape '\\q'");
  EXPECT_EQ(error_of("root ::= (\"a\""), "gbnf 1:14: expected ')'");
  EXPECT_EQ(error_of("root ::= \"a\"\nroot ::= \"b\""), "gbnf 2:1: rule 'root' is defined twice");
  EXPECT_NE(error_of("root ::= <think> \"a\"").find("token references"), std::string::npos);
  EXPECT_EQ(error_of("root ::= a\na ::= b \"x\"\nb ::= \"y\"? a"),
            "gbnf: left recursion in rule 'a' (it can reach itself before matching a character)");
  EXPECT_EQ(error_of(""), "gbnf: the grammar has no rules");
  EXPECT_EQ(error_of("root ::= " + std::string(100000, '(')), "gbnf 1:266: groups nested deeper than 256");
}

TEST(Gbnf, MatchesLiteralsClassesGroupsAndRepetitions) {
  auto g = grammar(R"(
    root ::= greeting (", " name)+ "!"?   # comment
    greeting ::= "hi" | "hello"
    name ::= [A-Z] [a-z]{1,3}
  )");
  EXPECT_EQ(verdict(g, "hi, Bob"), "match");
  EXPECT_EQ(verdict(g, "hello, Al, Cleo!"), "match");
  EXPECT_EQ(verdict(g, "hello, Al, Cleo"), "match");
  EXPECT_EQ(verdict(g, "hi, Bobby"), "no");  // 4 lower-case letters
  EXPECT_EQ(verdict(g, "hi"), "incomplete");
  EXPECT_EQ(verdict(g, "hey"), "no");
  auto any = grammar(R"(root ::= [^a-c\n] . "\x41\u00e9\U0001F600" [\]\-]*)");
  EXPECT_EQ(verdict(any, "d\nAé😀]-]"), "match");
  EXPECT_EQ(verdict(any, "b\nAé😀"), "no");
  EXPECT_EQ(verdict(any, "dd\nAé😀"), "no");
  auto counted = grammar(R"(root ::= "a"{2} "b"{0,2} "c"{1,} "d"{3,3})");
  EXPECT_EQ(verdict(counted, "aacddd"), "match");
  EXPECT_EQ(verdict(counted, "aabbcccddd"), "match");
  EXPECT_EQ(verdict(counted, "aabbbcddd"), "no");
  EXPECT_EQ(verdict(counted, "acddd"), "no");
  auto empty = grammar("root ::= \"\" | \"x\"");
  EXPECT_EQ(verdict(empty, ""), "match");
  EXPECT_EQ(verdict(empty, "x"), "match");
}

TEST(Gbnf, Utf8MaySplitAnywhere) {
  auto g = grammar(R"(root ::= "é" [中-丯]+ "😀")");
  const std::string s = "é中丮丯😀";  // U+4E2D, U+4E2E, U+4E2F
  for (size_t step : {1, 2, 3, 5}) EXPECT_EQ(verdict(g, s, step), "match") << step;
  GrammarMatcher m(g);
  EXPECT_TRUE(m.accept("\xc3"));       // the first byte of é
  EXPECT_FALSE(m.accept("\xc2"));      // not a continuation byte
  EXPECT_FALSE(m.accept("\xa8"));      // \xc3\xa8 is è: refused, the state unchanged
  EXPECT_TRUE(m.accept("\xa9"));
  EXPECT_FALSE(m.accept("\xe4\xb8\xb0"));  // 丰 U+4E30 is outside [中-丯]
  EXPECT_FALSE(m.can_end());
  EXPECT_EQ(verdict(grammar("root ::= [^x]"), "\xff"), "no");         // invalid UTF-8
  EXPECT_EQ(verdict(grammar("root ::= [^x]"), "\xc0\x80"), "no");     // overlong
  EXPECT_EQ(verdict(grammar("root ::= [^x]"), "\xed\xa0\x80"), "no"); // a surrogate
}

TEST(Gbnf, MustEndWhenNothingCanFollow) {
  GrammarMatcher m(grammar(R"(root ::= "a" "b"?)"));
  EXPECT_TRUE(m.accept("a"));
  EXPECT_TRUE(m.can_end());
  EXPECT_FALSE(m.must_end());
  EXPECT_TRUE(m.accept("b"));
  EXPECT_TRUE(m.must_end());
}

// A vocabulary of random byte strings over a small alphabet (with UTF-8 pieces, split ones
// included): the mask must equal, token by token, whether a copy of the matcher accepts it.
TEST(GrammarMask, EqualsCheckingEachTokenOnItsOwn) {
  std::mt19937 rng(3);
  const std::vector<std::string> atoms = {"{", "}", "\"", ":", ",", " ", "a", "b", "1", "2", "-", "\\", "n", "é",
                                          "\xc3", "\xa9", "中", "\xe4\xb8", "\xad", "true", "null"};
  GrammarVocab v;
  for (int i = 0; i < 3000; ++i) {
    std::string p;
    const int n = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < n; ++k) p += atoms[rng() % atoms.size()];
    v.pieces.push_back(p);
  }
  v.pieces.push_back("");  // a control token: never allowed
  v.pieces.push_back("<eos>");
  v.eog = {static_cast<int32_t>(v.pieces.size()) - 1};
  auto tokens = std::make_shared<const TokenTrie>(v);
  auto g = grammar(R"(
    root ::= "{" ws (pair ("," ws pair)*)? "}"
    pair ::= str ":" ws val
    val ::= str | num | "true" | "null" | root
    str ::= "\"" ([^"\\] | "\\" ["\\n])* "\""
    num ::= "-"? [0-9]+
    ws ::= " "?
  )");
  GrammarConstraint c(g, tokens);
  const auto n_vocab = static_cast<int32_t>(v.pieces.size());
  int steps = 0, allowed_total = 0;
  for (; steps < 60; ++steps) {
    std::vector<float> logits(static_cast<size_t>(n_vocab), 0.0f);
    c.apply(logits);
    std::vector<int32_t> allowed;
    for (int32_t id = 0; id < n_vocab; ++id) {
      GrammarMatcher copy = c.matcher();
      const bool eog = id == v.eog[0];
      const bool want = eog ? copy.can_end()
                            : !v.pieces[static_cast<size_t>(id)].empty() && !copy.must_end() && copy.accept(v.pieces[static_cast<size_t>(id)]);
      ASSERT_EQ(std::isinf(logits[static_cast<size_t>(id)]), !want) << "token " << id << " '" << v.pieces[static_cast<size_t>(id)] << "' step " << steps;
      ASSERT_EQ(c.allows(id), want);
      if (want) allowed.push_back(id);
    }
    allowed_total += static_cast<int>(allowed.size());
    if (allowed.empty()) break;
    const int32_t pick = allowed[rng() % allowed.size()];
    if (pick == v.eog[0]) break;
    ASSERT_TRUE(c.accept(pick));
  }
  EXPECT_GT(allowed_total, steps);  // more than one choice on average: a real test
  EXPECT_FALSE(c.accept(-1));
}

}  // namespace
}  // namespace minfer
