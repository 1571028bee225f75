// Expression evaluation, attribute/item lookup and calls (jinja2 sandbox semantics).
#include <fmt/format.h>

#include "template/builtins.h"
#include "template/error.h"
#include "template/interp.h"
#include "template/text.h"

namespace minfer::jinja {

const Value* Frame::find(const std::string& name) const {
  for (const Frame* f = this; f; f = f->parent.get()) {
    auto it = f->vars.find(name);
    if (it != f->vars.end()) return &it->second;
  }
  return nullptr;
}

Value Interp::lookup(const std::string& name, const FramePtr& frame) const {
  if (const Value* v = frame->find(name)) return *v;
  return Value::undefined(fmt::format("'{}' is undefined", name));
}

namespace {

std::string object_desc(const Value& obj) {
  if (obj.is_none()) return "None";
  return obj.type_name() + " object";
}

// A filter or test unknown at parse time in a soft (if) context, reached at run time.
[[noreturn]] void missing_name(const char* what, const std::string& name) {
  if (what[0] == 'f' && is_unsupported_filter(name))
    fail(ErrorKind::kUnsupported, fmt::format("the '{}' filter is not supported by minfer's template engine", name));
  fail(ErrorKind::kType, fmt::format("No {} named '{}' found.", what, name));
}

// Python objects have dunder attributes (__class__, __len__...), which the sandbox refuses;
// other names starting with '_' simply do not exist (a dict key "_x" is still found).
bool is_dunder(const std::string& name) { return name.size() > 4 && name.starts_with("__") && name.ends_with("__"); }

Value unsafe(const Value& obj, const std::string& name) {
  return Value::undefined(fmt::format("access to attribute '{}' of '{}' object is unsafe.", name, obj.type_name()));
}

Value no_attribute(const Value& obj, const std::string& name) {
  return Value::undefined(fmt::format("'{}' has no attribute '{}'", object_desc(obj), name));
}

Value loop_attr(const LoopObj& l, const std::string& name) {
  const auto n = static_cast<int64_t>(l.items->items.size());
  if (name == "index") return Value(l.index0 + 1);
  if (name == "index0") return Value(l.index0);
  if (name == "revindex") return Value(n - l.index0);
  if (name == "revindex0") return Value(n - l.index0 - 1);
  if (name == "first") return Value(l.index0 == 0);
  if (name == "last") return Value(l.index0 == n - 1);
  if (name == "length") return Value(n);
  if (name == "depth") return Value(l.depth0 + 1);
  if (name == "depth0") return Value(l.depth0);
  if (name == "previtem")
    return l.index0 > 0 ? l.items->items[static_cast<size_t>(l.index0 - 1)]
                        : Value::undefined("there is no previous item");
  if (name == "nextitem")
    return l.index0 + 1 < n ? l.items->items[static_cast<size_t>(l.index0 + 1)]
                            : Value::undefined("there is no next item");
  return Value::undefined(fmt::format("'LoopContext object' has no attribute '{}'", name));
}

}  // namespace

Value Interp::getattr(const Value& obj, const std::string& name) {
  switch (obj.kind()) {
    case Value::Kind::kUndefined: undefined_error(obj);
    case Value::Kind::kNamespace: {
      const Value* v = obj.dict_obj().find(std::string_view(name));
      return v ? *v : no_attribute(obj, name);
    }
    case Value::Kind::kLoop: {
      if (name == "cycle" || name == "changed") {
        auto self = obj;
        const bool cycle = name == "cycle";
        return Value::builtin("loop." + name, [self, cycle](Interp&, CallArgs& a) -> Value {
          LoopObj& l = self.loop_obj();
          if (cycle) {
            if (a.pos.empty()) type_error("no items for cycling given");
            return a.pos[static_cast<size_t>(l.index0) % a.pos.size()];
          }
          Value cur = Value::tuple(a.pos);
          if (l.changed_called && values_equal(cur, l.last_changed)) return Value(false);
          l.changed_called = true;
          l.last_changed = cur;
          return Value(true);
        });
      }
      if (name == "__call__" || name == "recurse") break;
      return loop_attr(obj.loop_obj(), name);
    }
    default: break;
  }
  if (is_dunder(name)) return unsafe(obj, name);
  Value m = find_method(obj, name, opts_.immutable);
  if (!m.is_undefined() || !m.undefined_hint().empty()) return m;
  if (obj.is_dict()) {
    if (const Value* v = obj.dict_obj().find(std::string_view(name))) return *v;
  }
  return no_attribute(obj, name);
}

Value Interp::getitem(const Value& obj, const Value& key) {
  if (obj.is_undefined()) undefined_error(obj);
  try {
    switch (obj.kind()) {
      case Value::Kind::kDict: {
        if (hash_key(key)) {
          if (const Value* v = obj.dict_obj().find(key)) return *v;
        }
        break;
      }
      case Value::Kind::kList:
      case Value::Kind::kTuple:
      case Value::Kind::kString: {
        if (!key.is_int() && !key.is_bool()) break;
        int64_t i = key.get_int();
        if (obj.is_string()) {
          if (is_ascii(obj.str())) {
            const auto n = static_cast<int64_t>(obj.str().size());
            if (i < 0) i += n;
            if (i < 0 || i >= n) break;
            return obj.is_markup() ? Value::markup(obj.str().substr(static_cast<size_t>(i), 1))
                                   : Value(obj.str().substr(static_cast<size_t>(i), 1));
          }
          std::vector<uint32_t> cps = utf8_decode(obj.str());
          const auto n = static_cast<int64_t>(cps.size());
          if (i < 0) i += n;
          if (i < 0 || i >= n) break;
          std::string s;
          utf8_append(s, cps[static_cast<size_t>(i)]);
          return obj.is_markup() ? Value::markup(std::move(s)) : Value(std::move(s));
        }
        const auto n = static_cast<int64_t>(obj.items().size());
        if (i < 0) i += n;
        if (i < 0 || i >= n) break;
        return obj.items()[static_cast<size_t>(i)];
      }
      default: break;
    }
  } catch (const JinjaError& e) {
    if (e.kind() != ErrorKind::kType) throw;
  }
  // Like jinja2's sandbox: a failed item lookup with a string key tries the attribute.
  if (key.is_string()) {
    const std::string& name = key.str();
    if (obj.is_namespace() || obj.is_loop()) return getattr(obj, name);
    if (is_dunder(name)) return unsafe(obj, name);
    Value m = find_method(obj, name, opts_.immutable);
    if (!m.is_undefined() || !m.undefined_hint().empty()) return m;
  }
  if (key.is_string())
    return Value::undefined(fmt::format("'{}' has no attribute '{}'", object_desc(obj), key.str()));
  return Value::undefined(fmt::format("{} has no element {}", object_desc(obj), key.repr()));
}

Value Interp::call(const Value& fn, CallArgs& args) {
  if (fn.is_undefined()) undefined_error(fn);
  if (fn.is_loop()) {
    const Value& r = fn.loop_obj().recurse;
    if (r.is_undefined()) type_error("'LoopContext' object is not callable: the loop is not marked 'recursive'");
    return call(r, args);
  }
  if (!fn.is_callable()) type_error(fmt::format("'{}' object is not callable", fn.type_name()));
  step();
  return fn.callable_obj().fn(*this, args);
}

ValueList Interp::iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return {};
    case Value::Kind::kList:
    case Value::Kind::kTuple: return v.items();
    case Value::Kind::kIterator: {
      ListObj& l = v.list_obj();
      if (l.consumed) return {};
      l.consumed = true;
      if (!l.error.empty()) fail(static_cast<ErrorKind>(l.error_kind), l.error);
      return l.items;
    }
    case Value::Kind::kDict: {
      ValueList keys;
      for (const auto& [k, x] : v.dict_obj().entries()) keys.push_back(k);
      return keys;
    }
    case Value::Kind::kString: {
      ValueList chars;
      const std::string& s = v.str();
      for (size_t i = 0; i < s.size();) {
        size_t n = 1;
        while (i + n < s.size() && (static_cast<unsigned char>(s[i + n]) & 0xC0) == 0x80) ++n;
        chars.emplace_back(s.substr(i, n));
        i += n;
      }
      return chars;
    }
    default: type_error(fmt::format("'{}' object is not iterable", v.type_name()));
  }
}

