// Expression grammar, following jinja2's precedence: condexpr < or < and < not < compare
// (incl. in / not in) < + - < ~ < * / // % < ** < unary - + < primary with postfix
// (.attr, [key], call), then filters and `is` tests.
#include "template/builtins.h"
#include "template/parser-impl.h"

namespace minfer::jinja {

// jinja2 passes extra end rules ("in", "recursive") to its tuple parser, but they never match
// (a bug it has had for years), so `for a, in x` reads `in` as a target and fails. Same here.
bool Parser::is_tuple_end(std::initializer_list<const char*>) const {
  return cur().type == Tok::kVarEnd || cur().type == Tok::kBlockEnd || is_op(")");
}

ExprPtr Parser::parse_tuple(bool explicit_parens, bool with_cond, std::initializer_list<const char*> extra) {
  const int line = cur().line;
  std::vector<ExprPtr> items;
  bool is_tuple = false;
  for (;;) {
    if (!items.empty()) expect_op(",");
    if (is_tuple_end(extra)) break;
    items.push_back(parse_expression(with_cond));
    if (is_op(",")) is_tuple = true;
    else break;
  }
  if (!is_tuple) {
    if (!items.empty()) return std::move(items[0]);
    if (!explicit_parens) error(fmt::format("Expected an expression, got '{}'", describe(cur())));
  }
  auto e = node(ExprKind::kTuple, line);
  e->a = std::move(items);
  return sealed(std::move(e));
}

ExprPtr Parser::parse_expression(bool with_cond) {
  DepthGuard guard(*this);
  return with_cond ? parse_condexpr() : parse_or();
}

ExprPtr Parser::parse_condexpr() {
  int line = cur().line;
  ExprPtr e = parse_or();
  while (skip_name("if")) {
    auto c = node(ExprKind::kCond, line);
    ExprPtr test = parse_or();
    ExprPtr other = skip_name("else") ? parse_condexpr() : nullptr;
    c->a.push_back(std::move(e));
    c->a.push_back(std::move(test));
    c->a.push_back(std::move(other));
    e = sealed(std::move(c));
    line = cur().line;
  }
  return e;
}

ExprPtr Parser::binary(ExprKind k, ExprPtr l, ExprPtr r, int line, const std::string& op) {
  auto e = node(k, line);
  e->name = op;
  e->a.push_back(std::move(l));
  e->a.push_back(std::move(r));
  return sealed(std::move(e));
}

ExprPtr Parser::parse_or() {
  const int line = cur().line;
  ExprPtr l = parse_and();
  while (skip_name("or")) l = binary(ExprKind::kOr, std::move(l), parse_and(), line);
  return l;
}

ExprPtr Parser::parse_and() {
  const int line = cur().line;
  ExprPtr l = parse_not();
  while (skip_name("and")) l = binary(ExprKind::kAnd, std::move(l), parse_not(), line);
  return l;
}

ExprPtr Parser::parse_not() {
  if (is_name("not")) {
    DepthGuard guard(*this);
    auto e = node(ExprKind::kNot, next().line);
    e->a.push_back(parse_not());
    return sealed(std::move(e));
  }
  return parse_compare();
}

ExprPtr Parser::parse_compare() {
  const int line = cur().line;
  ExprPtr first = parse_math1();
  std::unique_ptr<Expr> cmp;
  for (;;) {
    std::string op;
    if (cur().type == Tok::kOp && (cur().text == "==" || cur().text == "!=" || cur().text == "<" ||
                                   cur().text == "<=" || cur().text == ">" || cur().text == ">=")) {
      op = next().text;
    } else if (skip_name("in")) {
      op = "in";
    } else if (is_name("not") && look().type == Tok::kName && look().text == "in") {
      next();
      next();
      op = "notin";
    } else {
      break;
    }
    if (!cmp) {
      cmp = node(ExprKind::kCompare, line);
      cmp->a.push_back(std::move(first));
    }
    cmp->ops.push_back(op);
    cmp->a.push_back(parse_math1());
  }
  return cmp ? sealed(std::move(cmp)) : std::move(first);
}

ExprPtr Parser::parse_math1() {
  const int line = cur().line;
  ExprPtr l = parse_concat();
  while (is_op("+") || is_op("-")) {
    const std::string op = next().text;
    l = binary(ExprKind::kBinary, std::move(l), parse_concat(), line, op);
  }
  return l;
}

ExprPtr Parser::parse_concat() {
  const int line = cur().line;
  ExprPtr first = parse_math2();
  if (!is_op("~")) return first;
  auto e = node(ExprKind::kConcat, line);
  e->a.push_back(std::move(first));
  while (skip_op("~")) e->a.push_back(parse_math2());
  return sealed(std::move(e));
}

ExprPtr Parser::parse_math2() {
  const int line = cur().line;
  ExprPtr l = parse_pow();
  while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
    const std::string op = next().text;
    l = binary(ExprKind::kBinary, std::move(l), parse_pow(), line, op);
  }
  return l;
}

