// Lexer and parser of the Jinja engine: tokens, whitespace control, literals, precedence,
// and the errors (with line numbers) for malformed templates.
// Suites are named jinjaXxx / templateXxx so that `ctest -R "template|jinja"` selects them.
#include <gtest/gtest.h>

#include "template/error.h"
#include "template/lexer.h"
#include "template/parser.h"

namespace minfer::jinja {
namespace {

std::vector<Token> lex(std::string_view src) { return tokenize(src); }

std::string data_of(std::string_view src) {
  std::string out;
  for (const Token& t : lex(src))
    if (t.type == Tok::kData) out += "[" + t.text + "]";
  return out;
}

TEST(jinjaLexer, SplitsDataAndTags) {
  auto t = lex("Hi {{ name }}!");
  ASSERT_EQ(t.size(), 6u);
  EXPECT_EQ(t[0].type, Tok::kData);
  EXPECT_EQ(t[0].text, "Hi ");
  EXPECT_EQ(t[1].type, Tok::kVarBegin);
  EXPECT_EQ(t[2].type, Tok::kName);
  EXPECT_EQ(t[2].text, "name");
  EXPECT_EQ(t[3].type, Tok::kVarEnd);
  EXPECT_EQ(t[4].text, "!");
  EXPECT_EQ(t[5].type, Tok::kEof);
}

TEST(jinjaLexer, TrimBlocksDropsOneNewlineAfterBlockTags) {
  EXPECT_EQ(data_of("{% if x %}\nA\n{% endif %}\n\nB"), "[A\n][\nB]");
  EXPECT_EQ(data_of("{{ x }}\nA"), "[\nA]");  // not after variables
  EXPECT_EQ(data_of("{# c #}\nA"), "[A]");     // comments too
  EXPECT_EQ(data_of("{% if x +%}\nA{% endif %}"), "[\nA]");
}

TEST(jinjaLexer, LstripBlocksOnlyFromLineStart) {
  EXPECT_EQ(data_of("A\n   {% if x %}B{% endif %}"), "[A\n][B]");
  EXPECT_EQ(data_of("A   {% if x %}B{% endif %}"), "[A   ][B]");
  EXPECT_EQ(data_of("  {% if x %}B{% endif %}"), "[B]");           // start of template
  EXPECT_EQ(data_of("A\n  {%+ if x %}B{% endif %}"), "[A\n  ][B]");  // + keeps it
  EXPECT_EQ(data_of("A\n  {{ x }}"), "[A\n  ]");                     // not for variables
  EXPECT_EQ(data_of("{% if x %}\n  {% endif %}"), "");               // after trim_blocks
}

TEST(jinjaLexer, MinusStripsAllWhitespace) {
  EXPECT_EQ(data_of("A \n\t {%- if x -%} \n\n B{% endif %}"), "[A][B]");
  EXPECT_EQ(data_of("A  {{- x -}}  B"), "[A][B]");
  EXPECT_EQ(data_of("A \u3000{{- x }}"), "[A]");  // Unicode whitespace, as Python's rstrip
}

TEST(jinjaLexer, NewlinesNormalizedAndTrailingNewlineDropped) {
  EXPECT_EQ(data_of("a\r\nb\rc\n"), "[a\nb\nc]");
  EXPECT_EQ(data_of("a\n\n"), "[a\n]");
}

TEST(jinjaLexer, RawAndComments) {
  EXPECT_EQ(data_of("{% raw %}{{ x }}{% endraw %}"), "[{{ x }}]");
  EXPECT_EQ(data_of("a{# {{ x }} #}b"), "[a][b]");
  EXPECT_THROW(lex("{# open"), JinjaError);
  EXPECT_THROW(lex("{% raw %}open"), JinjaError);
}

TEST(jinjaLexer, NumbersAndStrings) {
  auto t = lex("{{ 1_000 0x1F 0o17 0b11 1.5e3 2.5 'a\\tb\\u00e9' \"q\\\"\" }}");
  EXPECT_EQ(t[1].type, Tok::kInt);
  EXPECT_EQ(t[1].i, 1000);
  EXPECT_EQ(t[2].i, 31);
  EXPECT_EQ(t[3].i, 15);
  EXPECT_EQ(t[4].i, 3);
  EXPECT_EQ(t[5].type, Tok::kFloat);
  EXPECT_DOUBLE_EQ(t[5].f, 1500.0);
  EXPECT_DOUBLE_EQ(t[6].f, 2.5);
  EXPECT_EQ(t[7].text, "a\tb\xc3\xa9");
  EXPECT_EQ(t[8].text, "q\"");
  EXPECT_EQ(lex("{{ 'un\\known' }}")[1].text, "un\\known");  // unknown escapes stay
}

TEST(jinjaLexer, OperatorsLongestFirstAndBalancedBraces) {
  auto t = lex("{{ a // b ** c != d }}");
  EXPECT_EQ(t[2].text, "//");
  EXPECT_EQ(t[4].text, "**");
  EXPECT_EQ(t[6].text, "!=");
  // '}}' inside an open brace is two closing braces, not the tag end.
  auto d = lex("{{ {'a': {'b': 1}} }}");
  EXPECT_EQ(d.back().type, Tok::kEof);
  EXPECT_EQ(d[d.size() - 2].type, Tok::kVarEnd);
  EXPECT_THROW(lex("{{ ) }}"), JinjaError);
  EXPECT_THROW(lex("{{ (] }}"), JinjaError);
}

TEST(jinjaLexer, LineNumbers) {
  auto t = lex("a\nb\n{{ x }}\n{% if y\n %}");
  for (const Token& k : t)
    if (k.type == Tok::kName && k.text == "x") {
      EXPECT_EQ(k.line, 3);
    }
  try {
    lex("a\n\n{{ 'x }}");
    FAIL() << "no error";
  } catch (const JinjaError& e) {
    EXPECT_EQ(e.line(), 3);
    EXPECT_EQ(e.kind(), ErrorKind::kSyntax);
  }
}

TEST(jinjaLexer, RejectsInvalidUtf8) { EXPECT_THROW(lex("a\xff"), JinjaError); }

Program parse_src(std::string_view src) { return parse(tokenize(src)); }

TEST(jinjaParser, StatementStructure) {
  Program p = parse_src("{% if a %}x{% elif b %}y{% else %}z{% endif %}{% for i in l %}{{ i }}{% else %}e{% endfor %}");
  ASSERT_EQ(p.body.size(), 2u);
  EXPECT_EQ(p.body[0]->kind, StmtKind::kIf);
  EXPECT_EQ(p.body[0]->elifs.size(), 1u);
  EXPECT_EQ(p.body[0]->else_body.size(), 1u);
  EXPECT_EQ(p.body[1]->kind, StmtKind::kFor);
  EXPECT_EQ(p.body[1]->else_body.size(), 1u);
}

TEST(jinjaParser, FiltersAndTestsBindTighterThanArithmetic) {
  // 1 + (x|abs); the test applies to x alone: 1 + (x is number).
  Program p = parse_src("{{ 1 + x|abs }}{{ 1 + x is number }}{{ -2 ** 2 }}");
  const Expr& a = *p.body[0]->expr;
  ASSERT_EQ(a.kind, ExprKind::kBinary);
  EXPECT_EQ(a.a[1]->kind, ExprKind::kFilter);
  const Expr& b = *p.body[1]->expr;
  EXPECT_EQ(b.a[1]->kind, ExprKind::kTest);
  const Expr& c = *p.body[2]->expr;  // (-2) ** 2 in jinja2
  ASSERT_EQ(c.kind, ExprKind::kBinary);
  EXPECT_EQ(c.a[0]->kind, ExprKind::kNeg);
}

TEST(jinjaParser, MacroSignatureAndSpecialNames) {
  Program p = parse_src("{% macro m(a, b=1) %}{{ caller() }}{{ varargs }}{% endmacro %}");
  const Stmt& m = *p.body[0];
  EXPECT_EQ(m.params, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(m.defaults.size(), 1u);
  EXPECT_TRUE(m.uses_caller);
  EXPECT_TRUE(m.uses_varargs);
  EXPECT_FALSE(m.uses_kwargs);
}

TEST(jinjaParser, ScopeAnalysisMarksNamesAssignedBeforeRead) {
  Program p = parse_src("{% for i in l %}{% for j in l %}{{ x }}{% endfor %}{% set x = 1 %}{% endfor %}{% set y = 2 %}");
  EXPECT_EQ(p.body[0]->undef_names, (std::vector<std::string>{"x"}));
  EXPECT_EQ(p.undef_names, (std::vector<std::string>{"y"}));
  Program q = parse_src("{% for i in l %}{{ x }}{% set x = 1 %}{% endfor %}");  // read first: resolved
  EXPECT_TRUE(q.body[0]->undef_names.empty());
}

void expect_error(std::string_view src, ErrorKind kind, int line, std::string_view needle) {
  try {
    parse_src(src);
    ADD_FAILURE() << "no error for " << src;
  } catch (const JinjaError& e) {
    EXPECT_EQ(e.kind(), kind) << src << ": " << e.message();
    EXPECT_EQ(e.line(), line) << src << ": " << e.message();
    EXPECT_NE(e.message().find(needle), std::string::npos) << src << ": " << e.message();
  }
}

TEST(jinjaParser, ErrorsNameTheProblemAndLine) {
  expect_error("a\n{% if x %}", ErrorKind::kSyntax, 2, "endif");
  expect_error("{% for %}", ErrorKind::kSyntax, 1, "");
  expect_error("\n\n{% endfor %}", ErrorKind::kSyntax, 3, "endfor");
  expect_error("{{ x|nosuch }}", ErrorKind::kSyntax, 1, "No filter named 'nosuch'");
  expect_error("{{ x is nosuch }}", ErrorKind::kSyntax, 1, "No test named 'nosuch'");
  expect_error("\n{% include 'a' %}", ErrorKind::kUnsupported, 2, "'include'");
  expect_error("{{ x|urlize }}", ErrorKind::kUnsupported, 1, "'urlize'");
  expect_error("{% break %}", ErrorKind::kSyntax, 1, "outside loop");
  expect_error("{% macro m(a=1, b) %}{% endmacro %}", ErrorKind::kSyntax, 1, "non-default");
  expect_error("{% set true = 1 %}", ErrorKind::kSyntax, 1, "can't assign");
  expect_error("{% frobnicate %}", ErrorKind::kSyntax, 1, "unknown tag 'frobnicate'");
}

TEST(jinjaParser, UnknownFilterInsideIfFailsOnlyWhenRun) {
  EXPECT_NO_THROW(parse_src("{% if x %}{{ y|from_json }}{% endif %}"));
  EXPECT_NO_THROW(parse_src("{{ y|from_json if x else 1 }}"));
  EXPECT_THROW(parse_src("{% if x %}{% for i in l %}{{ i|from_json }}{% endfor %}{% endif %}"), JinjaError);
}

TEST(jinjaParser, NestingDepthIsBounded) {
  const std::string deep = std::string(5000, '(') + "1" + std::string(5000, ')');
  expect_error("{{ " + deep + " }}", ErrorKind::kLimit, 1, "deeper");
  std::string ifs;
  for (int i = 0; i < 500; ++i) ifs += "{% if x %}";
  EXPECT_THROW(parse_src(ifs), JinjaError);
}

}  // namespace
}  // namespace minfer::jinja
