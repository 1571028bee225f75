#include "template/value.h"

#include <charconv>
#include <cmath>
#include <cstring>
#include <algorithm>

#include <fmt/format.h>

#include "template/error.h"
#include "template/text.h"

namespace minfer::jinja {

Value Value::undefined(std::string hint) {
  Value v;
  v.p_ = std::make_shared<const std::string>(std::move(hint));
  return v;
}

Value Value::none() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}

Value Value::markup(std::string s) {
  Value v(std::move(s));
  v.markup_ = true;
  return v;
}

int nesting_depth(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kList:
    case Value::Kind::kTuple:
    case Value::Kind::kIterator: return v.list_obj().depth;
    case Value::Kind::kDict:
    case Value::Kind::kNamespace: return v.dict_obj().depth();
    default: return 0;
  }
}

void check_nesting(int depth) {
  if (depth > kMaxNesting) fail(ErrorKind::kLimit, fmt::format("values nested deeper than {} levels", kMaxNesting));
}

Value Value::list(ValueList items) {
  Value v;
  v.kind_ = Kind::kList;
  auto obj = std::make_shared<ListObj>();
  for (const Value& x : items) obj->depth = std::max(obj->depth, nesting_depth(x) + 1);
  check_nesting(obj->depth);
  obj->items = std::move(items);
  v.p_ = std::move(obj);
  return v;
}

Value Value::tuple(ValueList items) {
  Value v = list(std::move(items));
  v.kind_ = Kind::kTuple;
  return v;
}

Value Value::iterator(ValueList items) {
  Value v = list(std::move(items));
  v.kind_ = Kind::kIterator;
  return v;
}

Value Value::view(ValueList items, std::string view) {
  Value v = list(std::move(items));
  v.list_obj().view = std::move(view);
  return v;
}

Value Value::dict() { return dict(std::make_shared<DictObj>()); }

Value Value::dict(std::shared_ptr<DictObj> d) {
  Value v;
  v.kind_ = Kind::kDict;
  v.p_ = std::move(d);
  return v;
}

Value Value::ns() {
  Value v = dict();
  v.kind_ = Kind::kNamespace;
  return v;
}

Value Value::callable(std::shared_ptr<Callable> c) {
  Value v;
  v.kind_ = Kind::kCallable;
  v.p_ = std::move(c);
  return v;
}

Value Value::builtin(std::string name, std::function<Value(Interp&, CallArgs&)> fn) {
  auto c = std::make_shared<Callable>();
  c->name = std::move(name);
  c->fn = std::move(fn);
  return callable(std::move(c));
}

Value Value::loop(std::shared_ptr<LoopObj> l) {
  Value v;
  v.kind_ = Kind::kLoop;
  v.p_ = std::move(l);
  return v;
}

double Value::as_double() const {
  switch (kind_) {
    case Kind::kBool: return std::get<bool>(p_) ? 1.0 : 0.0;
    case Kind::kInt: return static_cast<double>(std::get<int64_t>(p_));
    case Kind::kFloat: return std::get<double>(p_);
    default: return 0.0;
  }
}

const std::string& Value::undefined_hint() const {
  static const std::string kEmpty;
  if (auto* s = std::get_if<std::shared_ptr<const std::string>>(&p_)) return **s;
  return kEmpty;
}

const void* Value::identity() const {
  return std::visit(
      [](const auto& x) -> const void* {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::monostate> || std::is_same_v<T, bool> ||
                      std::is_same_v<T, int64_t> || std::is_same_v<T, double>)
          return nullptr;
        else
          return x.get();
      },
      p_);
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone: return false;
    case Kind::kBool: return get_bool();
    case Kind::kInt: return get_int() != 0;
    case Kind::kFloat: return std::get<double>(p_) != 0.0;
    case Kind::kString: return !str().empty();
    case Kind::kList:
    case Kind::kTuple: return !items().empty();
    case Kind::kDict: return dict_obj().size() != 0;
    default: return true;  // namespaces, generators, callables, loop
  }
}

std::string Value::type_name() const {
  switch (kind_) {
    case Kind::kUndefined: return "Undefined";
    case Kind::kNone: return "NoneType";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kString: return markup_ ? "Markup" : "str";
    case Kind::kList: {
      const std::string& v = list_obj().view;
      return v.empty() ? "list" : v.rfind("range(", 0) == 0 ? "range" : v;
    }
    case Kind::kTuple: return "tuple";
    case Kind::kDict: return "dict";
    case Kind::kNamespace: return "Namespace";
    case Kind::kIterator: return "generator";
    case Kind::kCallable: return callable_obj().type == Callable::Type::kMacro ? "Macro" : "builtin_function_or_method";
    case Kind::kLoop: return "LoopContext";
  }
  return "object";
}