void Interp::eval_args(const ArgNodes& a, const FramePtr& frame, CallArgs& out) {
  for (const auto& p : a.pos) out.pos.push_back(eval(*p, frame));
  if (a.star) {
    Value extra = eval(*a.star, frame);
    for (Value& x : iterate(extra)) out.pos.push_back(std::move(x));
  }
  for (const auto& [k, v] : a.kw) out.kw.emplace_back(k, eval(*v, frame));
  if (a.star_star) {
    Value extra = eval(*a.star_star, frame);
    if (extra.is_undefined()) undefined_error(extra);  // Python asks it for .keys()
    if (!extra.is_dict()) type_error(fmt::format("argument after ** must be a mapping, not {}", extra.type_name()));
    for (const auto& [k, v] : extra.dict_obj().entries()) {
      if (!k.is_string()) type_error("keywords must be strings");
      out.kw.emplace_back(k.str(), v);
    }
  }
}

Value Interp::eval_filter(const Expr& e, const FramePtr& frame, const Value* operand) {
  // In a {% set x | f %} / {% filter f %} chain the bottom operand is the rendered block.
  Value v = !e.a[0] ? (operand ? *operand : Value())
            : operand ? eval_filter(*e.a[0], frame, operand)
                      : eval(*e.a[0], frame);
  CallArgs args;
  eval_args(e.args, frame, args);
  line_ = e.line;
  if (!e.filter) missing_name("filter", e.name);
  return e.filter->fn(*this, v, args);
}