ExprPtr Parser::parse_pow() {
  const int line = cur().line;
  ExprPtr l = parse_unary(true);
  while (skip_op("**")) l = binary(ExprKind::kBinary, std::move(l), parse_unary(true), line, "**");
  return l;
}

ExprPtr Parser::parse_unary(bool with_filter) {
  DepthGuard guard(*this);
  const int line = cur().line;
  ExprPtr e;
  if (is_op("-") || is_op("+")) {
    const bool neg = next().text == "-";
    e = node(neg ? ExprKind::kNeg : ExprKind::kPos, line);
    e->a.push_back(parse_unary(false));
    e = sealed(std::move(e));
  } else {
    e = parse_primary();
  }
  e = parse_postfix(std::move(e));
  if (with_filter) e = parse_filter_expr(std::move(e));
  return e;
}

ExprPtr Parser::parse_primary() {
  const Token& t = cur();
  const int line = t.line;
  if (t.type == Tok::kName) {
    next();
    if (t.text == "true" || t.text == "True" || t.text == "false" || t.text == "False") {
      auto e = node(ExprKind::kConst, line);
      e->value = Value(t.text == "true" || t.text == "True");
      return e;
    }
    if (t.text == "none" || t.text == "None") {
      auto e = node(ExprKind::kConst, line);
      e->value = Value::none();
      return e;
    }
    auto e = node(ExprKind::kName, line);
    e->name = t.text;
    return e;
  }
  if (t.type == Tok::kString) {
    std::string s;
    while (cur().type == Tok::kString) s += next().text;
    auto e = node(ExprKind::kConst, line);
    e->value = Value(std::move(s));
    return e;
  }
  if (t.type == Tok::kInt || t.type == Tok::kFloat) {
    next();
    auto e = node(ExprKind::kConst, line);
    e->value = t.type == Tok::kInt ? Value(t.i) : Value(t.f);
    return e;
  }
  if (is_op("(")) {
    next();
    ExprPtr e = parse_tuple(true, true, {});
    expect_op(")");
    return e;
  }
  if (is_op("[")) {
    next();
    auto e = node(ExprKind::kList, line);
    while (!is_op("]")) {
      if (!e->a.empty()) expect_op(",");
      if (is_op("]")) break;
      e->a.push_back(parse_expression(true));
    }
    expect_op("]");
    return sealed(std::move(e));
  }
  if (is_op("{")) {
    next();
    auto e = node(ExprKind::kDict, line);
    while (!is_op("}")) {
      if (!e->a.empty()) expect_op(",");
      if (is_op("}")) break;
      e->a.push_back(parse_expression(true));
      expect_op(":");
      e->a.push_back(parse_expression(true));
    }
    expect_op("}");
    return sealed(std::move(e));
  }
  if (t.type == Tok::kEof) error("unexpected end of template");
  error(fmt::format("unexpected '{}'", describe(t)));
}

ExprPtr Parser::parse_postfix(ExprPtr e) {
  for (;;) {
    if (is_op(".") || is_op("[")) e = parse_subscript(std::move(e));
    else if (is_op("(")) e = parse_call(std::move(e));
    else return e;
  }
}

ExprPtr Parser::parse_filter_expr(ExprPtr e) {
  for (;;) {
    if (is_op("|")) e = parse_filter_chain(std::move(e), false);
    else if (is_name("is")) e = parse_test(std::move(e));
    else if (is_op("(")) e = parse_call(std::move(e));
    else return e;
  }
}

