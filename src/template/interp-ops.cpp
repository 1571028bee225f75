// Python arithmetic, membership and slicing on template values.
#include <cmath>

#include <fmt/format.h>

#include "template/builtins.h"
#include "template/error.h"
#include "template/filters-impl.h"
#include "template/interp.h"
#include "template/text.h"

namespace minfer::jinja {

[[noreturn]] void undefined_error(const Value& u) {
  const std::string& hint = u.undefined_hint();
  if (hint.ends_with("is unsafe.")) fail(ErrorKind::kSecurity, hint);
  fail(ErrorKind::kUndefined, hint.empty() ? "value is undefined" : hint);
}

namespace {

[[noreturn]] void unsupported_operands(const std::string& op, const Value& a, const Value& b) {
  type_error(fmt::format("unsupported operand type(s) for {}: '{}' and '{}'", op, a.type_name(), b.type_name()));
}

void overflow_error(const char* op) {
  fail(ErrorKind::kUnsupported, fmt::format("integer overflow in '{}' (integers are 64-bit here)", op));
}

// a OP b on int64 with Python's result, or an error when it would need a bignum.
int64_t checked_add(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) overflow_error("+");
  return r;
}
int64_t checked_sub(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_sub_overflow(a, b, &r)) overflow_error("-");
  return r;
}
int64_t checked_mul(int64_t a, int64_t b, const char* op = "*") {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) overflow_error(op);
  return r;
}

Value repeat(Interp& in, const Value& seq, int64_t n) {
  if (n < 0) n = 0;
  if (seq.is_string()) {
    in.check_size(seq.str().size() * static_cast<size_t>(n));
    std::string out;
    out.reserve(seq.str().size() * static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) out += seq.str();
    return seq.is_markup() ? Value::markup(std::move(out)) : Value(std::move(out));
  }
  in.check_size(seq.items().size() * static_cast<size_t>(n));
  ValueList out;
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), seq.items().begin(), seq.items().end());
  return seq.is_tuple() ? Value::tuple(std::move(out)) : Value::list(std::move(out));
}

// Python's float floor division and modulo (result takes the divisor's sign).
void float_divmod(double vx, double wx, double* div_out, double* mod_out) {
  if (wx == 0.0) fail(ErrorKind::kType, "float division by zero");
  double mod = std::fmod(vx, wx);
  double div = (vx - mod) / wx;
  if (mod != 0.0) {
    if ((wx < 0) != (mod < 0)) {
      mod += wx;
      div -= 1.0;
    }
  } else {
    mod = std::copysign(0.0, wx);
  }
  double floordiv;
  if (div != 0.0) {
    floordiv = std::floor(div);
    if (div - floordiv > 0.5) floordiv += 1.0;
  } else {
    floordiv = std::copysign(0.0, vx / wx);
  }
  *div_out = floordiv;
  *mod_out = mod;
}

Value int_pow(int64_t base, int64_t exp) {
  if (exp < 0) {
    if (base == 0) fail(ErrorKind::kType, "0.0 cannot be raised to a negative power");
    return Value(std::pow(static_cast<double>(base), static_cast<double>(exp)));
  }
  int64_t result = 1;
  int64_t b = base;
  while (exp > 0) {
    if (exp & 1) result = checked_mul(result, b, "**");
    exp >>= 1;
    if (exp) b = checked_mul(b, b, "**");
  }
  return Value(result);
}

}  // namespace

