// JSON Schema -> GBNF pieces checked exhaustively against arithmetic: integer and number ranges
// (every integer in a window, bounds random, inclusive and exclusive), and patterns against
// std::regex (ECMAScript) on every short string over a small alphabet.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <regex>
#include <string>

#include "grammar/gbnf.h"
#include "grammar/json-schema-parts.h"
#include "grammar/json-schema.h"
#include "grammar/matcher.h"

namespace minfer {
namespace {

bool matches(const std::shared_ptr<const Grammar>& g, const std::string& text) {
  GrammarMatcher m(g);
  return m.accept(text) && m.can_end();
}

std::shared_ptr<const Grammar> compile(const std::string& root_expr, const std::string& extra = "") {
  auto g = parse_gbnf("root ::= " + root_expr + "\n" + extra);
  EXPECT_TRUE(g) << (g ? "" : g.error().message) << "\n" << root_expr;
  return std::make_shared<const Grammar>(g ? std::move(*g) : Grammar{});
}

TEST(JsonSchemaRanges, IntegersEqualArithmetic) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> bound(-1200, 1200), open(0, 5);
  for (int trial = 0; trial < 60; ++trial) {
    std::optional<int64_t> lo = bound(rng), hi = bound(rng);
    if (open(rng) == 0) lo.reset();
    if (open(rng) == 0) hi.reset();
    if (lo && hi && *lo > *hi) std::swap(*lo, *hi);
    auto expr = schema::int_range_gbnf(lo, hi);
    ASSERT_TRUE(expr);
    auto g = compile(*expr);
    for (int v = -1500; v <= 1500; ++v) {
      const bool in = (!lo || v >= *lo) && (!hi || v <= *hi);
      ASSERT_EQ(matches(g, std::to_string(v)), in) << *expr << " v=" << v;
    }
    EXPECT_FALSE(matches(g, "007"));
    EXPECT_FALSE(matches(g, "-0"));
  }
  EXPECT_FALSE(schema::int_range_gbnf(5, 4));
}

TEST(JsonSchemaRanges, NumbersEqualArithmetic) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> bound(-30, 30), coin(0, 3);
  const char* fracs[] = {"", ".0", ".00", ".5", ".05", ".999", ".1"};
  for (int trial = 0; trial < 80; ++trial) {
    std::optional<schema::Bound> lo = schema::Bound{bound(rng), coin(rng) == 0}, hi = schema::Bound{bound(rng), coin(rng) == 0};
    if (coin(rng) == 0) lo.reset();
    if (coin(rng) == 0) hi.reset();
    if (lo && hi && lo->v > hi->v) std::swap(lo->v, hi->v);
    auto expr = schema::number_range_gbnf(lo, hi);
    if (!expr) {
      EXPECT_TRUE(lo && hi && lo->v == hi->v && (lo->open || hi->open));
      continue;
    }
    auto g = compile(*expr);
    for (int i = -40; i <= 40; ++i) {
      for (const char* f : fracs) {
        for (const bool neg : {false, true}) {
          if (neg && i != 0) continue;  // "-0.5": the sign on a zero integer part
          std::string text = neg ? "-" : "";
          text += std::to_string(i);
          text += f;
          const double x = std::stod(text);
          const bool in = (!lo || (lo->open ? x > lo->v : x >= lo->v)) && (!hi || (hi->open ? x < hi->v : x <= hi->v));
          if (text == "-0" || text == "-0.0" || text == "-0.00") continue;  // -0: either way is right
          ASSERT_EQ(matches(g, text), in) << *expr << " text=" << text;
        }
      }
    }
  }
}

TEST(JsonSchemaPattern, EqualsStdRegexOnShortStrings) {
  const char* patterns[] = {"^a(b|c)*$", "^[a-c]{2,3}$", "b", "^a?b+$", "^(?:ab|c)d?$", "^[^a]c*$", "^\\d[.x]$",
                            "a$", "^x|y$" /* refused */, "^[b-d]+?c$", "^.{2}$"};
  const std::string alphabet = "abcdx1.";
  for (const char* p : patterns) {
    auto expr = schema::regex_to_gbnf(p, "chr");
    if (std::string(p) == "^x|y$") {
      EXPECT_FALSE(expr);
      continue;
    }
    ASSERT_TRUE(expr) << expr.error().message;
    auto g = compile(*expr, "chr ::= [^\"\\\\\\x00-\\x1F] | \"\\\\\" [\"\\\\/bfnrt]");
    const std::regex re(p, std::regex::ECMAScript);
    std::vector<std::string> texts = {""};
    for (size_t len = 1; len <= 4; ++len) {
      std::vector<std::string> more;
      for (const auto& t : texts)
        if (t.size() == len - 1)
          for (const char c : alphabet) more.push_back(t + c);
      texts.insert(texts.end(), more.begin(), more.end());
    }
    for (const auto& t : texts) ASSERT_EQ(matches(g, t), std::regex_search(t, re)) << p << " on '" << t << "'";
  }
}

