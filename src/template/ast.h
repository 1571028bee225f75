// The syntax tree the parser builds and the interpreter walks. Plain data: one Expr struct
// and one Stmt struct with a kind tag; children are owned.
//
//   {{ user.name | upper }}  ->  Stmt{kOutput, expr = Filter("upper", Getattr(Name user, "name"))}
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "template/value.h"

namespace minfer::jinja {

struct Expr;
struct Stmt;
using ExprPtr = std::unique_ptr<Expr>;
using StmtList = std::vector<std::unique_ptr<Stmt>>;

struct ArgNodes {
  std::vector<ExprPtr> pos;
  std::vector<std::pair<std::string, ExprPtr>> kw;
  ExprPtr star;       // *args
  ExprPtr star_star;  // **kwargs
};

struct FilterDef;
struct TestDef;

enum class ExprKind {
  kConst,    // value
  kName,     // name
  kGetattr,  // a[0].name
  kGetitem,  // a[0][a[1]]; a[1] may be a kSlice
  kSlice,    // a[0..2] (start, stop, step), each may be null
  kCall,     // a[0](args)
  kFilter,   // a[0] | name(args); a[0] null at the bottom of a filter block / set block chain
  kTest,     // a[0] is name(args)
  kNeg, kPos, kNot,  // a[0]
  kBinary,   // a[0] op a[1]; op in + - * / // % **
  kAnd, kOr,
  kConcat,   // a[0] ~ a[1] ~ ...
  kCompare,  // a[0] ops[0] a[1] ops[1] a[2]...
  kCond,     // a[0] if a[1] else a[2] (a[2] may be null)
  kList, kTuple,
  kDict,     // keys and values interleaved
};

struct Expr {
  ExprKind kind = ExprKind::kConst;
  int line = 0;
  Value value;                   // kConst
  std::string name;              // kName, kGetattr, kFilter, kTest, kBinary (the operator)
  std::vector<ExprPtr> a;        // operands, see ExprKind
  std::vector<std::string> ops;  // kCompare: "==", "!=", "<", "<=", ">", ">=", "in", "notin"
  ArgNodes args;                 // kCall, kFilter, kTest
  int depth = 1;                 // height of this subtree (bounded: see kMaxExprDepth)
  // kGetitem of a slice on a constant: jinja2 folds it at compile time through its getitem,
  // so an invalid slice gives undefined instead of the runtime TypeError.
  bool folded_slice = false;
  const FilterDef* filter = nullptr;  // resolved at parse time
  const TestDef* test = nullptr;
};

// An assignment target: `x`, `a, b`, `ns.attr`.
struct Target {
  enum class Kind { kName, kTuple, kNsAttr } kind = Kind::kName;
  std::string name;  // kName, kNsAttr (the namespace variable)
  std::string attr;  // kNsAttr
  std::vector<Target> items;
};

enum class StmtKind {
  kData,         // text
  kOutput,       // {{ expr }}
  kIf,           // expr, body, elifs, else_body
  kFor,          // target in expr [if cond] [recursive], body, else_body
  kSet,          // target = expr
  kSetBlock,     // {% set target | filter %}body{% endset %}
  kMacro,        // name(params=defaults) body
  kCallBlock,    // {% call(params) expr %}body{% endcall %}
  kFilterBlock,  // {% filter f %}body{% endfilter %}
  kWith,         // {% with targets = values %}body{% endwith %}
  kBreak, kContinue,
  kGeneration,   // transformers' {% generation %}body{% endgeneration %}: renders its body
};

struct Stmt {
  StmtKind kind = StmtKind::kData;
  int line = 0;
  std::string text;  // kData
  ExprPtr expr;
  ExprPtr cond;      // kFor filter
  ExprPtr filter;    // kSetBlock / kFilterBlock chain
  Target target;
  StmtList body, else_body;
  std::vector<std::pair<ExprPtr, StmtList>> elifs;
  bool recursive = false;
  // kMacro, kCallBlock
  std::string name;
  std::vector<std::string> params;
  std::vector<ExprPtr> defaults;  // for the last defaults.size() params
  bool uses_caller = false, uses_varargs = false, uses_kwargs = false;
  // kWith
  std::vector<Target> targets;
  std::vector<ExprPtr> values;
  // Names the scope this statement opens (loop body, macro body...) starts with as undefined:
  // assigned in that scope before any read there, and not assigned in an enclosing scope.
  // A nested scope reading one before the assignment sees it undefined, as in jinja2.
  std::vector<std::string> undef_names, else_undef_names;
};

// A parsed template: the top-level statements and the root scope's undefined-initialized names.
struct Program {
  StmtList body;
  std::vector<std::string> undef_names;
};

// jinja2's compile-time symbol analysis (scope.cpp): fills the undef_names lists.
void analyze_scopes(Program& program);

}  // namespace minfer::jinja