Value binary_op(Interp& in, const std::string& op, const Value& a, const Value& b) {
  // str % x formats without asking x first (Python calls str.__mod__ before x.__rmod__).
  if (op == "%" && a.is_string()) {
    if (!a.is_markup()) return Value(percent_format(in, a.str(), b));
    // Markup % args escapes the string arguments (markupsafe's _MarkupEscapeHelper).
    auto esc = [](const Value& x) { return x.is_string() && !x.is_markup() ? Value::markup(html_escape(x.str())) : x; };
    Value args = b;
    if (b.is_tuple()) {
      ValueList items;
      for (const Value& x : b.items()) items.push_back(esc(x));
      args = Value::tuple(std::move(items));
    } else if (b.is_dict()) {
      args = Value::dict();
      for (const auto& [k, x] : b.dict_obj().entries()) args.dict_obj().set(k, esc(x));
    } else {
      args = esc(b);
    }
    return Value::markup(percent_format(in, a.str(), args));
  }
  if (a.is_undefined()) undefined_error(a);
  if (b.is_undefined()) undefined_error(b);
  const bool nums = a.is_number() && b.is_number();
  const bool ints = nums && !a.is_float() && !b.is_float();
  const char c0 = op[0];
  if (op == "+") {
    if (ints) return Value(checked_add(a.get_int(), b.get_int()));
    if (nums) return Value(a.as_double() + b.as_double());
    if (a.is_string() && b.is_string()) {
      in.check_size(a.str().size() + b.str().size());
      if (a.is_markup() && !b.is_markup()) return Value::markup(a.str() + html_escape(b.str()));
      if (b.is_markup() && !a.is_markup()) return Value::markup(html_escape(a.str()) + b.str());
      if (a.is_markup()) return Value::markup(a.str() + b.str());
      return Value(a.str() + b.str());
    }
    if ((a.is_list() && b.is_list()) || (a.is_tuple() && b.is_tuple())) {
      in.check_size(a.items().size() + b.items().size());
      ValueList out = a.items();
      out.insert(out.end(), b.items().begin(), b.items().end());
      return a.is_tuple() ? Value::tuple(std::move(out)) : Value::list(std::move(out));
    }
    if (a.is_list() && !b.is_list() && b.is_sequence())
      type_error(fmt::format("can only concatenate list (not \"{}\") to list", b.type_name()));
    if (a.is_string() && !b.is_string())
      type_error(fmt::format("can only concatenate str (not \"{}\") to str", b.type_name()));
    unsupported_operands("+", a, b);
  }
  if (op == "-") {
    if (ints) return Value(checked_sub(a.get_int(), b.get_int()));
    if (nums) return Value(a.as_double() - b.as_double());
    unsupported_operands("-", a, b);
  }
  if (op == "*") {
    if (ints) return Value(checked_mul(a.get_int(), b.get_int()));
    if (nums) return Value(a.as_double() * b.as_double());
    const bool a_seq = a.is_string() || a.is_sequence(), b_seq = b.is_string() || b.is_sequence();
    if (a_seq && (b.is_int() || b.is_bool())) return repeat(in, a, b.get_int());
    if (b_seq && (a.is_int() || a.is_bool())) return repeat(in, b, a.get_int());
    if (a_seq || b_seq)
      type_error(fmt::format("can't multiply sequence by non-int of type '{}'", (a_seq ? b : a).type_name()));
    unsupported_operands("*", a, b);
  }
  if (op == "/") {
    if (!nums) unsupported_operands("/", a, b);
    if (b.as_double() == 0.0) fail(ErrorKind::kType, ints ? "division by zero" : "float division by zero");
    return Value(a.as_double() / b.as_double());
  }
  if (op == "//" || (c0 == '%' && nums)) {
    if (!nums) unsupported_operands("//", a, b);
    if (ints) {
      const int64_t x = a.get_int(), y = b.get_int();
      if (y == 0) fail(ErrorKind::kType, "integer division or modulo by zero");
      if (x == INT64_MIN && y == -1) {
        if (op == "//") overflow_error("//");
        return Value(int64_t{0});
      }
      int64_t q = x / y, r = x % y;
      if (r != 0 && ((r < 0) != (y < 0))) {
        --q;
        r += y;
      }
      return Value(op == "//" ? q : r);
    }
    double div, mod;
    float_divmod(a.as_double(), b.as_double(), &div, &mod);
    return Value(op == "//" ? div : mod);
  }
  if (op == "%") {
    if (a.is_string()) return Value(percent_format(in, a.str(), b));
    unsupported_operands("%", a, b);
  }
  if (op == "**") {
    if (ints) return int_pow(a.get_int(), b.get_int());
    if (nums) {
      const double x = a.as_double(), y = b.as_double();
      if (x == 0.0 && y < 0) fail(ErrorKind::kType, "0.0 cannot be raised to a negative power");
      if (x < 0 && y != std::floor(y))
        fail(ErrorKind::kUnsupported, "complex results of ** are not supported");
      return Value(std::pow(x, y));
    }
    unsupported_operands("** or pow()", a, b);
  }
  fail(ErrorKind::kSyntax, "unknown operator " + op);
}