Value Interp::eval_compare(const Expr& e, const FramePtr& frame) {
  Value left = eval(*e.a[0], frame);
  for (size_t i = 0; i < e.ops.size(); ++i) {
    Value right = eval(*e.a[i + 1], frame);
    const std::string& op = e.ops[i];
    bool ok;
    if (op == "==") ok = values_equal(left, right);
    else if (op == "!=") ok = !values_equal(left, right);
    else if (op == "in") ok = contains(right, left);
    else if (op == "notin") ok = !contains(right, left);
    else {
      if (op == "<" || op == ">") {
        // A dict/list/None pair that Python refuses to order gives a TypeError, as here.
        const int c = values_compare(left, right);
        ok = op == "<" ? c < 0 : c > 0;
      } else {
        const int c = values_compare(left, right);
        ok = op == "<=" ? c <= 0 : c >= 0;
      }
    }
    if (!ok) return Value(false);
    left = std::move(right);
  }
  return Value(true);
}

Interp::DepthGuard::DepthGuard(Interp& in) : in_(in) {
  if (++in_.eval_depth_ > in_.opts_.limits.max_eval_depth) {
    --in_.eval_depth_;
    fail(ErrorKind::kLimit, fmt::format("expressions and calls nested deeper than {}", in_.opts_.limits.max_eval_depth));
  }
}

