// Global functions: jinja2's range (sandboxed to 100000 items), dict, namespace, joiner,
// plus transformers' raise_exception and strftime_now.
#include <ctime>

#include <fmt/format.h>

#include "template/builtins.h"
#include "template/error.h"
#include "template/interp.h"

namespace minfer::jinja {
namespace {

constexpr int64_t kMaxRange = 100000;  // jinja2.sandbox.MAX_RANGE

Value g_range(Interp& in, CallArgs& a) {
  if (!a.kw.empty()) type_error("range() takes no keyword arguments");
  if (a.pos.empty() || a.pos.size() > 3)
    type_error(fmt::format("range expected at least 1 argument, got {}", a.pos.size()));
  int64_t start = 0, stop, step = 1;
  if (a.pos.size() == 1) {
    stop = to_index(a.pos[0], "range");
  } else {
    start = to_index(a.pos[0], "range");
    stop = to_index(a.pos[1], "range");
    if (a.pos.size() == 3) step = to_index(a.pos[2], "range");
  }
  if (step == 0) fail(ErrorKind::kType, "range() arg 3 must not be zero");
  const __int128 span = step > 0 ? static_cast<__int128>(stop) - start : static_cast<__int128>(start) - stop;
  const __int128 abs_step = step > 0 ? step : -static_cast<__int128>(step);
  const __int128 n = span <= 0 ? 0 : (span - 1) / abs_step + 1;
  if (n > kMaxRange)
    fail(ErrorKind::kType, fmt::format("Range too big. The sandbox blocks ranges larger than MAX_RANGE ({}).", kMaxRange));
  in.step(static_cast<uint64_t>(n));
  ValueList items;
  items.reserve(static_cast<size_t>(n));
  for (int64_t i = 0, v = start; i < static_cast<int64_t>(n); ++i, v += step) items.emplace_back(v);
  std::string repr = step == 1 ? fmt::format("range({}, {})", start, stop) : fmt::format("range({}, {}, {})", start, stop, step);
  return Value::view(std::move(items), std::move(repr));
}

// dict(mapping_or_pairs, **kwargs) into `out`.
void fill_dict(Interp& in, const CallArgs& a, DictObj& out, const char* fn) {
  if (a.pos.size() > 1) type_error(fmt::format("{} expected at most 1 argument, got {}", fn, a.pos.size()));
  if (!a.pos.empty()) {
    const Value& src = a.pos[0];
    if (src.is_undefined()) undefined_error(src);  // dict() asks it for .keys
    if (src.is_dict() || src.is_namespace()) {
      for (const auto& [k, v] : src.dict_obj().entries()) out.set(k, v);
    } else {
      for (const Value& pair : in.iterate(src)) {
        ValueList kv = in.iterate(pair);
        if (kv.size() != 2) type_error("dictionary update sequence element has wrong length; 2 is required");
        out.set(kv[0], kv[1]);
      }
    }
  }
  for (const auto& [k, v] : a.kw) out.set(k, v);
}

Value g_dict(Interp& in, CallArgs& a) {
  Value d = Value::dict();
  fill_dict(in, a, d.dict_obj(), "dict");
  return d;
}

Value g_namespace(Interp& in, CallArgs& a) {
  Value ns = Value::ns();
  fill_dict(in, a, ns.dict_obj(), "namespace");
  in.track(ns);
  return ns;
}

Value g_joiner(Interp&, CallArgs& a) {
  Bound b = bind_args("joiner", a, {"sep"});
  const std::string sep = b.has(0) ? b.v[0].to_str() : ", ";
  auto used = std::make_shared<bool>(false);
  return Value::builtin("joiner", [sep, used](Interp&, CallArgs& c) -> Value {
    bind_args("joiner", c, {});
    if (!*used) {
      *used = true;
      return Value("");
    }
    return Value(sep);
  });
}

Value g_raise_exception(Interp&, CallArgs& a) {
  Bound b = bind_args("raise_exception", a, {"*message"});
  fail(ErrorKind::kRaised, b.v[0].to_str());
}

// datetime.now().strftime(fmt) at the fixed render time: %f, %z and %Z are Python's own
// (microseconds, and empty for a naive datetime); the rest is the C library's strftime in
// the C locale, which is what CPython calls on Linux.
Value g_strftime_now(Interp& in, CallArgs& a) {
  Bound b = bind_args("strftime_now", a, {"*format"});
  if (!b.v[0].is_string()) type_error(fmt::format("strftime() argument 1 must be str, not {}", b.v[0].type_name()));
  const std::string& f = b.v[0].str();
  std::string pre;
  for (size_t i = 0; i < f.size(); ++i) {
    if (f[i] == '%' && i + 1 < f.size()) {
      const char c = f[i + 1];
      if (c == 'f') { pre += "000000"; ++i; continue; }
      if (c == 'z' || c == 'Z') { ++i; continue; }
      pre += f[i];
      pre += c;
      ++i;
      continue;
    }
    pre += f[i];
  }
  std::tm tm = in.now();
  std::string out;
  size_t pos = 0;
  // strftime cannot tell an empty result from an error, so format piece by piece between
  // literal runs; each conversion is short.
  while (pos < pre.size()) {
    size_t next = pre.find('%', pos);
    if (next == std::string::npos) {
      out += pre.substr(pos);
      break;
    }
    out += pre.substr(pos, next - pos);
    size_t end = next + 1;
    while (end < pre.size() && std::string("-_0^#EO").find(pre[end]) != std::string::npos) ++end;
    if (end < pre.size()) ++end;
    const std::string conv = pre.substr(next, end - next);
    char buf[256];
    const size_t n = std::strftime(buf, sizeof(buf), conv.c_str(), &tm);
    out.append(buf, n);
    pos = end;
  }
  in.check_size(out.size());
  return Value(std::move(out));
}

Value g_unsupported(const char* name) {
  return Value::builtin(name, [name](Interp&, CallArgs&) -> Value {
    fail(ErrorKind::kUnsupported, fmt::format("the '{}' global is not supported by minfer's template engine", name));
  });
}

}  // namespace

void add_globals(DictObj& globals) {
  globals.set("range", Value::builtin("range", g_range));
  globals.set("dict", Value::builtin("dict", g_dict));
  globals.set("namespace", Value::builtin("namespace", g_namespace));
  globals.set("joiner", Value::builtin("joiner", g_joiner));
  globals.set("cycler", g_unsupported("cycler"));
  globals.set("lipsum", g_unsupported("lipsum"));
  globals.set("raise_exception", Value::builtin("raise_exception", g_raise_exception));
  globals.set("strftime_now", Value::builtin("strftime_now", g_strftime_now));
}

}  // namespace minfer::jinja
