// The parser's class, shared by parser.cpp (statements, name checks) and parser-expr.cpp
// (expressions). Internal to the template library.
#pragma once

#include <initializer_list>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "template/ast.h"
#include "template/error.h"
#include "template/lexer.h"

namespace minfer::jinja {

constexpr int kMaxParseDepth = 200;  // expression/statement nesting; deeper input is refused
constexpr int kMaxExprDepth = 256;   // height of an expression tree, chains (a.b.c, 1+1+1) included

class Parser {
 public:
  explicit Parser(const std::vector<Token>& toks) : t_(toks) {}

  StmtList run() {
    StmtList body = subparse({});
    if (cur().type != Tok::kEof) error(fmt::format("unexpected '{}'", describe(cur())));
    check_names(body, false);
    return body;
  }

 private:
  // ---- token stream
  const Token& cur() const { return t_[pos_]; }
  const Token& look() const { return t_[std::min(pos_ + 1, t_.size() - 1)]; }
  const Token& next() {
    const Token& t = t_[pos_];
    if (pos_ + 1 < t_.size()) ++pos_;
    return t;
  }
  bool is_op(const char* op) const { return cur().type == Tok::kOp && cur().text == op; }
  bool is_name(const char* name) const { return cur().type == Tok::kName && cur().text == name; }
  bool skip_op(const char* op) {
    if (!is_op(op)) return false;
    next();
    return true;
  }
  bool skip_name(const char* name) {
    if (!is_name(name)) return false;
    next();
    return true;
  }
  static std::string describe(const Token& t) {
    switch (t.type) {
      case Tok::kName:
      case Tok::kOp: return t.text;
      default: return tok_name(t.type);
    }
  }
  [[noreturn]] void error(const std::string& msg, int line = 0) const {
    fail(ErrorKind::kSyntax, msg, line ? line : cur().line);
  }
  void expect(Tok type) {
    if (cur().type != type) {
      if (cur().type == Tok::kEof) error(fmt::format("unexpected end of template, expected '{}'.", tok_name(type)));
      error(fmt::format("expected token '{}', got '{}'", tok_name(type), describe(cur())));
    }
    next();
  }
  void expect_op(const char* op) {
    if (!is_op(op)) {
      if (cur().type == Tok::kEof) error(fmt::format("unexpected end of template, expected '{}'.", op));
      error(fmt::format("expected token '{}', got '{}'", op, describe(cur())));
    }
    next();
  }
  std::string expect_name() {
    if (cur().type != Tok::kName) error(fmt::format("expected token 'name', got '{}'", describe(cur())));
    return next().text;
  }

  struct DepthGuard {
    explicit DepthGuard(Parser& p) : p_(p) {
      if (++p_.depth_ > kMaxParseDepth)
        fail(ErrorKind::kLimit, fmt::format("template nests deeper than {} levels", kMaxParseDepth), p_.cur().line);
    }
    ~DepthGuard() { --p_.depth_; }
    Parser& p_;
  };

  // Sets e's height from its children; refuses trees the evaluator could not walk safely.
  static ExprPtr sealed(ExprPtr e) {
    int d = 0;
    auto see = [&](const ExprPtr& c) { if (c) d = std::max(d, c->depth); };
    for (const auto& c : e->a) see(c);
    for (const auto& c : e->args.pos) see(c);
    for (const auto& [k, c] : e->args.kw) see(c);
    see(e->args.star);
    see(e->args.star_star);
    e->depth = d + 1;
    if (e->depth > kMaxExprDepth)
      fail(ErrorKind::kLimit, fmt::format("expression nested deeper than {} levels", kMaxExprDepth), e->line);
    return e;
  }

  // Whether jinja2's optimizer can evaluate e at compile time (literals and operators on them).
  static bool is_const(const Expr& e) {
    switch (e.kind) {
      case ExprKind::kConst: return true;
      case ExprKind::kList: case ExprKind::kTuple: case ExprKind::kDict: case ExprKind::kNeg:
      case ExprKind::kPos: case ExprKind::kNot: case ExprKind::kBinary: case ExprKind::kConcat:
      case ExprKind::kCompare: case ExprKind::kAnd: case ExprKind::kOr:
        for (const auto& c : e.a)
          if (!c || !is_const(*c)) return false;
        return true;
      default: return false;
    }
  }

  static ExprPtr node(ExprKind k, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->line = line;
    return e;
  }

  // statements (parser.cpp)
  StmtList subparse(std::initializer_list<const char*> end_tags);
  StmtList parse_body(std::initializer_list<const char*> end_tags, const char* innermost);
  StmtList parse_body_to(const char* end_tag, const char* innermost);
  std::unique_ptr<Stmt> parse_statement();
  std::unique_ptr<Stmt> parse_if(std::unique_ptr<Stmt> s);
  std::unique_ptr<Stmt> parse_for(std::unique_ptr<Stmt> s);
  std::unique_ptr<Stmt> parse_set(std::unique_ptr<Stmt> s);
  void parse_signature(Stmt& s);
  static void scan_names(const Expr* e, Stmt& m);
  static void scan_body(const StmtList& body, Stmt& m);
  void mark_special_names(Stmt& s);
  std::unique_ptr<Stmt> parse_macro(std::unique_ptr<Stmt> s);
  std::unique_ptr<Stmt> parse_call_block(std::unique_ptr<Stmt> s);
  std::unique_ptr<Stmt> parse_filter_block(std::unique_ptr<Stmt> s);
  std::unique_ptr<Stmt> parse_with(std::unique_ptr<Stmt> s);
  Target parse_target_item(bool with_namespace);
  // An unknown filter or test is an error when the template is compiled, except inside an
  // if statement or an inline if (a jinja2 "soft frame"), where it fails only when run.
  static void check_names(const StmtList& body, bool soft);
  static void check_expr(const Expr* e, bool soft);
  Target parse_target(bool with_tuple, bool with_namespace);

  // expressions (parser-expr.cpp)
  bool is_tuple_end(std::initializer_list<const char*> extra) const;
  ExprPtr parse_tuple(bool explicit_parens, bool with_cond, std::initializer_list<const char*> extra);
  ExprPtr parse_expression(bool with_cond);
  ExprPtr parse_condexpr();
  ExprPtr binary(ExprKind k, ExprPtr l, ExprPtr r, int line, const std::string& op = "");
  ExprPtr parse_or();
  ExprPtr parse_and();
  ExprPtr parse_not();
  ExprPtr parse_compare();
  ExprPtr parse_math1();
  ExprPtr parse_concat();
  ExprPtr parse_math2();
  ExprPtr parse_pow();
  ExprPtr parse_unary(bool with_filter);
  ExprPtr parse_primary();
  ExprPtr parse_postfix(ExprPtr e);
  ExprPtr parse_filter_expr(ExprPtr e);
  ExprPtr parse_subscript(ExprPtr obj);
  ExprPtr parse_subscribed();
  void parse_call_args(ArgNodes& out);
  ExprPtr parse_call(ExprPtr callee);
  std::string dotted_name();
  ExprPtr parse_filter_chain(ExprPtr e, bool start_inline);
  ExprPtr parse_test(ExprPtr operand);

  const std::vector<Token>& t_;
  size_t pos_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
};

}  // namespace minfer::jinja
