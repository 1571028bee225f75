// Statement execution: output, if, for (loop variables, filters, else, recursion, break /
// continue), set, macros and call blocks, filter / with / generation blocks.
#include <fmt/format.h>

#include "template/builtins.h"
#include "template/error.h"
#include "template/interp.h"

namespace minfer::jinja {

Interp::Interp(const InterpOptions& opts, const Value& globals) : opts_(opts), globals_(std::make_shared<Frame>()) {
  if (globals.is_dict())
    for (const auto& [k, v] : globals.dict_obj().entries())
      if (k.is_string()) globals_->vars[k.str()] = v;
}

void Interp::check_size(size_t n) const {
  if (n > opts_.limits.max_output)
    fail(ErrorKind::kLimit, fmt::format("a string or list of {} would pass the limit of {}", n, opts_.limits.max_output),
         line_);
}

void Interp::step(uint64_t n) {
  steps_ += n;
  if (steps_ > opts_.limits.max_steps)
    fail(ErrorKind::kLimit, fmt::format("the template ran more than {} steps (loop iterations and calls)",
                                        opts_.limits.max_steps), line_);
}

void Interp::write(std::string& out, std::string_view s) const {
  if (out.size() + s.size() > opts_.limits.max_output)
    fail(ErrorKind::kLimit, fmt::format("the output passed the limit of {} bytes", opts_.limits.max_output), line_);
  out += s;
}

void Interp::track(const Value& v) {
  const void* id = v.identity();
  if (!id || !tracked_.insert(id).second) return;
  if (v.is_dict() || v.is_namespace()) tracked_dicts_.push_back(v.dict_ptr());
  else if (v.is_list() || v.is_tuple() || v.is_iterator()) tracked_lists_.push_back(v.list_ptr());
}

void Interp::track_frame(const FramePtr& f) {
  if (tracked_.insert(f.get()).second) tracked_frames_.push_back(f);
}

void Interp::release_tracked() {
  // Move the contents out first: destroying them may run destructors that touch the lists.
  std::vector<Value> graveyard;
  for (auto& w : tracked_dicts_)
    if (auto d = w.lock()) {
      for (const auto& [k, v] : d->entries()) graveyard.push_back(v);
      d->clear();
    }
  for (auto& w : tracked_lists_)
    if (auto l = w.lock()) {
      for (Value& v : l->items) graveyard.push_back(std::move(v));
      l->items.clear();
    }
  std::vector<std::unordered_map<std::string, Value>> frames;
  for (auto& w : tracked_frames_)
    if (auto f = w.lock()) frames.push_back(std::move(f->vars));
  tracked_dicts_.clear();
  tracked_lists_.clear();
  tracked_frames_.clear();
  tracked_.clear();
}

FramePtr Interp::child_frame(const FramePtr& parent, const std::vector<std::string>& undef_names) {
  auto f = std::make_shared<Frame>();
  f->parent = parent;
  for (const std::string& n : undef_names) f->vars[n] = Value::undefined(fmt::format("'{}' is undefined", n));
  return f;
}

std::string Interp::render(const Program& program, const Value& context) {
  struct Release {
    Interp* in;
    ~Release() { in->release_tracked(); }
  } release{this};
  auto root = std::make_shared<Frame>();
  root->parent = globals_;
  // In the mutable sandbox the template may change its inputs in place: it gets copies, so
  // the caller's values stay as they were.
  if (context.is_dict())
    for (const auto& [k, v] : context.dict_obj().entries())
      if (k.is_string()) root->vars[k.str()] = opts_.immutable ? v : deep_copy(v);
  for (const std::string& n : program.undef_names) root->vars[n] = Value::undefined(fmt::format("'{}' is undefined", n));
  std::string out;
  try {
    exec(program.body, root, out);
  } catch (JinjaError& e) {
    e.set_line(line_);
    throw;
  }
  return out;
}

Value Interp::apply_filter(const std::string& name, const Value& v, CallArgs& args) {
  const FilterDef* f = find_filter(name);
  if (!f) fail(ErrorKind::kType, fmt::format("No filter named '{}'.", name));
  return f->fn(*this, v, args);
}

bool Interp::apply_test(const std::string& name, const Value& v, CallArgs& args) {
  const TestDef* t = find_test(name);
  if (!t) fail(ErrorKind::kType, fmt::format("No test named '{}'.", name));
  if (args.pos.size() + args.kw.size() != static_cast<size_t>(t->n_args))
    type_error(fmt::format("test '{}' takes {} argument(s), {} given", name, t->n_args, args.pos.size() + args.kw.size()));
  return t->fn(*this, v, args);
}

void Interp::assign(const Target& t, const Value& v, const FramePtr& frame) {
  switch (t.kind) {
    case Target::Kind::kName: frame->vars[t.name] = v; return;
    case Target::Kind::kNsAttr: {
      const Value* ns = frame->find(t.name);
      if (!ns || !ns->is_namespace()) fail(ErrorKind::kType, "Can only set attributes on namespace objects.");
      ns->dict_obj().set(t.attr, v);
      return;
    }
    case Target::Kind::kTuple: {
      ValueList items = iterate(v);
      if (items.size() > t.items.size())
        type_error(fmt::format("too many values to unpack (expected {})", t.items.size()));
      if (items.size() < t.items.size())
        type_error(fmt::format("not enough values to unpack (expected {}, got {})", t.items.size(), items.size()));
      for (size_t i = 0; i < items.size(); ++i) assign(t.items[i], items[i], frame);
      return;
    }
  }
}

Interp::Flow Interp::exec(const StmtList& body, const FramePtr& frame, std::string& out) {
  for (const auto& s : body) {
    const Flow f = exec_stmt(*s, frame, out);
    if (f != Flow::kNormal) return f;
  }
  return Flow::kNormal;
}

void Interp::exec_for(const Stmt& s, const FramePtr& frame, std::string& out, const Value& iterable, int64_t depth0) {
  auto items = std::make_shared<ListObj>();
  ValueList all = iterate(iterable);
  if (s.cond) {
    for (Value& x : all) {
      step();
      auto f = std::make_shared<Frame>();
      f->parent = frame;
      assign(s.target, x, f);
      if (eval(*s.cond, f).truthy()) items->items.push_back(std::move(x));
    }
  } else {
    items->items = std::move(all);
  }
  // jinja2 runs the else block when no iteration reached the end of the body: an empty
  // sequence, but also every iteration ending in break or continue.
  bool completed = false;
  auto run_else = [&] {
    if (!completed && !s.else_body.empty()) exec(s.else_body, child_frame(frame, s.else_undef_names), out);
  };
  if (items->items.empty()) return run_else();
  auto loop = std::make_shared<LoopObj>();
  loop->items = items;
  loop->depth0 = depth0;
  if (s.recursive) {
    track_frame(frame);
    loop->recurse = Value::builtin("loop", [this, &s, frame, depth0](Interp&, CallArgs& a) -> Value {
      if (a.pos.size() != 1 || !a.kw.empty()) type_error("loop() takes exactly one argument");
      if (++call_depth_ > opts_.limits.max_call_depth)
        fail(ErrorKind::kLimit, fmt::format("recursive loop nested deeper than {}", opts_.limits.max_call_depth));
      std::string sub;
      exec_for(s, frame, sub, a.pos[0], depth0 + 1);
      --call_depth_;
      return Value(std::move(sub));
    });
  }
  const Value loop_value = Value::loop(loop);
  for (size_t i = 0; i < items->items.size(); ++i) {
    step();
    loop->index0 = static_cast<int64_t>(i);
    FramePtr f = child_frame(frame, s.undef_names);
    f->vars["loop"] = loop_value;
    assign(s.target, items->items[i], f);
    const Flow flow = exec(s.body, f, out);
    if (flow == Flow::kBreak) break;
    completed |= flow == Flow::kNormal;
  }
  run_else();
}

Value Interp::make_macro(const Stmt& s, const FramePtr& closure) {
  auto c = std::make_shared<Callable>();
  c->type = Callable::Type::kMacro;
  c->name = s.name;
  const Stmt* def = &s;
  track_frame(closure);
  c->fn = [def, closure](Interp& in, CallArgs& a) -> Value {
    const Stmt& m = *def;
    FramePtr f = child_frame(closure, m.undef_names);
    const size_t n_params = m.params.size();
    std::vector<bool> given(n_params, false);
    ValueList varargs;
    for (size_t i = 0; i < a.pos.size(); ++i) {
      if (i < n_params) {
        f->vars[m.params[i]] = a.pos[i];
        given[i] = true;
      } else if (m.uses_varargs) {
        varargs.push_back(a.pos[i]);
      } else {
        type_error(fmt::format("macro '{}' takes not more than {} argument(s)", m.name, n_params));
      }
    }
    Value kwargs = Value::dict();
    bool have_caller = false;
    for (auto& [k, v] : a.kw) {
      size_t idx = n_params;
      for (size_t i = 0; i < n_params; ++i)
        if (m.params[i] == k) idx = i;
      if (idx < n_params) {
        if (given[idx]) type_error(fmt::format("macro '{}' got multiple values for argument '{}'", m.name, k));
        f->vars[k] = v;
        given[idx] = true;
      } else if (k == "caller" && m.uses_caller) {
        f->vars["caller"] = v;
        have_caller = true;
      } else if (m.uses_kwargs) {
        kwargs.dict_obj().set(k, v);
      } else {
        type_error(fmt::format("macro '{}' takes no keyword argument '{}'", m.name, k));
      }
    }
    if (++in.call_depth_ > in.opts_.limits.max_call_depth)
      fail(ErrorKind::kLimit, fmt::format("macro calls nested deeper than {}", in.opts_.limits.max_call_depth));
    const size_t first_default = n_params - m.defaults.size();
    for (size_t i = 0; i < n_params; ++i) {
      if (given[i]) continue;
      if (i >= first_default) f->vars[m.params[i]] = in.eval(*m.defaults[i - first_default], f);
      else f->vars[m.params[i]] = Value::undefined(fmt::format("parameter '{}' was not provided", m.params[i]));
    }
    if (m.uses_varargs) f->vars["varargs"] = Value::tuple(std::move(varargs));
    if (m.uses_kwargs) f->vars["kwargs"] = kwargs;
    if (m.uses_caller && !have_caller)
      f->vars["caller"] = Value::undefined("No caller defined");
    std::string out;
    const int saved_line = in.line_;
    in.exec(m.body, f, out);
    in.line_ = saved_line;
    --in.call_depth_;
    return Value(std::move(out));
  };
  return Value::callable(std::move(c));
}

Interp::Flow Interp::exec_stmt(const Stmt& s, const FramePtr& frame, std::string& out) {
  DepthGuard guard(*this);
  line_ = s.line;
  switch (s.kind) {
    case StmtKind::kData: write(out, s.text); break;
    case StmtKind::kOutput: {
      Value v = eval(*s.expr, frame);
      line_ = s.line;
      write(out, v.to_str());
      break;
    }
    case StmtKind::kIf: {
      if (eval(*s.expr, frame).truthy()) return exec(s.body, frame, out);
      for (const auto& [test, body] : s.elifs)
        if (eval(*test, frame).truthy()) return exec(body, frame, out);
      return exec(s.else_body, frame, out);
    }
    case StmtKind::kFor: {
      Value iterable = eval(*s.expr, frame);
      exec_for(s, frame, out, iterable, 0);
      break;
    }
    case StmtKind::kSet: assign(s.target, eval(*s.expr, frame), frame); break;
    case StmtKind::kSetBlock: {
      FramePtr f = child_frame(frame, s.undef_names);
      std::string body;
      exec(s.body, f, body);
      Value v(std::move(body));
      if (s.filter) v = eval_filter(*s.filter, frame, &v);
      line_ = s.line;
      assign(s.target, v, frame);
      break;
    }
    case StmtKind::kMacro: frame->vars[s.name] = make_macro(s, frame); break;
    case StmtKind::kCallBlock: {
      const Expr& call_expr = *s.expr;
      Value fn = eval(*call_expr.a[0], frame);
      CallArgs args;
      eval_args(call_expr.args, frame, args);
      args.kw.emplace_back("caller", make_macro(s, frame));
      line_ = s.line;
      write(out, call(fn, args).to_str());
      break;
    }
    case StmtKind::kFilterBlock: {
      FramePtr f = child_frame(frame, s.undef_names);
      std::string body;
      exec(s.body, f, body);
      Value v(std::move(body));
      write(out, eval_filter(*s.filter, frame, &v).to_str());
      break;
    }
    case StmtKind::kWith: {
      FramePtr f = child_frame(frame, s.undef_names);
      std::vector<Value> values;
      for (const auto& v : s.values) values.push_back(eval(*v, frame));
      for (size_t i = 0; i < values.size(); ++i) assign(s.targets[i], values[i], f);
      return exec(s.body, f, out);
    }
    case StmtKind::kBreak: return Flow::kBreak;
    case StmtKind::kContinue: return Flow::kContinue;
    case StmtKind::kGeneration: {  // a call block in transformers: its own scope
      exec(s.body, child_frame(frame, s.undef_names), out);
      break;
    }
  }
  return Flow::kNormal;
}

}  // namespace minfer::jinja
