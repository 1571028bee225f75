// Python methods of str, list, tuple and dict that templates call ('a b'.split(),
// messages.append(m), d.items()...), bound to their receiver. Indices are code points.
#include <algorithm>

#include <fmt/format.h>

#include "template/builtins.h"
#include "template/error.h"
#include "template/filters-impl.h"
#include "template/interp.h"
#include "template/text.h"

namespace minfer::jinja {
namespace {

const std::string& str_arg(const Value& v, const char* method) {
  if (!v.is_string())
    type_error(fmt::format("{}() argument must be str, not {}", method, v.type_name()));
  return v.str();
}

// Python's s[start:end] for the optional start/end arguments of find/count/startswith...
struct Window {
  std::string text;
  int64_t offset = 0;  // code points before the window
};
Window window(const std::string& s, const Bound& b, size_t i_start) {
  const bool has_start = b.has(i_start) && !b.v[i_start].is_none();
  const bool has_end = b.has(i_start + 1) && !b.v[i_start + 1].is_none();
  if (!has_start && !has_end) return {s, 0};
  std::vector<uint32_t> cps = utf8_decode(s);
  const auto n = static_cast<int64_t>(cps.size());
  auto clamp = [n](int64_t x) { return x < 0 ? std::max<int64_t>(0, x + n) : std::min(x, n); };
  const int64_t start = has_start ? clamp(to_index(b.v[i_start], "start")) : 0;
  const int64_t end = has_end ? clamp(to_index(b.v[i_start + 1], "end")) : n;
  if (end < start) return {"", -1};
  return {utf8_encode(cps, static_cast<size_t>(start), static_cast<size_t>(end)), start};
}

int64_t cp_index(const std::string& s, size_t byte_pos) {
  return static_cast<int64_t>(utf8_length(std::string_view(s).substr(0, byte_pos)));
}

Value s_find_impl(const Value& self, CallArgs& a, const char* name, bool reverse, bool raise) {
  Bound b = bind_args(name, a, {"*sub", "start", "end"});
  const std::string& sub = str_arg(b.v[0], name);
  Window w = window(self.str(), b, 1);
  if (w.offset < 0) {
    if (raise) fail(ErrorKind::kType, "substring not found");
    return Value(-1);
  }
  const size_t pos = reverse ? w.text.rfind(sub) : w.text.find(sub);
  if (pos == std::string::npos) {
    if (raise) fail(ErrorKind::kType, "substring not found");
    return Value(-1);
  }
  return Value(w.offset + cp_index(w.text, pos));
}
Value s_find(Interp&, const Value& s, CallArgs& a) { return s_find_impl(s, a, "find", false, false); }
Value s_rfind(Interp&, const Value& s, CallArgs& a) { return s_find_impl(s, a, "rfind", true, false); }
Value s_index(Interp&, const Value& s, CallArgs& a) { return s_find_impl(s, a, "index", false, true); }
Value s_rindex(Interp&, const Value& s, CallArgs& a) { return s_find_impl(s, a, "rindex", true, true); }

Value s_count(Interp&, const Value& self, CallArgs& a) {
  Bound b = bind_args("count", a, {"*sub", "start", "end"});
  const std::string& sub = str_arg(b.v[0], "count");
  Window w = window(self.str(), b, 1);
  if (w.offset < 0) return Value(0);
  if (sub.empty()) return Value(static_cast<int64_t>(utf8_length(w.text)) + 1);
  int64_t n = 0;
  for (size_t pos = w.text.find(sub); pos != std::string::npos; pos = w.text.find(sub, pos + sub.size())) ++n;
  return Value(n);
}

Value s_starts_ends(const Value& self, CallArgs& a, bool ends) {
  const char* name = ends ? "endswith" : "startswith";
  Bound b = bind_args(name, a, {"*prefix", "start", "end"});
  Window w = window(self.str(), b, 1);
  if (w.offset < 0) return Value(false);
  ValueList cands = b.v[0].is_tuple() ? b.v[0].items() : ValueList{b.v[0]};
  for (const Value& c : cands) {
    if (!c.is_string())
      type_error(fmt::format("{} first arg must be str or a tuple of str, not {}", name, c.type_name()));
    if (ends ? w.text.ends_with(c.str()) : w.text.starts_with(c.str())) return Value(true);
  }
  return Value(false);
}
Value s_startswith(Interp&, const Value& s, CallArgs& a) { return s_starts_ends(s, a, false); }
Value s_endswith(Interp&, const Value& s, CallArgs& a) { return s_starts_ends(s, a, true); }

Value s_strip_impl(const Value& self, CallArgs& a, const char* name, bool left, bool right) {
  Bound b = bind_args(name, a, {"chars"});
  if (b.has(0) && !b.v[0].is_none()) {
    const std::string& chars = str_arg(b.v[0], name);
    return Value(py_strip(self.str(), left, right, &chars));
  }
  return Value(py_strip(self.str(), left, right, nullptr));
}
Value s_strip(Interp&, const Value& s, CallArgs& a) { return s_strip_impl(s, a, "strip", true, true); }
Value s_lstrip(Interp&, const Value& s, CallArgs& a) { return s_strip_impl(s, a, "lstrip", true, false); }
Value s_rstrip(Interp&, const Value& s, CallArgs& a) { return s_strip_impl(s, a, "rstrip", false, true); }

Value string_list(const std::vector<std::string>& parts) {
  ValueList out;
  out.reserve(parts.size());
  for (const std::string& p : parts) out.emplace_back(p);
  return Value::list(std::move(out));
}

Value s_split_impl(const Value& self, CallArgs& a, bool from_right) {
  const char* name = from_right ? "rsplit" : "split";
  Bound b = bind_args(name, a, {"sep", "maxsplit"});
  const int64_t maxsplit = b.has(1) ? to_index(b.v[1], "maxsplit") : -1;
  if (!b.has(0) || b.v[0].is_none()) return string_list(py_split_ws(self.str(), maxsplit, from_right));
  const std::string& sep = str_arg(b.v[0], name);
  return string_list(from_right ? py_rsplit(self.str(), sep, maxsplit) : py_split(self.str(), sep, maxsplit));
}
Value s_split(Interp&, const Value& s, CallArgs& a) { return s_split_impl(s, a, false); }
Value s_rsplit(Interp&, const Value& s, CallArgs& a) { return s_split_impl(s, a, true); }

Value s_splitlines(Interp&, const Value& self, CallArgs& a) {
  Bound b = bind_args("splitlines", a, {"keepends"});
  return string_list(py_splitlines(self.str(), b.has(0) && b.v[0].truthy()));
}

Value s_replace(Interp& in, const Value& self, CallArgs& a) {
  Bound b = bind_args("replace", a, {"*old", "*new", "count"});
  const int64_t count = b.has(2) ? to_index(b.v[2], "count") : -1;
  std::string out = py_replace(self.str(), str_arg(b.v[0], "replace"), str_arg(b.v[1], "replace"), count);
  in.check_size(out.size());
  return Value(std::move(out));
}

Value s_join(Interp& in, const Value& self, CallArgs& a) {
  Bound b = bind_args("join", a, {"*iterable"});
  std::string out;
  size_t i = 0;
  for (const Value& x : in.iterate(b.v[0])) {
    if (!x.is_string())
      type_error(fmt::format("sequence item {}: expected str instance, {} found", i, x.type_name()));
    if (i++) out += self.str();
    out += x.str();
    in.check_size(out.size());
  }
  return Value(std::move(out));
}

Value s_upper(Interp&, const Value& s, CallArgs& a) { bind_args("upper", a, {}); return Value(str_upper(s.str())); }
Value s_lower(Interp&, const Value& s, CallArgs& a) { bind_args("lower", a, {}); return Value(str_lower(s.str())); }
Value s_casefold(Interp&, const Value& s, CallArgs& a) { bind_args("casefold", a, {}); return Value(str_lower(s.str())); }
Value s_title(Interp&, const Value& s, CallArgs& a) { bind_args("title", a, {}); return Value(py_title(s.str())); }

Value s_capitalize(Interp&, const Value& self, CallArgs& a) {
  bind_args("capitalize", a, {});
  std::vector<uint32_t> cps = utf8_decode(self.str());
  std::string out;
  for (size_t i = 0; i < cps.size(); ++i) utf8_append(out, i == 0 ? cp_upper(cps[i]) : cp_lower(cps[i]));
  return Value(std::move(out));
}

Value s_swapcase(Interp&, const Value& self, CallArgs& a) {
  bind_args("swapcase", a, {});
  std::string out;
  for (uint32_t cp : utf8_decode(self.str())) utf8_append(out, py_isupper(cp) ? cp_lower(cp) : cp_upper(cp));
  return Value(std::move(out));
}

Value s_pad(Interp& in, const Value& self, CallArgs& a, const char* name, int where) {
  Bound b = bind_args(name, a, {"*width", "fillchar"});
  const int64_t width = to_index(b.v[0], "width");
  std::string fill = " ";
  if (b.has(1)) {
    fill = str_arg(b.v[1], name);
    if (utf8_length(fill) != 1) type_error("The fill character must be exactly one character long");
  }
  const auto len = static_cast<int64_t>(utf8_length(self.str()));
  if (width <= len) return self;
  in.check_size(static_cast<size_t>(width) * fill.size());
  const int64_t marg = width - len;
  const int64_t left = where < 0 ? 0 : where > 0 ? marg : marg / 2 + (marg & width & 1);
  std::string out;
  for (int64_t i = 0; i < left; ++i) out += fill;
  out += self.str();
  for (int64_t i = 0; i < marg - left; ++i) out += fill;
  return Value(std::move(out));
}
Value s_ljust(Interp& in, const Value& s, CallArgs& a) { return s_pad(in, s, a, "ljust", -1); }
Value s_rjust(Interp& in, const Value& s, CallArgs& a) { return s_pad(in, s, a, "rjust", 1); }
Value s_center(Interp& in, const Value& s, CallArgs& a) { return s_pad(in, s, a, "center", 0); }

Value s_zfill(Interp& in, const Value& self, CallArgs& a) {
  Bound b = bind_args("zfill", a, {"*width"});
  const int64_t width = to_index(b.v[0], "width");
  const std::string& s = self.str();
  const auto len = static_cast<int64_t>(utf8_length(s));
  if (width <= len) return self;
  in.check_size(static_cast<size_t>(width));
  const bool sign = !s.empty() && (s[0] == '+' || s[0] == '-');
  std::string out = sign ? s.substr(0, 1) : "";
  out += std::string(static_cast<size_t>(width - len), '0');
  out += sign ? s.substr(1) : s;
  return Value(std::move(out));
}

template <bool (*Pred)(uint32_t)>
Value s_is(Interp&, const Value& self, CallArgs& a) {
  bind_args("is...", a, {});
  std::vector<uint32_t> cps = utf8_decode(self.str());
  return Value(!cps.empty() && std::all_of(cps.begin(), cps.end(), Pred));
}
bool cp_alnum(uint32_t cp) { return py_isalpha(cp) || py_isdigit(cp) || (cp >= 0x80 && py_isalnum_extra(cp)); }

Value s_islower(Interp&, const Value& self, CallArgs& a) {
  bind_args("islower", a, {});
  bool cased = false;
  for (uint32_t cp : utf8_decode(self.str())) {
    if (py_isupper(cp)) return Value(false);
    cased |= py_islower(cp);
  }
  return Value(cased);
}
Value s_isupper(Interp&, const Value& self, CallArgs& a) {
  bind_args("isupper", a, {});
  bool cased = false;
  for (uint32_t cp : utf8_decode(self.str())) {
    if (py_islower(cp)) return Value(false);
    cased |= py_isupper(cp);
  }
  return Value(cased);
}

Value s_partition_impl(const Value& self, CallArgs& a, bool from_right) {
  Bound b = bind_args(from_right ? "rpartition" : "partition", a, {"*sep"});
  const std::string& sep = str_arg(b.v[0], "partition");
  if (sep.empty()) fail(ErrorKind::kType, "empty separator");
  const std::string& s = self.str();
  const size_t pos = from_right ? s.rfind(sep) : s.find(sep);
  if (pos == std::string::npos)
    return from_right ? Value::tuple({Value(""), Value(""), Value(s)}) : Value::tuple({Value(s), Value(""), Value("")});
  return Value::tuple({Value(s.substr(0, pos)), Value(sep), Value(s.substr(pos + sep.size()))});
}
Value s_partition(Interp&, const Value& s, CallArgs& a) { return s_partition_impl(s, a, false); }
Value s_rpartition(Interp&, const Value& s, CallArgs& a) { return s_partition_impl(s, a, true); }

Value s_removeprefix(Interp&, const Value& self, CallArgs& a) {
  Bound b = bind_args("removeprefix", a, {"*prefix"});
  const std::string& p = str_arg(b.v[0], "removeprefix");
  return self.str().starts_with(p) ? Value(self.str().substr(p.size())) : self;
}
Value s_removesuffix(Interp&, const Value& self, CallArgs& a) {
  Bound b = bind_args("removesuffix", a, {"*suffix"});
  const std::string& p = str_arg(b.v[0], "removesuffix");
  return !p.empty() && self.str().ends_with(p) ? Value(self.str().substr(0, self.str().size() - p.size())) : self;
}

Value s_format(Interp& in, const Value& self, CallArgs& a) { return Value(str_format(in, self.str(), a)); }

Value s_expandtabs(Interp& in, const Value& self, CallArgs& a) {
  Bound b = bind_args("expandtabs", a, {"tabsize"});
  const int64_t tab = b.has(0) ? to_index(b.v[0], "tabsize") : 8;
  std::string out;
  int64_t col = 0;
  for (uint32_t cp : utf8_decode(self.str())) {
    if (cp == '\t') {
      const int64_t n = tab > 0 ? tab - col % tab : 0;
      in.check_size(out.size() + static_cast<size_t>(n));
      out.append(static_cast<size_t>(n), ' ');
      col += n;
    } else {
      utf8_append(out, cp);
      col = cp == '\n' || cp == '\r' ? 0 : col + 1;
    }
  }
  return Value(std::move(out));
}

Value s_isascii(Interp&, const Value& self, CallArgs& a) {
  bind_args("isascii", a, {});
  return Value(is_ascii(self.str()));
}

Value s_istitle(Interp&, const Value& self, CallArgs& a) {
  bind_args("istitle", a, {});
  bool cased = false, prev_cased = false;
  for (uint32_t cp : utf8_decode(self.str())) {
    if (py_isupper(cp)) {
      if (prev_cased) return Value(false);
      prev_cased = cased = true;
    } else if (py_islower(cp)) {
      if (!prev_cased) return Value(false);
      prev_cased = cased = true;
    } else {
      prev_cased = false;
    }
  }
  return Value(cased);
}

// Python str methods this engine does not implement: they exist (`is defined` is true, as in
// jinja2) but calling one is an "unsupported" error naming it.
Value s_unsupported(Interp&, const Value&, CallArgs&) {
  fail(ErrorKind::kUnsupported, "this str method is not supported by minfer's template engine");
}

Value as_markup(const Value& v) {
  if (v.is_string()) return Value::markup(v.str());
  if (v.is_list() || v.is_tuple()) {
    ValueList items;
    for (const Value& x : v.items()) items.push_back(as_markup(x));
    return v.is_tuple() ? Value::tuple(std::move(items)) : Value::list(std::move(items));
  }
  return v;
}

Value escaped(const Value& v) { return v.is_string() && !v.is_markup() ? Value::markup(html_escape(v.str())) : v; }

// markupsafe.Markup's methods (3.x): string results stay Markup; join escapes the items,
// format its arguments, replace its replacement and the padding methods their fill.
Value markup_call(Method fn, Interp& in, const Value& self, const std::string& name, CallArgs& a) {
  static const char* const kKeepText[] = {"capitalize", "title", "lower", "upper", "swapcase", "zfill", "split",
                                          "rsplit", "splitlines", "partition", "rpartition", "casefold", "strip",
                                          "lstrip", "rstrip", "removeprefix", "removesuffix"};
  CallArgs b = a;
  if (name == "join") {
    if (!b.pos.empty()) {
      ValueList items;
      for (const Value& x : in.iterate(b.pos[0])) items.push_back(escaped(x));
      b.pos[0] = Value::list(std::move(items));
    }
    return as_markup(fn(in, self, b));
  }
  if (name == "format") {
    for (Value& x : b.pos) x = escaped(x);
    for (auto& [k, x] : b.kw) x = escaped(x);
    return as_markup(fn(in, self, b));
  }
  if (name == "replace" || name == "ljust" || name == "rjust" || name == "center") {
    if (b.pos.size() > 1) b.pos[1] = escaped(b.pos[1]);
    return as_markup(fn(in, self, b));
  }
  bool wrap = false;
  for (const char* n : kKeepText) wrap |= name == n;
  return wrap ? as_markup(fn(in, self, a)) : fn(in, self, a);
}

const MethodDef kStrMethods[] = {
    {"find", s_find, false}, {"rfind", s_rfind, false}, {"index", s_index, false},
    {"rindex", s_rindex, false}, {"count", s_count, false}, {"startswith", s_startswith, false},
    {"endswith", s_endswith, false}, {"strip", s_strip, false}, {"lstrip", s_lstrip, false},
    {"rstrip", s_rstrip, false}, {"split", s_split, false}, {"rsplit", s_rsplit, false},
    {"splitlines", s_splitlines, false}, {"replace", s_replace, false}, {"join", s_join, false},
    {"upper", s_upper, false}, {"lower", s_lower, false}, {"casefold", s_casefold, false},
    {"title", s_title, false}, {"capitalize", s_capitalize, false}, {"swapcase", s_swapcase, false},
    {"ljust", s_ljust, false}, {"rjust", s_rjust, false}, {"center", s_center, false},
    {"zfill", s_zfill, false}, {"isalpha", s_is<py_isalpha>, false}, {"isdigit", s_is<py_isdigit>, false},
    {"isdecimal", s_is<py_isdigit>, false}, {"isnumeric", s_is<py_isdigit>, false},
    {"isalnum", s_is<cp_alnum>, false}, {"isspace", s_is<py_isspace>, false},
    {"islower", s_islower, false}, {"isupper", s_isupper, false}, {"partition", s_partition, false},
    {"rpartition", s_rpartition, false}, {"removeprefix", s_removeprefix, false},
    {"removesuffix", s_removesuffix, false}, {"format", s_format, false},
    {"expandtabs", s_expandtabs, false}, {"isascii", s_isascii, false}, {"istitle", s_istitle, false},
    {"encode", s_unsupported, false}, {"format_map", s_unsupported, false},
    {"isidentifier", s_unsupported, false}, {"isprintable", s_unsupported, false},
    {"maketrans", s_unsupported, false}, {"translate", s_unsupported, false},
};

}  // namespace

// List, tuple and dict methods live in methods-containers.cpp.
Value find_container_method(const Value& receiver, const std::string& name, bool immutable);

Value find_method(const Value& receiver, const std::string& name, bool immutable) {
  if (!receiver.is_string()) return find_container_method(receiver, name, immutable);
  for (const MethodDef& m : kStrMethods) {
    if (name != m.name) continue;
    auto c = std::make_shared<Callable>();
    c->type = Callable::Type::kMethod;
    c->name = name;
    Method fn = m.fn;
    Value self = receiver;
    if (fn == s_unsupported) {
      c->fn = [name](Interp&, CallArgs&) -> Value {
        fail(ErrorKind::kUnsupported, fmt::format("str.{}() is not supported by minfer's template engine", name));
      };
      return Value::callable(std::move(c));
    }
    if (receiver.is_markup()) {
      c->fn = [fn, self, name](Interp& in, CallArgs& a) { return markup_call(fn, in, self, name, a); };
    } else {
      c->fn = [fn, self](Interp& in, CallArgs& a) { return fn(in, self, a); };
    }
    return Value::callable(std::move(c));
  }
  return Value();
}

}  // namespace minfer::jinja
