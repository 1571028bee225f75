#include "template/parser.h"

#include <algorithm>

#include "template/builtins.h"
#include "template/parser-impl.h"

namespace minfer::jinja {

StmtList Parser::subparse(std::initializer_list<const char*> end_tags) {
  StmtList body;
  for (;;) {
    const Token& t = cur();
    if (t.type == Tok::kEof) return body;
    if (t.type == Tok::kData) {
      auto s = std::make_unique<Stmt>();
      s->kind = StmtKind::kData;
      s->line = t.line;
      s->text = t.text;
      body.push_back(std::move(s));
      next();
    } else if (t.type == Tok::kVarBegin) {
      next();
      auto s = std::make_unique<Stmt>();
      s->kind = StmtKind::kOutput;
      s->line = cur().line;
      s->expr = parse_tuple(false, true, {});
      expect(Tok::kVarEnd);
      body.push_back(std::move(s));
    } else if (t.type == Tok::kBlockBegin) {
      next();
      if (cur().type == Tok::kName)
        for (const char* e : end_tags)
          if (cur().text == e) return body;
      body.push_back(parse_statement());
      expect(Tok::kBlockEnd);
    } else {
      error(fmt::format("unexpected '{}'", describe(t)));
    }
  }
}

// Parses a body up to one of `end_tags`; leaves the end tag name as the current token.

StmtList Parser::parse_body(std::initializer_list<const char*> end_tags, const char* innermost) {
  skip_op(":");
  expect(Tok::kBlockEnd);
  StmtList body = subparse(end_tags);
  if (cur().type == Tok::kEof) {
    std::string want;
    for (const char* e : end_tags) want += fmt::format("{}'{}'", want.empty() ? "" : " or ", e);
    error(fmt::format("Unexpected end of template. Jinja was looking for the following tags: {}. "
                      "The innermost block that needs to be closed is '{}'.", want, innermost));
  }
  return body;
}

StmtList Parser::parse_body_to(const char* end_tag, const char* innermost) {
  StmtList body = parse_body({end_tag}, innermost);
  next();
  return body;
}

std::unique_ptr<Stmt> Parser::parse_statement() {
  DepthGuard guard(*this);
  if (cur().type != Tok::kName) error("tag name expected");
  const std::string tag = cur().text;
  auto s = std::make_unique<Stmt>();
  s->line = cur().line;
  if (tag == "if") return parse_if(std::move(s));
  if (tag == "for") return parse_for(std::move(s));
  if (tag == "set") return parse_set(std::move(s));
  if (tag == "macro") return parse_macro(std::move(s));
  if (tag == "call") return parse_call_block(std::move(s));
  if (tag == "filter") return parse_filter_block(std::move(s));
  if (tag == "with") return parse_with(std::move(s));
  if (tag == "print") {
    next();
    s->kind = StmtKind::kOutput;
    auto tuple = node(ExprKind::kConcat, s->line);  // each expression printed in turn
    while (cur().type != Tok::kBlockEnd) {
      if (!tuple->a.empty()) expect_op(",");
      tuple->a.push_back(parse_expression(true));
    }
    s->expr = tuple->a.size() == 1 ? std::move(tuple->a[0]) : std::move(tuple);
    return s;
  }
  if (tag == "break" || tag == "continue") {
    if (loop_depth_ == 0) error(fmt::format("'{}' outside loop", tag));
    next();
    s->kind = tag == "break" ? StmtKind::kBreak : StmtKind::kContinue;
    return s;
  }
  if (tag == "generation") {
    next();
    s->kind = StmtKind::kGeneration;
    const int saved = loop_depth_;  // the body is a caller() function in transformers
    loop_depth_ = 0;
    s->body = parse_body_to("endgeneration", "generation");
    loop_depth_ = saved;
    return s;
  }
  static const char* const kUnsupported[] = {"block", "extends", "include", "import", "from",
                                             "autoescape", "do", "trans", "pluralize", "debug"};
  for (const char* u : kUnsupported)
    if (tag == u)
      fail(ErrorKind::kUnsupported, fmt::format("the '{}' tag is not supported by minfer's template engine", tag),
           cur().line);
  error(fmt::format("Encountered unknown tag '{}'.", tag));
}

std::unique_ptr<Stmt> Parser::parse_if(std::unique_ptr<Stmt> s) {
  next();
  s->kind = StmtKind::kIf;
  s->expr = parse_tuple(false, false, {});
  s->body = parse_body({"elif", "else", "endif"}, "if");
  for (;;) {
    const std::string tag = next().text;
    if (tag == "elif") {
      ExprPtr test = parse_tuple(false, false, {});
      StmtList body = parse_body({"elif", "else", "endif"}, "if");
      s->elifs.emplace_back(std::move(test), std::move(body));
      continue;
    }
    if (tag == "else") s->else_body = parse_body_to("endif", "if");
    break;
  }
  return s;
}

std::unique_ptr<Stmt> Parser::parse_for(std::unique_ptr<Stmt> s) {
  next();
  s->kind = StmtKind::kFor;
  s->target = parse_target(true, false);
  if (!skip_name("in")) error(fmt::format("expected token 'in', got '{}'", describe(cur())));
  s->expr = parse_tuple(false, false, {"recursive"});
  if (skip_name("if")) s->cond = parse_expression(true);
  s->recursive = skip_name("recursive");
  ++loop_depth_;
  s->body = parse_body({"endfor", "else"}, "for");
  --loop_depth_;
  if (next().text == "else") s->else_body = parse_body_to("endfor", "for");
  return s;
}

std::unique_ptr<Stmt> Parser::parse_set(std::unique_ptr<Stmt> s) {
  next();
  s->target = parse_target(true, true);
  if (skip_op("=")) {
    s->kind = StmtKind::kSet;
    s->expr = parse_tuple(false, true, {});
    return s;
  }
  s->kind = StmtKind::kSetBlock;
  s->filter = parse_filter_chain(nullptr, false);
  s->body = parse_body_to("endset", "set");
  return s;
}

void Parser::parse_signature(Stmt& s) {
  expect_op("(");
  while (!is_op(")")) {
    if (!s.params.empty()) expect_op(",");
    s.params.push_back(expect_name());
    if (skip_op("=")) s.defaults.push_back(parse_expression(true));
    else if (!s.defaults.empty()) error("non-default argument follows default argument");
  }
  expect_op(")");
}

void Parser::scan_names(const Expr* e, Stmt& m) {
  if (!e) return;
  if (e->kind == ExprKind::kName) {
    m.uses_caller |= e->name == "caller";
    m.uses_varargs |= e->name == "varargs";
    m.uses_kwargs |= e->name == "kwargs";
  }
  for (const auto& c : e->a) scan_names(c.get(), m);
  for (const auto& c : e->args.pos) scan_names(c.get(), m);
  for (const auto& [k, c] : e->args.kw) scan_names(c.get(), m);
  scan_names(e->args.star.get(), m);
  scan_names(e->args.star_star.get(), m);
}

void Parser::scan_body(const StmtList& body, Stmt& m) {
  for (const auto& s : body) {
    scan_names(s->expr.get(), m);
    scan_names(s->cond.get(), m);
    scan_names(s->filter.get(), m);
    for (const auto& d : s->defaults) scan_names(d.get(), m);
    for (const auto& v : s->values) scan_names(v.get(), m);
    for (const auto& [test, b] : s->elifs) {
      scan_names(test.get(), m);
      scan_body(b, m);
    }
    scan_body(s->body, m);
    scan_body(s->else_body, m);
  }
}

void Parser::mark_special_names(Stmt& s) {
  scan_body(s.body, s);
  for (const std::string& p : s.params) {
    if (p == "caller") s.uses_caller = false;
    if (p == "varargs") s.uses_varargs = false;
    if (p == "kwargs") s.uses_kwargs = false;
  }
}

std::unique_ptr<Stmt> Parser::parse_macro(std::unique_ptr<Stmt> s) {
  next();
  s->kind = StmtKind::kMacro;
  s->name = expect_name();
  parse_signature(*s);
  const int saved = loop_depth_;
  loop_depth_ = 0;
  s->body = parse_body_to("endmacro", "macro");
  loop_depth_ = saved;
  mark_special_names(*s);
  return s;
}

std::unique_ptr<Stmt> Parser::parse_call_block(std::unique_ptr<Stmt> s) {
  next();
  s->kind = StmtKind::kCallBlock;
  s->name = "caller";
  if (is_op("(")) parse_signature(*s);
  s->expr = parse_expression(true);
  if (s->expr->kind != ExprKind::kCall) error("expected call", s->line);
  const int saved = loop_depth_;
  loop_depth_ = 0;
  s->body = parse_body_to("endcall", "call");
  loop_depth_ = saved;
  mark_special_names(*s);
  return s;
}

std::unique_ptr<Stmt> Parser::parse_filter_block(std::unique_ptr<Stmt> s) {
  next();
  s->kind = StmtKind::kFilterBlock;
  s->filter = parse_filter_chain(nullptr, true);
  s->body = parse_body_to("endfilter", "filter");
  return s;
}

std::unique_ptr<Stmt> Parser::parse_with(std::unique_ptr<Stmt> s) {
  next();
  s->kind = StmtKind::kWith;
  while (cur().type != Tok::kBlockEnd) {
    if (!s->targets.empty()) expect_op(",");
    s->targets.push_back(parse_target(true, false));
    expect_op("=");
    s->values.push_back(parse_expression(true));
  }
  s->body = parse_body_to("endwith", "with");
  return s;
}

// Assignment targets: a name, `ns.attr` (set only), or a tuple of names.

Target Parser::parse_target_item(bool with_namespace) {
  if (skip_op("(")) {
    Target t = parse_target(true, with_namespace);
    expect_op(")");
    return t;
  }
  if (cur().type != Tok::kName) error(fmt::format("can't assign to '{}'", describe(cur())));
  const std::string n = next().text;
  static const char* const kConsts[] = {"true", "false", "True", "False", "none", "None"};
  for (const char* c : kConsts)
    if (n == c) error("can't assign to 'const'");
  Target t;
  t.name = n;
  if (with_namespace && is_op(".")) {
    next();
    t.kind = Target::Kind::kNsAttr;
    t.attr = expect_name();
  }
  return t;
}

Target Parser::parse_target(bool with_tuple, bool with_namespace) {
  Target first = parse_target_item(with_namespace);
  if (!with_tuple || !is_op(",")) return first;
  Target t;
  t.kind = Target::Kind::kTuple;
  t.items.push_back(std::move(first));
  while (skip_op(",")) {
    if (is_tuple_end({})) break;  // a trailing comma; see is_tuple_end
    t.items.push_back(parse_target_item(with_namespace));
  }
  return t;
}

void Parser::check_expr(const Expr* e, bool soft) {
  if (!e) return;
  if (e->kind == ExprKind::kCond) soft = true;
  if (!soft && e->kind == ExprKind::kFilter && !e->filter) {
    if (is_unsupported_filter(e->name))
      fail(ErrorKind::kUnsupported, fmt::format("the '{}' filter is not supported by minfer's template engine", e->name),
           e->line);
    fail(ErrorKind::kSyntax, fmt::format("No filter named '{}'.", e->name), e->line);
  }
  if (!soft && e->kind == ExprKind::kTest && !e->test)
    fail(ErrorKind::kSyntax, fmt::format("No test named '{}'.", e->name), e->line);
  for (const auto& c : e->a) check_expr(c.get(), soft);
  for (const auto& c : e->args.pos) check_expr(c.get(), soft);
  for (const auto& [k, c] : e->args.kw) check_expr(c.get(), soft);
  check_expr(e->args.star.get(), soft);
  check_expr(e->args.star_star.get(), soft);
}

// Mirrors where jinja2's compiler opens a new (non-soft) frame: loop bodies and filters,
// macro and call-block bodies, filter/with/set blocks; if statements are soft.
void Parser::check_names(const StmtList& body, bool soft) {
  for (const auto& s : body) {
    switch (s->kind) {
      case StmtKind::kIf:
        check_expr(s->expr.get(), true);
        check_names(s->body, true);
        for (const auto& [test, b] : s->elifs) {
          check_expr(test.get(), true);
          check_names(b, true);
        }
        check_names(s->else_body, true);
        break;
      case StmtKind::kFor:
        check_expr(s->expr.get(), soft);
        check_expr(s->cond.get(), false);
        check_names(s->body, false);
        check_names(s->else_body, false);
        break;
      case StmtKind::kMacro:
      case StmtKind::kCallBlock:
        for (const auto& d : s->defaults) check_expr(d.get(), false);
        check_expr(s->expr.get(), soft);
        check_names(s->body, false);
        break;
      case StmtKind::kSetBlock:
      case StmtKind::kFilterBlock:
        check_expr(s->filter.get(), false);
        check_names(s->body, false);
        break;
      case StmtKind::kWith:
        for (const auto& v : s->values) check_expr(v.get(), soft);
        check_names(s->body, false);
        break;
      case StmtKind::kGeneration: check_names(s->body, false); break;
      default: check_expr(s->expr.get(), soft);
    }
  }
}

Program parse(const std::vector<Token>& tokens) {
  Program p;
  p.body = Parser(tokens).run();
  analyze_scopes(p);
  return p;
}

}  // namespace minfer::jinja
