// Helpers shared by filters and Python methods: jinja2's attribute getters and sorting, and
// Python str/number conversions with CPython's rules (pystr.cpp, builtins-common.cpp).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "template/builtins.h"
#include "template/value.h"

namespace minfer::jinja {

// jinja2 make_attrgetter: "a.b.0" -> ["a", "b", 0]; looked up item-first with Interp::getitem.
std::vector<Value> attr_parts(const Value& attribute);
Value get_path(Interp& in, Value item, const std::vector<Value>& parts, const Value* dflt);
Value ignore_case(const Value& v);  // lower-cases strings, other values unchanged
// Python sorted(items, key=key, reverse=reverse): stable, `<` only.
void sort_values(Interp& in, ValueList& items, const std::function<Value(const Value&)>& key, bool reverse);
// tojson's (ensure_ascii, indent, separators, sort_keys) arguments.
JsonOptions json_options(const Bound& b);

std::string html_escape(std::string_view s);  // markupsafe.escape
std::optional<double> parse_py_float(const std::string& s);
std::optional<int64_t> parse_py_int(const std::string& s, int64_t base);
int64_t float_to_int(double f);  // int(f) for finite f (range-checked)
std::string py_replace(const std::string& s, const std::string& old, const std::string& rep, int64_t count);
Value py_round(const Value& v, int64_t ndigits);
std::string jinja_title(const std::string& s);  // the |title filter (not str.title)
std::string py_title(const std::string& s);     // str.title
std::vector<std::string> py_split(const std::string& s, const std::string& sep, int64_t maxsplit = -1);
std::vector<std::string> py_rsplit(const std::string& s, const std::string& sep, int64_t maxsplit);
std::vector<std::string> py_split_ws(const std::string& s, int64_t maxsplit, bool from_right);
bool py_isalnum_extra(uint32_t cp);  // non-ASCII letters/digits for \w

}  // namespace minfer::jinja