std::string float_repr(double f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f < 0 ? "-inf" : "inf";
  // Shortest round-trip digits in scientific form, then laid out the way Python's repr does:
  // positional for decimal exponents in [-4, 16), scientific otherwise.
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), f, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  const size_t epos = sci.find('e');
  std::string mant = sci.substr(0, epos);
  const int exp = std::stoi(sci.substr(epos + 1));
  bool neg = false;
  if (!mant.empty() && mant[0] == '-') { neg = true; mant.erase(0, 1); }
  std::string digits;
  for (char c : mant)
    if (c != '.') digits += c;
  std::string out = neg ? "-" : "";
  if (exp < -4 || exp >= 16) {
    out += digits[0];
    if (digits.size() > 1) {
      out += '.';
      out.append(digits, 1, std::string::npos);
    }
    out += fmt::format("e{}{:02d}", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    return out;
  }
  if (exp < 0) {
    out += "0.";
    out.append(static_cast<size_t>(-exp - 1), '0');
    out += digits;
  } else if (static_cast<size_t>(exp) + 1 >= digits.size()) {
    out += digits + std::string(static_cast<size_t>(exp) + 1 - digits.size(), '0') + ".0";
  } else {
    out += digits.substr(0, static_cast<size_t>(exp) + 1) + "." + digits.substr(static_cast<size_t>(exp) + 1);
  }
  return out;
}

std::string string_repr(std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (uint32_t cp : utf8_decode(s)) {
    if (cp == static_cast<uint32_t>(quote) || cp == '\\') {
      out += '\\';
      out += static_cast<char>(cp);
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (!py_isprintable(cp)) {
      if (cp < 0x100) out += fmt::format("\\x{:02x}", cp);
      else if (cp < 0x10000) out += fmt::format("\\u{:04x}", cp);
      else out += fmt::format("\\U{:08x}", cp);
    } else {
      utf8_append(out, cp);
    }
  }
  out += quote;
  return out;
}

namespace {

// Bounds recursion through cyclic containers (a namespace holding itself...).
struct RecursionGuard {
  RecursionGuard() {
    if (++depth() > kMaxNesting + 8) {
      depth() = 0;
      fail(ErrorKind::kLimit, "value is recursive (contains itself) or nested too deeply");
    }
  }
  ~RecursionGuard() { if (depth() > 0) --depth(); }
  static int& depth() {
    thread_local int d = 0;
    return d;
  }
};

std::string seq_repr(const ValueList& items, const char* open, const char* close, bool tuple) {
  std::string out = open;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += ", ";
    out += items[i].repr();
  }
  if (tuple && items.size() == 1) out += ",";
  out += close;
  return out;
}

std::string dict_repr(const DictObj& d) {
  std::string out = "{";
  bool first = true;
  for (const auto& [k, v] : d.entries()) {
    if (!first) out += ", ";
    first = false;
    out += k.repr() + ": " + v.repr();
  }
  return out + "}";
}

}  // namespace

std::string Value::to_str() const {
  switch (kind_) {
    case Kind::kUndefined: return "";
    case Kind::kString: return str();
    default: return repr();
  }
}

std::string Value::repr() const {
  RecursionGuard guard;
  switch (kind_) {
    case Kind::kUndefined: return "Undefined";
    case Kind::kNone: return "None";
    case Kind::kBool: return get_bool() ? "True" : "False";
    case Kind::kInt: return std::to_string(get_int());
    case Kind::kFloat: return float_repr(std::get<double>(p_));
    case Kind::kString: return markup_ ? "Markup(" + string_repr(str()) + ")" : string_repr(str());
    case Kind::kList: {
      const std::string& v = list_obj().view;
      if (v.rfind("range(", 0) == 0) return v;
      std::string body = seq_repr(items(), "[", "]", false);
      return v.empty() ? body : v + "(" + body + ")";
    }
    case Kind::kTuple: return seq_repr(items(), "(", ")", true);
    case Kind::kDict: return dict_repr(dict_obj());
    case Kind::kNamespace: return "<Namespace " + dict_repr(dict_obj()) + ">";
    case Kind::kIterator: return "<generator object>";
    case Kind::kCallable: {
      const Callable& c = callable_obj();
      if (c.type == Callable::Type::kMacro) return "<Macro " + string_repr(c.name) + ">";
      if (c.type == Callable::Type::kMethod) return "<built-in method " + c.name + ">";
      return "<built-in function " + c.name + ">";
    }
    case Kind::kLoop: {
      const LoopObj& l = loop_obj();
      return fmt::format("<LoopContext {}/{}>", l.index0 + 1, l.items->items.size());
    }
  }
  return "";
}

namespace {

// tag + text (spelled out: GCC 12 warns spuriously on "x" + std::string at -O3).
std::string tagged(char tag, const std::string& text) {
  std::string out;
  out.reserve(text.size() + 1);
  out.push_back(tag);
  out += text;
  return out;
}

}  // namespace

