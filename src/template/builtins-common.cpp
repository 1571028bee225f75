// Argument binding and Python conversions shared by filters, tests and methods.
#include <algorithm>

#include <fmt/format.h>

#include "template/builtins.h"
#include "template/error.h"
#include "template/filters-impl.h"
#include "template/interp.h"
#include "template/text.h"

namespace minfer::jinja {

namespace {

[[noreturn]] void binding_error(std::string message) {
  throw JinjaError(ErrorKind::kType, std::move(message)).mark_binding();
}

}  // namespace

Bound bind_args(const char* fn, const CallArgs& args, std::initializer_list<const char*> params) {
  Bound b;
  b.v.resize(params.size());
  b.given.assign(params.size(), false);
  std::vector<std::string_view> names;
  for (const char* p : params) names.emplace_back(p[0] == '*' ? p + 1 : p);
  if (args.pos.size() > names.size())
    binding_error(fmt::format("{}() takes at most {} argument(s) ({} given)", fn, names.size(), args.pos.size()));
  for (size_t i = 0; i < args.pos.size(); ++i) {
    b.v[i] = args.pos[i];
    b.given[i] = true;
  }
  for (const auto& [k, v] : args.kw) {
    auto it = std::find(names.begin(), names.end(), k);
    if (it == names.end()) binding_error(fmt::format("{}() got an unexpected keyword argument '{}'", fn, k));
    const size_t i = static_cast<size_t>(it - names.begin());
    if (b.given[i]) binding_error(fmt::format("{}() got multiple values for argument '{}'", fn, k));
    b.v[i] = v;
    b.given[i] = true;
  }
  size_t i = 0;
  for (const char* p : params) {
    if (p[0] == '*' && !b.given[i]) binding_error(fmt::format("{}() missing required argument '{}'", fn, p + 1));
    ++i;
  }
  return b;
}

int64_t to_index(const Value& v, const char* what) {
  if (v.is_int() || v.is_bool()) return v.get_int();
  type_error(fmt::format("'{}' object cannot be interpreted as an integer ({})", v.type_name(), what));
}

std::string soft_str(const Value& v) { return v.to_str(); }

// Python str.splitlines: \n, \r, \r\n, \v, \f, \x1c-\x1e, \x85, U+2028, U+2029 end lines.
std::vector<std::string> py_splitlines(const std::string& s, bool keepends) {
  std::vector<std::string> lines;
  size_t start = 0, i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t brk = 0;
    if (c == '\n' || c == '\v' || c == '\f' || (c >= 0x1C && c <= 0x1E)) brk = 1;
    else if (c == '\r') brk = (i + 1 < s.size() && s[i + 1] == '\n') ? 2 : 1;
    else if (c == 0xC2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) == 0x85) brk = 2;
    else if (c == 0xE2 && i + 2 < s.size() && static_cast<unsigned char>(s[i + 1]) == 0x80 &&
             (static_cast<unsigned char>(s[i + 2]) == 0xA8 || static_cast<unsigned char>(s[i + 2]) == 0xA9))
      brk = 3;
    if (!brk) {
      ++i;
      continue;
    }
    lines.push_back(s.substr(start, (keepends ? i + brk : i) - start));
    i += brk;
    start = i;
  }
  if (start < s.size()) lines.push_back(s.substr(start));
  return lines;
}

std::vector<Value> attr_parts(const Value& attribute) {
  if (attribute.is_none() || attribute.is_undefined()) return {};
  if (!attribute.is_string()) return {attribute};
  std::vector<Value> parts;
  for (const std::string& p : py_split(attribute.str(), ".")) {
    const bool digits = !p.empty() && std::all_of(p.begin(), p.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (digits && p.size() < 19) parts.emplace_back(static_cast<int64_t>(std::stoll(p)));
    else parts.emplace_back(p);
  }
  return parts;
}

Value get_path(Interp& in, Value item, const std::vector<Value>& parts, const Value* dflt) {
  for (const Value& p : parts) {
    item = in.getitem(item, p);
    if (dflt && item.is_undefined()) item = *dflt;
  }
  return item;
}

Value ignore_case(const Value& v) { return v.is_string() ? Value(str_lower(v.str())) : v; }

void sort_values(Interp& in, ValueList& items, const std::function<Value(const Value&)>& key, bool reverse) {
  std::vector<std::pair<Value, size_t>> keyed;
  keyed.reserve(items.size());
  for (size_t i = 0; i < items.size(); ++i) keyed.emplace_back(key(items[i]), i);
  in.step(items.size());
  std::stable_sort(keyed.begin(), keyed.end(), [reverse](const auto& x, const auto& y) {
    return reverse ? values_compare(y.first, x.first) < 0 : values_compare(x.first, y.first) < 0;
  });
  ValueList out;
  out.reserve(items.size());
  for (const auto& [k, i] : keyed) out.push_back(std::move(items[i]));
  items = std::move(out);
}

JsonOptions json_options(const Bound& b) {
  JsonOptions o;
  o.ensure_ascii = b.has(0) && b.v[0].truthy();
  if (b.has(1) && !b.v[1].is_none()) {
    o.has_indent = true;
    if (b.v[1].is_string()) o.indent = b.v[1].str();
    else o.indent = std::string(static_cast<size_t>(std::clamp<int64_t>(to_index(b.v[1], "indent"), 0, 1 << 16)), ' ');
    o.item_sep.assign(1, ',');
  }
  if (b.has(2) && !b.v[2].is_none()) {
    const Value& s = b.v[2];
    if (!s.is_sequence() || s.items().size() != 2 || !s.items()[0].is_string() || !s.items()[1].is_string())
      type_error("separators must be a (item_separator, key_separator) pair of strings");
    o.item_sep = s.items()[0].str();
    o.key_sep = s.items()[1].str();
  }
  o.sort_keys = b.has(3) && b.v[3].truthy();
  return o;
}

}  // namespace minfer::jinja