Value Interp::eval(const Expr& e, const FramePtr& frame) {
  DepthGuard guard(*this);
  line_ = e.line;
  switch (e.kind) {
    case ExprKind::kConst: return e.value;
    case ExprKind::kName: return lookup(e.name, frame);
    case ExprKind::kGetattr: {
      Value obj = eval(*e.a[0], frame);
      line_ = e.line;
      return getattr(obj, e.name);
    }
    case ExprKind::kGetitem: {
      Value obj = eval(*e.a[0], frame);
      const Expr& k = *e.a[1];
      if (k.kind == ExprKind::kSlice) {
        Value parts[3];
        for (int i = 0; i < 3; ++i) parts[i] = k.a[static_cast<size_t>(i)] ? eval(*k.a[static_cast<size_t>(i)], frame) : Value::none();
        line_ = e.line;
        if (obj.is_undefined()) undefined_error(obj);
        if (!e.folded_slice) return slice_value(obj, parts[0], parts[1], parts[2]);  // bypasses getitem: errors raise
        try {
          return slice_value(obj, parts[0], parts[1], parts[2]);
        } catch (const JinjaError& err) {
          if (err.kind() != ErrorKind::kType || err.message() == "slice step cannot be zero") throw;
          return Value::undefined(fmt::format("{} has no element slice", obj.type_name()));
        }
      }
      Value key = eval(k, frame);
      line_ = e.line;
      return getitem(obj, key);
    }
    case ExprKind::kSlice: fail(ErrorKind::kSyntax, "a slice outside of a subscript", e.line);
    case ExprKind::kCall: {
      Value fn = eval(*e.a[0], frame);
      CallArgs args;
      eval_args(e.args, frame, args);
      line_ = e.line;
      return call(fn, args);
    }
    case ExprKind::kFilter: return eval_filter(e, frame, nullptr);
    case ExprKind::kTest: {
      Value v = eval(*e.a[0], frame);
      CallArgs args;
      eval_args(e.args, frame, args);
      line_ = e.line;
      if (!e.test) missing_name("test", e.name);
      if (args.pos.size() + args.kw.size() != static_cast<size_t>(e.test->n_args))
        type_error(fmt::format("test '{}' takes {} argument(s), {} given", e.name, e.test->n_args,
                               args.pos.size() + args.kw.size()));
      return Value(e.test->fn(*this, v, args));
    }
    case ExprKind::kNeg:
    case ExprKind::kPos: {
      Value v = eval(*e.a[0], frame);
      line_ = e.line;
      return unary_minus(v, e.kind == ExprKind::kNeg);
    }
    case ExprKind::kNot: return Value(!eval(*e.a[0], frame).truthy());
    case ExprKind::kBinary: {
      Value l = eval(*e.a[0], frame);
      Value r = eval(*e.a[1], frame);
      line_ = e.line;
      return binary_op(*this, e.name, l, r);
    }
    case ExprKind::kAnd: {
      Value l = eval(*e.a[0], frame);
      return l.truthy() ? eval(*e.a[1], frame) : l;
    }
    case ExprKind::kOr: {
      Value l = eval(*e.a[0], frame);
      return l.truthy() ? l : eval(*e.a[1], frame);
    }
    case ExprKind::kConcat: {
      std::string out;
      for (const auto& x : e.a) {
        out += eval(*x, frame).to_str();
        check_size(out.size());
      }
      return Value(std::move(out));
    }
    case ExprKind::kCompare: return eval_compare(e, frame);
    case ExprKind::kCond: {
      if (eval(*e.a[1], frame).truthy()) return eval(*e.a[0], frame);
      if (e.a[2]) return eval(*e.a[2], frame);
      return Value::undefined("the inline if-expression on line " + std::to_string(e.line) +
                              " evaluated to false and no else section was defined.");
    }
    case ExprKind::kList:
    case ExprKind::kTuple: {
      ValueList items;
      items.reserve(e.a.size());
      for (const auto& x : e.a) items.push_back(eval(*x, frame));
      return e.kind == ExprKind::kList ? Value::list(std::move(items)) : Value::tuple(std::move(items));
    }
    case ExprKind::kDict: {
      Value d = Value::dict();
      for (size_t i = 0; i + 1 < e.a.size(); i += 2) {
        Value k = eval(*e.a[i], frame);
        Value v = eval(*e.a[i + 1], frame);
        line_ = e.line;
        d.dict_obj().set(k, std::move(v));
      }
      return d;
    }
  }
  return Value();
}

}  // namespace minfer::jinja
