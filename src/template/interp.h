// The tree-walking interpreter. One Interp renders one template once; builtins receive it to
// call back into the runtime (calling macros, attribute lookup, limits, the fixed "now").
//
// Scopes follow jinja2: a for-loop iteration, a macro call and a with block get a new frame
// whose parent is the enclosing one (a macro's parent is the frame it was defined in);
// `set` writes to the innermost frame, so a set inside a loop does not leak out of it.
#pragma once

#include <ctime>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "template/ast.h"
#include "template/value.h"

namespace minfer::jinja {

struct Limits {
  size_t max_output = size_t{64} << 20;      // bytes of output and of any one string/list built
  uint64_t max_steps = 50'000'000;           // loop iterations + calls + filter items
  int max_call_depth = 200;                  // nested macro calls / recursive loops
  int max_eval_depth = 1000;                 // nested expressions + statements, calls included
};

struct InterpOptions {
  bool immutable = true;  // transformers' ImmutableSandboxedEnvironment: list.append... refused
  std::tm now{};          // what strftime_now() formats
  Limits limits;
};

struct Frame {
  std::unordered_map<std::string, Value> vars;
  std::shared_ptr<Frame> parent;
  const Value* find(const std::string& name) const;
};
using FramePtr = std::shared_ptr<Frame>;

class Interp {
 public:
  Interp(const InterpOptions& opts, const Value& globals);

  // Renders `body` with `context` (a dict: the render arguments) on top of the globals.
  std::string render(const Program& program, const Value& context);

  // ---- for builtins
  Value call(const Value& fn, CallArgs& args);
  Value getattr(const Value& obj, const std::string& name);
  Value getitem(const Value& obj, const Value& key);
  ValueList iterate(const Value& v);  // Python iter(); consumes generators
  Value apply_filter(const std::string& name, const Value& v, CallArgs& args);
  bool apply_test(const std::string& name, const Value& v, CallArgs& args);
  bool immutable() const { return opts_.immutable; }
  const std::tm& now() const { return opts_.now; }
  void check_size(size_t bytes_or_items) const;
  void step(uint64_t n = 1);
  int current_line() const { return line_; }
  // Objects that can close reference cycles (namespaces, macro closures, containers mutated
  // in place) are emptied when the render ends, so shared_ptr cycles never leak.
  void track(const Value& v);
  void track_frame(const FramePtr& f);

 private:
  enum class Flow { kNormal, kBreak, kContinue };

  Flow exec(const StmtList& body, const FramePtr& frame, std::string& out);
  Flow exec_stmt(const Stmt& s, const FramePtr& frame, std::string& out);
  void exec_for(const Stmt& s, const FramePtr& frame, std::string& out, const Value& iterable, int64_t depth0);
  Value make_macro(const Stmt& s, const FramePtr& frame);
  void assign(const Target& t, const Value& v, const FramePtr& frame);
  void write(std::string& out, std::string_view s) const;

  Value eval(const Expr& e, const FramePtr& frame);
  Value eval_compare(const Expr& e, const FramePtr& frame);
  Value eval_filter(const Expr& e, const FramePtr& frame, const Value* operand);
  void eval_args(const ArgNodes& a, const FramePtr& frame, CallArgs& out);
  Value lookup(const std::string& name, const FramePtr& frame) const;
  // A new scope under `parent`, with the names jinja2 starts as undefined there.
  static FramePtr child_frame(const FramePtr& parent, const std::vector<std::string>& undef_names);

  void release_tracked();

  InterpOptions opts_;
  std::vector<std::weak_ptr<DictObj>> tracked_dicts_;
  std::vector<std::weak_ptr<ListObj>> tracked_lists_;
  std::vector<std::weak_ptr<Frame>> tracked_frames_;
  std::unordered_set<const void*> tracked_;
  FramePtr globals_;
  int line_ = 0;
  int call_depth_ = 0;
  int eval_depth_ = 0;
  struct DepthGuard {  // bounds the C++ stack the tree walk uses
    explicit DepthGuard(Interp& in);
    ~DepthGuard() { --in_.eval_depth_; }
    Interp& in_;
  };
  uint64_t steps_ = 0;
};

// Python operators on values (interp-ops.cpp). `op` is "+", "-", "*", "/", "//", "%", "**".
Value binary_op(Interp& in, const std::string& op, const Value& a, const Value& b);
Value unary_minus(const Value& v, bool negate);
bool contains(const Value& container, const Value& item);  // Python `item in container`
Value slice_value(const Value& v, const Value& start, const Value& stop, const Value& step);
// Raises the UndefinedError an undefined value carries.
[[noreturn]] void undefined_error(const Value& u);

}  // namespace minfer::jinja