std::optional<std::string> hash_key(const Value& v) {
  using K = Value::Kind;
  switch (v.kind()) {
    case K::kNone: return std::string("N");
    case K::kUndefined: return std::string("U");
    case K::kBool:
    case K::kInt: return tagged('I', std::to_string(v.get_int()));
    case K::kFloat: {
      const double f = v.as_double();
      if (std::isfinite(f) && f == std::floor(f) && std::fabs(f) < 9.2e18)
        return tagged('I', std::to_string(static_cast<int64_t>(f)));
      return tagged('F', float_repr(f));
    }
    case K::kString: return tagged('S', v.str());
    case K::kTuple: {
      RecursionGuard guard;
      std::string out(1, 'T');
      out += std::to_string(v.items().size());
      out += '(';
      for (const Value& x : v.items()) {
        auto k = hash_key(x);
        if (!k) return std::nullopt;
        out += std::to_string(k->size()) + ":" + *k;
      }
      return out + ")";
    }
    case K::kList:
    case K::kDict:
    case K::kIterator: return std::nullopt;
    default: return fmt::format("P{}", v.identity());
  }
}

namespace {

std::string unhashable_message(const Value& key) { return "unhashable type: '" + key.type_name() + "'"; }

}  // namespace

const Value* DictObj::find(const Value& key) const {
  auto k = hash_key(key);
  if (!k) type_error(unhashable_message(key));
  auto it = index_.find(*k);
  return it == index_.end() ? nullptr : &entries_[it->second].second;
}

const Value* DictObj::find(std::string_view key) const {
  std::string k = "S";
  k += key;
  auto it = index_.find(k);
  return it == index_.end() ? nullptr : &entries_[it->second].second;
}

void DictObj::set(const Value& key, Value value) {
  auto k = hash_key(key);
  if (!k) type_error(unhashable_message(key));
  depth_ = std::max(depth_, std::max(nesting_depth(key), nesting_depth(value)) + 1);
  check_nesting(depth_);
  auto [it, inserted] = index_.emplace(std::move(*k), entries_.size());
  if (inserted) entries_.emplace_back(key, std::move(value));
  else entries_[it->second].second = std::move(value);
}

bool DictObj::erase(const Value& key) {
  auto k = hash_key(key);
  if (!k) type_error(unhashable_message(key));
  auto it = index_.find(*k);
  if (it == index_.end()) return false;
  const size_t pos = it->second;
  entries_.erase(entries_.begin() + static_cast<std::ptrdiff_t>(pos));
  index_.erase(it);
  for (auto& [name, idx] : index_)
    if (idx > pos) --idx;
  return true;
}

Value deep_copy(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kList:
    case Value::Kind::kTuple: {
      ValueList items;
      items.reserve(v.items().size());
      for (const Value& x : v.items()) items.push_back(deep_copy(x));
      Value out = v.is_tuple() ? Value::tuple(std::move(items)) : Value::list(std::move(items));
      out.list_obj().view = v.list_obj().view;
      return out;
    }
    case Value::Kind::kDict: {
      Value out = Value::dict();
      for (const auto& [k, x] : v.dict_obj().entries()) out.dict_obj().set(k, deep_copy(x));
      return out;
    }
    default: return v;
  }
}

bool values_equal(const Value& a, const Value& b) {
  using K = Value::Kind;
  RecursionGuard guard;
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() == b.as_double();
    return a.get_int() == b.get_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case K::kUndefined:
    case K::kNone: return true;
    case K::kString: return a.str() == b.str();
    case K::kList:
    case K::kTuple: {
      const ValueList& x = a.items();
      const ValueList& y = b.items();
      if (&x == &y) return true;
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i)
        if (!values_equal(x[i], y[i])) return false;
      return true;
    }
    case K::kDict: {
      const DictObj& x = a.dict_obj();
      const DictObj& y = b.dict_obj();
      if (&x == &y) return true;
      if (x.size() != y.size()) return false;
      for (const auto& [k, v] : x.entries()) {
        const Value* other = y.find(k);
        if (!other || !values_equal(v, *other)) return false;
      }
      return true;
    }
    default: return a.identity() == b.identity();
  }
}

int values_compare(const Value& a, const Value& b) {
  RecursionGuard guard;
  if (a.is_undefined() || b.is_undefined())
    fail(ErrorKind::kUndefined, (a.is_undefined() ? a : b).undefined_hint().empty()
                                    ? "value is undefined"
                                    : (a.is_undefined() ? a : b).undefined_hint());
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) {
      const double x = a.as_double(), y = b.as_double();
      return x < y ? -1 : x > y ? 1 : 0;
    }
    const int64_t x = a.get_int(), y = b.get_int();
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.is_string() && b.is_string()) {
    const int c = a.str().compare(b.str());  // UTF-8 byte order is code point order
    return c < 0 ? -1 : c > 0 ? 1 : 0;
  }
  if ((a.is_list() && b.is_list()) || (a.is_tuple() && b.is_tuple())) {
    const ValueList& x = a.items();
    const ValueList& y = b.items();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (values_equal(x[i], y[i])) continue;
      return values_compare(x[i], y[i]);
    }
    return x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
  }
  type_error("'<' not supported between instances of '" + a.type_name() + "' and '" + b.type_name() + "'");
}

}  // namespace minfer::jinja