Value unary_minus(const Value& v, bool negate) {
  if (v.is_undefined()) undefined_error(v);
  if (v.is_float()) return Value(negate ? -v.as_double() : v.as_double());
  if (v.is_int() || v.is_bool()) {
    if (!negate) return Value(v.get_int());
    if (v.get_int() == INT64_MIN) overflow_error("-");
    return Value(-v.get_int());
  }
  type_error(fmt::format("bad operand type for unary {}: '{}'", negate ? '-' : '+', v.type_name()));
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::kUndefined: return false;
    case Value::Kind::kString:
      if (!item.is_string())
        type_error(fmt::format("'in <string>' requires string as left operand, not {}", item.type_name()));
      return container.str().find(item.str()) != std::string::npos;
    case Value::Kind::kList:
    case Value::Kind::kTuple:
    case Value::Kind::kIterator:
      for (const Value& x : container.items())
        if (values_equal(x, item)) return true;
      return false;
    case Value::Kind::kDict: return container.dict_obj().find(item) != nullptr;
    default:
      type_error(fmt::format("argument of type '{}' is not iterable", container.type_name()));
  }
}

namespace {

// Python's PySlice_GetIndicesEx + adjust: fills start/stop/step and returns the length.
int64_t slice_indices(int64_t len, const Value& vstart, const Value& vstop, const Value& vstep,
                      int64_t* start, int64_t* stop, int64_t* step) {
  auto as_index = [](const Value& v) -> std::optional<int64_t> {
    if (v.is_none()) return std::nullopt;
    if (v.is_int() || v.is_bool()) return v.get_int();
    type_error("slice indices must be integers or None or have an __index__ method");
  };
  auto st = as_index(vstep);
  *step = st.value_or(1);
  if (*step == 0) fail(ErrorKind::kType, "slice step cannot be zero");
  auto clamp = [&](std::optional<int64_t> v, bool is_start) -> int64_t {
    if (!v) return *step > 0 ? (is_start ? 0 : len) : (is_start ? len - 1 : -1);
    int64_t x = *v;
    if (x < 0) {
      x += len;
      if (x < 0) x = *step < 0 ? -1 : 0;
    } else if (x >= len) {
      x = *step < 0 ? len - 1 : len;
    }
    return x;
  };
  *start = clamp(as_index(vstart), true);
  *stop = clamp(as_index(vstop), false);
  if (*step > 0) return *stop > *start ? (*stop - *start - 1) / *step + 1 : 0;
  return *start > *stop ? (*start - *stop - 1) / (-*step) + 1 : 0;
}

}  // namespace

Value slice_value(const Value& v, const Value& vstart, const Value& vstop, const Value& vstep) {
  int64_t start, stop, step;
  if (v.is_string()) {
    std::vector<uint32_t> cps = utf8_decode(v.str());
    const int64_t n = slice_indices(static_cast<int64_t>(cps.size()), vstart, vstop, vstep, &start, &stop, &step);
    std::string out;
    for (int64_t i = 0, k = start; i < n; ++i, k += step) utf8_append(out, cps[static_cast<size_t>(k)]);
    return v.is_markup() ? Value::markup(std::move(out)) : Value(std::move(out));
  }
  if (v.is_sequence()) {
    const ValueList& items = v.items();
    const int64_t n = slice_indices(static_cast<int64_t>(items.size()), vstart, vstop, vstep, &start, &stop, &step);
    ValueList out;
    for (int64_t i = 0, k = start; i < n; ++i, k += step) out.push_back(items[static_cast<size_t>(k)]);
    return v.is_tuple() ? Value::tuple(std::move(out)) : Value::list(std::move(out));
  }
  type_error(fmt::format("'{}' object is not subscriptable", v.type_name()));
}

}  // namespace minfer::jinja
