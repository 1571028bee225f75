// Filters, tests, global functions and Python methods available to templates. Each lives in
// its own file (filters.cpp, tests.cpp, methods.cpp, globals.cpp); the parser resolves filter
// and test names at parse time, so an unknown one is an error even in a branch never taken
// (as in jinja2).
#pragma once

#include <string>
#include <string_view>
#include <initializer_list>
#include <vector>

#include "template/value.h"

namespace minfer::jinja {

using FilterFn = Value (*)(Interp& in, const Value& v, CallArgs& args);
using TestFn = bool (*)(Interp& in, const Value& v, CallArgs& args);

struct FilterDef {
  const char* name;
  FilterFn fn;
};
struct TestDef {
  const char* name;
  TestFn fn;
  int n_args = 0;  // arguments after the value (jinja2 tests take exactly this many)
};

const FilterDef* find_filter(std::string_view name);
const TestDef* find_test(std::string_view name);
// jinja2 builtins this engine does not implement (named in the error instead of "unknown").
bool is_unsupported_filter(std::string_view name);

// One entry of a type's method table (methods.cpp: str; methods-containers.cpp: list, tuple,
// dict); `mutating` ones are hidden in an immutable sandbox.
using Method = Value (*)(Interp& in, const Value& self, CallArgs& a);
struct MethodDef {
  const char* name;
  Method fn;
  bool mutating;
};

// A Python method of a str, list or dict (`'a,b'.split(',')`), bound to its receiver;
// undefined when the type has no such method. `immutable` hides the mutating ones, as the
// ImmutableSandboxedEnvironment does (calling them is then a security error).
Value find_method(const Value& receiver, const std::string& name, bool immutable);

// Globals every template sees: range, dict, namespace, cycler, joiner, raise_exception,
// strftime_now.
void add_globals(DictObj& globals);

// Python str % args and str.format(*args, **kwargs).
std::string percent_format(Interp& in, const std::string& fmt, const Value& args);
std::string str_format(Interp& in, const std::string& fmt, const CallArgs& args);

// Python's json.dumps(v, ensure_ascii, indent, separators, sort_keys).
struct JsonOptions {
  bool ensure_ascii = false;
  std::string indent;  // used when has_indent
  bool has_indent = false;
  std::string item_sep = ", ", key_sep = ": ";
  bool sort_keys = false;
};
std::string json_dumps(const Value& v, const JsonOptions& opts);

// Call arguments bound to a Python-style signature (positional, then keyword): one slot per
// parameter, with `given` telling which were passed. Type error on extra positional or
// unknown keyword arguments, or a missing required parameter (marked with a leading '*').
struct Bound {
  ValueList v;
  std::vector<bool> given;
  bool has(size_t i) const { return given[i]; }
  Value get(size_t i, Value dflt) const { return given[i] ? v[i] : std::move(dflt); }
};
Bound bind_args(const char* fn, const CallArgs& args, std::initializer_list<const char*> params);

// Python-level conversions shared by filters and methods.
int64_t to_index(const Value& v, const char* what);  // int or bool, else type error
std::string soft_str(const Value& v);                // str(v) (Markup stays text)
std::vector<std::string> py_splitlines(const std::string& s, bool keepends);

}  // namespace minfer::jinja