ExprPtr Parser::parse_subscript(ExprPtr obj) {
  const Token& t = next();
  const int line = t.line;
  if (t.text == ".") {
    const Token& attr = next();
    if (attr.type == Tok::kName) {
      auto e = node(ExprKind::kGetattr, line);
      e->name = attr.text;
      e->a.push_back(std::move(obj));
      return sealed(std::move(e));
    }
    if (attr.type != Tok::kInt) error("expected name or number", attr.line);
    auto e = node(ExprKind::kGetitem, line);
    auto k = node(ExprKind::kConst, attr.line);
    k->value = Value(attr.i);
    e->a.push_back(std::move(obj));
    e->a.push_back(std::move(k));
    return sealed(std::move(e));
  }
  std::vector<ExprPtr> args;
  while (!is_op("]")) {
    if (!args.empty()) expect_op(",");
    args.push_back(parse_subscribed());
  }
  expect_op("]");
  auto e = node(ExprKind::kGetitem, line);
  e->a.push_back(std::move(obj));
  if (args.size() == 1) {
    if (args[0]->kind == ExprKind::kSlice && is_const(*e->a[0])) {
      bool bounds_const = true;
      for (const auto& b : args[0]->a) bounds_const &= !b || is_const(*b);
      e->folded_slice = bounds_const;
    }
    e->a.push_back(std::move(args[0]));
  } else {
    auto tup = node(ExprKind::kTuple, line);
    tup->a = std::move(args);
    e->a.push_back(std::move(tup));
  }
  return sealed(std::move(e));
}

ExprPtr Parser::parse_subscribed() {
  const int line = cur().line;
  ExprPtr start;
  if (!is_op(":")) {
    start = parse_expression(true);
    if (!is_op(":")) return start;
  }
  next();  // ':'
  auto s = node(ExprKind::kSlice, line);
  s->a.push_back(std::move(start));
  if (is_op(":") || is_op("]") || is_op(",")) s->a.push_back(nullptr);
  else s->a.push_back(parse_expression(true));
  if (skip_op(":")) {
    if (is_op("]") || is_op(",")) s->a.push_back(nullptr);
    else s->a.push_back(parse_expression(true));
  } else {
    s->a.push_back(nullptr);
  }
  return sealed(std::move(s));
}

void Parser::parse_call_args(ArgNodes& out) {
  const int line = cur().line;
  expect_op("(");
  bool require_comma = false;
  auto ensure = [&](bool ok) {
    if (!ok) error("invalid syntax for function call expression", line);
  };
  while (!is_op(")")) {
    if (require_comma) {
      expect_op(",");
      if (is_op(")")) break;
    }
    if (skip_op("*")) {
      ensure(!out.star && !out.star_star);
      out.star = parse_expression(true);
    } else if (skip_op("**")) {
      ensure(!out.star_star);
      out.star_star = parse_expression(true);
    } else if (cur().type == Tok::kName && look().type == Tok::kOp && look().text == "=") {
      ensure(!out.star_star);
      std::string key = next().text;
      next();
      out.kw.emplace_back(std::move(key), parse_expression(true));
    } else {
      ensure(!out.star && !out.star_star && out.kw.empty());
      out.pos.push_back(parse_expression(true));
    }
    require_comma = true;
  }
  expect_op(")");
}

ExprPtr Parser::parse_call(ExprPtr callee) {
  auto e = node(ExprKind::kCall, cur().line);
  parse_call_args(e->args);
  e->a.push_back(std::move(callee));
  return sealed(std::move(e));
}

std::string Parser::dotted_name() {
  std::string name = expect_name();
  while (skip_op(".")) {
    name += '.';
    name += expect_name();
  }
  return name;
}

ExprPtr Parser::parse_filter_chain(ExprPtr e, bool start_inline) {
  while (is_op("|") || start_inline) {
    if (!start_inline) next();
    start_inline = false;
    const int line = cur().line;
    auto f = node(ExprKind::kFilter, line);
    f->name = dotted_name();
    f->filter = find_filter(f->name);  // unknown ones are checked by check_names()
    if (is_op("(")) parse_call_args(f->args);
    f->a.push_back(std::move(e));
    e = sealed(std::move(f));
  }
  return e;
}

ExprPtr Parser::parse_test(ExprPtr operand) {
  const int line = next().line;  // 'is'
  const bool negated = skip_name("not");
  auto t = node(ExprKind::kTest, line);
  t->name = dotted_name();
  t->test = find_test(t->name);
  if (is_op("(")) {
    parse_call_args(t->args);
  } else if ((cur().type == Tok::kName || cur().type == Tok::kString || cur().type == Tok::kInt ||
              cur().type == Tok::kFloat || is_op("(") || is_op("[") || is_op("{")) &&
             !is_name("else") && !is_name("or") && !is_name("and")) {
    if (is_name("is")) error("You cannot chain multiple tests with is");
    t->args.pos.push_back(parse_postfix(parse_primary()));
  }
  t->a.push_back(std::move(operand));
  if (!negated) return sealed(std::move(t));
  auto n = node(ExprKind::kNot, line);
  n->a.push_back(sealed(std::move(t)));
  return sealed(std::move(n));
}

}  // namespace minfer::jinja