TEST(JsonSchema, AnyObjectGrammar) {
  auto g = parse_gbnf(json_value_gbnf(/*object_only=*/true));
  ASSERT_TRUE(g) << g.error().message;
  const auto grammar = std::make_shared<const Grammar>(std::move(*g));
  auto verdict = [&](const std::string& t) {
    GrammarMatcher m(grammar);
    if (!m.accept(t)) return "no";
    return m.can_end() ? "match" : "incomplete";
  };
  for (const char* ok : {"{}", "{\"a\": 1}", "{\"a\":[1,-2.5e+3,true,false,null,{\"b\":\"x\\u00e9\\n\"}]}", "{\"k\": 0.5, \"l\": \"\"}"})
    EXPECT_STREQ(verdict(ok), "match") << ok;
  for (const char* prefix : {"{", "{\"a", "{\"a\":", "{\"a\": [1, 2", "{\"a\": 1.", "{\"a\": tr", "{\"a\": -"})
    EXPECT_STREQ(verdict(prefix), "incomplete") << prefix;
  for (const char* bad : {"[1]", "x", "{a", "{\"a\" 1}", "{\"a\": 01}", "{\"a\": 1,}", "{\"a\": tru}", "{} x",
                          "{\"a\": \"\x01\"}", "{\"a\": 1.e5}", "{\"a\": \"\\x\"}", "{\"a\": [1 2]}"})
    EXPECT_STREQ(verdict(bad), "no") << bad;
}

TEST(JsonSchema, RefusalsNameThePointer) {
  auto err = [](const char* s) {
    auto g = json_schema_to_gbnf(s);
    return g ? std::string("ok") : g.error().message;
  };
  EXPECT_EQ(err(R"({"properties": {"a/b": {"type": "string", "contentSchema": {}}}})"),
            "json-schema #/properties/a~1b: unsupported keyword 'contentSchema'");
  EXPECT_EQ(err(R"({"items": [{"type": "bogus"}]})"), "json-schema #/items/0/type: unknown type 'bogus'");
  EXPECT_EQ(err(R"({"$ref": "#"})"), err(R"({"$ref": "#"})"));
  EXPECT_NE(err(R"({"$ref": "#"})").find("refers to itself"), std::string::npos);
  EXPECT_EQ(err(R"({"type": "object", "properties": {"next": {"$ref": "#"}}})"), "ok");  // recursion that writes text first
}

// A schema nested deeper than the converter's limit is refused by name, not walked: 30000
// levels of "properties" overflowed the stack of the recursive walk (a server crash through
// response_format / Ollama's format). One level under the limit still converts.
TEST(JsonSchema, DeepNestingIsRefusedNotWalked) {
  auto nested = [](int levels) {  // 2 JSON levels (the object and its "properties") per schema level
    std::string s;
    for (int i = 0; i < levels; ++i) s += R"({"type": "object", "properties": {"a": )";
    s += R"({"type": "string"})";
    for (int i = 0; i < levels; ++i) s += "}}";
    return s;
  };
  for (int levels : {30000, 200}) {
    auto g = json_schema_to_gbnf(nested(levels));
    ASSERT_FALSE(g) << levels;
    EXPECT_NE(g.error().message.find("nested more than 256 levels deep"), std::string::npos) << g.error().message;
    auto many = json_schema_rules_many({R"({"type": "string"})", nested(levels)}, {"t0", "t1"}, {});
    ASSERT_FALSE(many) << levels;
    EXPECT_NE(many.error().message.find("json-schema 1: nested more than 256"), std::string::npos) << many.error().message;
  }
  EXPECT_TRUE(json_schema_to_gbnf(nested(127))) << "255 JSON levels: within the limit";
}

}  // namespace
}  // namespace minfer
