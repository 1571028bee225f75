// Jinja tests (`x is defined`, `n is divisibleby 3`...) with jinja2's definitions.
#include <algorithm>

#include <fmt/format.h>

#include "template/builtins.h"
#include "template/error.h"
#include "template/interp.h"
#include "template/text.h"

namespace minfer::jinja {
namespace {

using K = Value::Kind;

const Value& arg(const CallArgs& a, const char* test) {
  if (!a.pos.empty()) return a.pos[0];
  if (!a.kw.empty()) return a.kw[0].second;
  type_error(fmt::format("test '{}' takes one argument", test));
}

bool t_defined(Interp&, const Value& v, CallArgs&) { return !v.is_undefined(); }
bool t_undefined(Interp&, const Value& v, CallArgs&) { return v.is_undefined(); }
bool t_none(Interp&, const Value& v, CallArgs&) { return v.is_none(); }
bool t_boolean(Interp&, const Value& v, CallArgs&) { return v.is_bool(); }
bool t_true(Interp&, const Value& v, CallArgs&) { return v.is_bool() && v.get_bool(); }
bool t_false(Interp&, const Value& v, CallArgs&) { return v.is_bool() && !v.get_bool(); }
bool t_integer(Interp&, const Value& v, CallArgs&) { return v.is_int(); }
bool t_float(Interp&, const Value& v, CallArgs&) { return v.is_float(); }
bool t_number(Interp&, const Value& v, CallArgs&) { return v.is_number(); }
bool t_string(Interp&, const Value& v, CallArgs&) { return v.is_string(); }
bool t_mapping(Interp&, const Value& v, CallArgs&) { return v.is_dict(); }
bool t_escaped(Interp&, const Value& v, CallArgs&) { return v.is_markup(); }
bool t_callable(Interp&, const Value& v, CallArgs&) {
  return v.is_callable() || v.is_loop() || v.is_undefined();  // Undefined and LoopContext define __call__
}
bool t_iterable(Interp&, const Value& v, CallArgs&) {
  switch (v.kind()) {
    case K::kUndefined: case K::kString: case K::kList: case K::kTuple: case K::kDict:
    case K::kIterator: case K::kLoop: return true;
    default: return false;
  }
}
bool t_sequence(Interp&, const Value& v, CallArgs&) {
  // len() and __getitem__: str, list, tuple, dict, range, and jinja2's Undefined; not views.
  switch (v.kind()) {
    case K::kUndefined: case K::kString: case K::kTuple: case K::kDict: return true;
    case K::kList: {
      const std::string& view = v.list_obj().view;
      return view.empty() || view.rfind("range(", 0) == 0;
    }
    default: return false;
  }
}

Value py_mod(Interp& in, const Value& v, const Value& n) { return binary_op(in, "%", v, n); }

bool t_odd(Interp& in, const Value& v, CallArgs&) { return values_equal(py_mod(in, v, Value(2)), Value(1)); }
bool t_even(Interp& in, const Value& v, CallArgs&) { return values_equal(py_mod(in, v, Value(2)), Value(0)); }
bool t_divisibleby(Interp& in, const Value& v, CallArgs& a) {
  return values_equal(py_mod(in, v, arg(a, "divisibleby")), Value(0));
}

bool all_cased(const std::string& s, bool upper) {
  bool cased = false;
  for (uint32_t cp : utf8_decode(s)) {
    if (upper ? py_islower(cp) : py_isupper(cp)) return false;
    cased |= upper ? py_isupper(cp) : py_islower(cp);
  }
  return cased;
}
bool t_lower(Interp&, const Value& v, CallArgs&) { return all_cased(v.to_str(), false); }
bool t_upper(Interp&, const Value& v, CallArgs&) { return all_cased(v.to_str(), true); }

bool t_eq(Interp&, const Value& v, CallArgs& a) { return values_equal(v, arg(a, "eq")); }
bool t_ne(Interp&, const Value& v, CallArgs& a) { return !values_equal(v, arg(a, "ne")); }
bool t_lt(Interp&, const Value& v, CallArgs& a) { return values_compare(v, arg(a, "lt")) < 0; }
bool t_le(Interp&, const Value& v, CallArgs& a) { return values_compare(v, arg(a, "le")) <= 0; }
bool t_gt(Interp&, const Value& v, CallArgs& a) { return values_compare(v, arg(a, "gt")) > 0; }
bool t_ge(Interp&, const Value& v, CallArgs& a) { return values_compare(v, arg(a, "ge")) >= 0; }
bool t_in(Interp&, const Value& v, CallArgs& a) { return contains(arg(a, "in"), v); }

bool t_sameas(Interp&, const Value& v, CallArgs& a) {
  const Value& o = arg(a, "sameas");
  if (v.kind() != o.kind()) return false;
  switch (v.kind()) {
    case K::kNone: return true;
    case K::kBool: return v.get_bool() == o.get_bool();
    case K::kInt: return v.get_int() == o.get_int() && v.get_int() >= -5 && v.get_int() <= 256;  // CPython's cache
    case K::kUndefined:
    case K::kFloat: return false;
    case K::kString: return v.str() == o.str();
    default: return v.identity() == o.identity();
  }
}

bool t_filter(Interp&, const Value& v, CallArgs&) { return v.is_string() && find_filter(v.str()); }
bool t_test(Interp&, const Value& v, CallArgs&) { return v.is_string() && find_test(v.str()); }

const TestDef kTests[] = {
    {"defined", t_defined}, {"undefined", t_undefined}, {"none", t_none}, {"boolean", t_boolean},
    {"true", t_true}, {"false", t_false}, {"integer", t_integer}, {"float", t_float},
    {"number", t_number}, {"string", t_string}, {"mapping", t_mapping}, {"escaped", t_escaped},
    {"callable", t_callable}, {"iterable", t_iterable}, {"sequence", t_sequence}, {"odd", t_odd},
    {"even", t_even}, {"divisibleby", t_divisibleby, 1}, {"lower", t_lower}, {"upper", t_upper},
    {"eq", t_eq, 1}, {"==", t_eq, 1}, {"equalto", t_eq, 1}, {"ne", t_ne, 1}, {"!=", t_ne, 1}, {"lt", t_lt, 1},
    {"<", t_lt, 1}, {"lessthan", t_lt, 1}, {"le", t_le, 1}, {"<=", t_le, 1}, {"gt", t_gt, 1}, {">", t_gt, 1},
    {"greaterthan", t_gt, 1}, {"ge", t_ge, 1}, {">=", t_ge, 1}, {"in", t_in, 1}, {"sameas", t_sameas, 1},
    {"filter", t_filter}, {"test", t_test},
};

}  // namespace

const TestDef* find_test(std::string_view name) {
  for (const TestDef& t : kTests)
    if (name == t.name) return &t;
  return nullptr;
}

}  // namespace minfer::jinja
