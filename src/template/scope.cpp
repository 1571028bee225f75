// jinja2's compile-time scoping, reproduced: which names a scope starts with as undefined.
//
// jinja2 compiles each scope (the template, a loop body, a macro body, a set/filter/with
// block) to Python locals. A name assigned in a scope before being read there, and not known
// to an enclosing scope, becomes a local initialized to "missing" when the scope starts, so
// a nested scope (an inner loop, a macro) that reads it before the assignment sees it
// undefined rather than the render argument of the same name:
//
//   {% for i in l %}{% for j in l %}{{ x }}{% endfor %}{% set x = 2 %}{% endfor %}
//
// prints nothing for x even when x is passed to render(). Everything else matches plain
// lexical lookup, which the interpreter does; this pass only lists those names.
#include <map>
#include <set>
#include <string>
#include <vector>

#include "template/ast.h"

namespace minfer::jinja {
namespace {

enum class Ref { kParam, kUndefined, kAlias, kResolve };

struct Symbols {
  const Symbols* parent = nullptr;
  std::map<std::string, Ref> refs;
  std::set<std::string> stores;

  bool find_ref(const std::string& name) const {
    for (const Symbols* s = this; s; s = s->parent)
      if (s->refs.count(name)) return true;
    return false;
  }
  void load(const std::string& name) {
    if (!find_ref(name)) refs[name] = Ref::kResolve;
  }
  void store(const std::string& name) {
    stores.insert(name);
    if (refs.count(name)) return;
    refs[name] = parent && parent->find_ref(name) ? Ref::kAlias : Ref::kUndefined;
  }
  void param(const std::string& name) {
    stores.insert(name);
    refs[name] = Ref::kParam;
  }
  // After an if statement: names assigned in some branch start from the enclosing value.
  void branch_update(const std::vector<Symbols>& branches) {
    std::set<std::string> new_stores;
    for (const Symbols& b : branches)
      for (const std::string& n : b.stores)
        if (!stores.count(n)) new_stores.insert(n);
    for (const Symbols& b : branches) {
      for (const auto& [n, r] : b.refs) refs[n] = r;
      stores.insert(b.stores.begin(), b.stores.end());
    }
    for (const std::string& n : new_stores) refs[n] = parent && parent->find_ref(n) ? Ref::kAlias : Ref::kResolve;
  }
  std::vector<std::string> undefined_names() const {
    std::vector<std::string> out;
    for (const auto& [n, r] : refs)
      if (r == Ref::kUndefined) out.push_back(n);
    return out;
  }
};

// A nested scope to analyze once its parent's symbols are complete (as jinja2 compiles it).
struct Pending {
  enum class What { kLoopBody, kLoopElse, kMacro, kBlock, kWith } what;
  Stmt* stmt;
};

class Analyzer {
 public:
  // Visits the statements of one scope in order (jinja2's FrameSymbolVisitor), then analyzes
  // the scopes nested in it.
  void scope(const StmtList& body, Symbols& sym) {
    std::vector<Pending> nested;
    for (const auto& s : body) stmt(*s, sym, nested);
    for (const Pending& p : nested) analyze(p, sym);
  }

 private:
  static void expr(const Expr* e, Symbols& sym) {
    if (!e) return;
    if (e->kind == ExprKind::kName) sym.load(e->name);
    for (const auto& c : e->a) expr(c.get(), sym);
    for (const auto& c : e->args.pos) expr(c.get(), sym);
    for (const auto& [k, c] : e->args.kw) expr(c.get(), sym);
    expr(e->args.star.get(), sym);
    expr(e->args.star_star.get(), sym);
  }

  static void store_target(const Target& t, Symbols& sym, bool as_param) {
    switch (t.kind) {
      case Target::Kind::kName: as_param ? sym.param(t.name) : sym.store(t.name); break;
      case Target::Kind::kNsAttr: sym.load(t.name); break;
      case Target::Kind::kTuple:
        for (const Target& i : t.items) store_target(i, sym, as_param);
        break;
    }
  }

  void if_stmt(const Expr* test, const StmtList& body, const std::vector<std::pair<ExprPtr, StmtList>>* elifs,
               const StmtList* else_body, Symbols& sym, std::vector<Pending>& nested) {
    expr(test, sym);
    std::vector<Symbols> branches(3, sym);
    for (const auto& s : body) stmt(*s, branches[0], nested);
    if (elifs)  // jinja2 visits all elif nodes as one branch, each an if of its own
      for (const auto& [t, b] : *elifs) if_stmt(t.get(), b, nullptr, nullptr, branches[1], nested);
    if (else_body)
      for (const auto& s : *else_body) stmt(*s, branches[2], nested);
    sym.branch_update(branches);
  }

  void stmt(Stmt& s, Symbols& sym, std::vector<Pending>& nested) {
    switch (s.kind) {
      case StmtKind::kOutput: expr(s.expr.get(), sym); break;
      case StmtKind::kSet:
        expr(s.expr.get(), sym);
        store_target(s.target, sym, false);
        break;
      case StmtKind::kSetBlock:
        store_target(s.target, sym, false);
        nested.push_back({Pending::What::kBlock, &s});
        break;
      case StmtKind::kIf: if_stmt(s.expr.get(), s.body, &s.elifs, &s.else_body, sym, nested); break;
      case StmtKind::kFor:
        expr(s.expr.get(), sym);
        nested.push_back({Pending::What::kLoopBody, &s});
        nested.push_back({Pending::What::kLoopElse, &s});
        break;
      case StmtKind::kMacro:
        sym.store(s.name);
        nested.push_back({Pending::What::kMacro, &s});
        break;
      case StmtKind::kCallBlock:
        expr(s.expr.get(), sym);
        nested.push_back({Pending::What::kMacro, &s});
        break;
      case StmtKind::kFilterBlock:
        expr(s.filter.get(), sym);
        nested.push_back({Pending::What::kBlock, &s});
        break;
      case StmtKind::kWith:
        for (const auto& v : s.values) expr(v.get(), sym);
        nested.push_back({Pending::What::kWith, &s});
        break;
      case StmtKind::kGeneration: nested.push_back({Pending::What::kBlock, &s}); break;
      default: break;
    }
  }

  void analyze(const Pending& p, const Symbols& parent) {
    Stmt& s = *p.stmt;
    Symbols sym;
    sym.parent = &parent;
    switch (p.what) {
      case Pending::What::kLoopBody:
        store_target(s.target, sym, true);
        sym.param("loop");
        scope(s.body, sym);
        s.undef_names = sym.undefined_names();
        return;
      case Pending::What::kLoopElse:
        scope(s.else_body, sym);
        s.else_undef_names = sym.undefined_names();
        return;
      case Pending::What::kMacro:
        for (const std::string& n : s.params) sym.param(n);
        if (s.uses_caller) sym.param("caller");
        if (s.uses_varargs) sym.param("varargs");
        if (s.uses_kwargs) sym.param("kwargs");
        for (const auto& d : s.defaults) expr(d.get(), sym);
        break;
      case Pending::What::kWith:
        for (const Target& t : s.targets) store_target(t, sym, true);
        break;
      case Pending::What::kBlock:
        if (s.kind == StmtKind::kFilterBlock) expr(s.filter.get(), sym);
        break;
    }
    scope(s.body, sym);
    s.undef_names = sym.undefined_names();
  }
};

}  // namespace

void analyze_scopes(Program& program) {
  Symbols root;
  Analyzer().scope(program.body, root);
  program.undef_names = root.undefined_names();
}

}  // namespace minfer::jinja
