// Jinja filters with jinja2 3.1 semantics (with autoescape off, as in transformers).
// Filters that return generators in jinja2 (map, select, reject, unique, items, reverse...)
// return a single-pass iterator here too, so truthiness and `|length` errors match.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "template/builtins.h"
#include "template/error.h"
#include "template/filters-impl.h"
#include "template/interp.h"
#include "template/text.h"

namespace minfer::jinja {
namespace {

using K = Value::Kind;

Value f_abs(Interp&, const Value& v, CallArgs& a) {
  bind_args("abs", a, {});
  if (v.is_float()) return Value(std::fabs(v.as_double()));
  if (v.is_int() || v.is_bool()) {
    if (v.get_int() == INT64_MIN) fail(ErrorKind::kUnsupported, "integer overflow in abs()");
    return Value(v.get_int() < 0 ? -v.get_int() : v.get_int());
  }
  type_error(fmt::format("bad operand type for abs(): '{}'", v.type_name()));
}

Value f_attr(Interp& in, const Value& v, CallArgs& a) {
  Bound b = bind_args("attr", a, {"*name"});
  const std::string name = b.v[0].to_str();
  if (v.is_dict() && find_method(v, name, false).is_undefined() && find_method(v, name, false).undefined_hint().empty())
    return Value::undefined(fmt::format("'dict object' has no attribute '{}'", name));
  return in.getattr(v, name);
}

Value f_batch(Interp& in, const Value& v, CallArgs& a) {
  Bound b = bind_args("batch", a, {"*linecount", "fill_with"});
  const int64_t n = to_index(b.v[0], "linecount");
  const Value fill = b.get(1, Value::none());
  ValueList out, tmp;
  for (Value& x : in.iterate(v)) {
    if (static_cast<int64_t>(tmp.size()) == n) {
      out.push_back(Value::list(std::move(tmp)));
      tmp.clear();
    }
    tmp.push_back(std::move(x));
  }
  if (!tmp.empty()) {
    if (!fill.is_none())
      while (static_cast<int64_t>(tmp.size()) < n) tmp.push_back(fill);
    out.push_back(Value::list(std::move(tmp)));
  }
  return Value::iterator(std::move(out));
}

Value f_capitalize(Interp&, const Value& v, CallArgs& a) {
  bind_args("capitalize", a, {});
  std::vector<uint32_t> cps = utf8_decode(soft_str(v));
  std::string out;
  for (size_t i = 0; i < cps.size(); ++i) utf8_append(out, i == 0 ? cp_upper(cps[i]) : cp_lower(cps[i]));
  return Value(std::move(out));
}

Value f_center(Interp& in, const Value& v, CallArgs& a) {
  Bound b = bind_args("center", a, {"width"});
  const int64_t width = b.has(0) ? to_index(b.v[0], "width") : 80;
  const std::string s = soft_str(v);
  const auto len = static_cast<int64_t>(utf8_length(s));
  if (width <= len) return Value(s);
  in.check_size(static_cast<size_t>(width));
  const int64_t marg = width - len;
  const int64_t left = marg / 2 + (marg & width & 1);
  return Value(std::string(static_cast<size_t>(left), ' ') + s + std::string(static_cast<size_t>(marg - left), ' '));
}

Value f_length(Interp&, const Value& v, CallArgs& a) {
  bind_args("length", a, {});
  switch (v.kind()) {
    case K::kUndefined: return Value(0);
    case K::kString: return Value(static_cast<int64_t>(utf8_length(v.str())));
    case K::kList: case K::kTuple: return Value(static_cast<int64_t>(v.items().size()));
    case K::kDict: return Value(static_cast<int64_t>(v.dict_obj().size()));
    case K::kLoop: return Value(static_cast<int64_t>(v.loop_obj().items->items.size()));
    default: type_error(fmt::format("object of type '{}' has no len()", v.type_name()));
  }
}

Value f_default(Interp&, const Value& v, CallArgs& a) {
  Bound b = bind_args("default", a, {"default_value", "boolean"});
  const bool boolean = b.has(1) && b.v[1].truthy();
  if (v.is_undefined() || (boolean && !v.truthy())) return b.get(0, Value(""));
  return v;
}

Value f_dictsort(Interp& in, const Value& v, CallArgs& a) {
  Bound b = bind_args("dictsort", a, {"case_sensitive", "by", "reverse"});
  const bool cs = b.has(0) && b.v[0].truthy();
  const std::string by = b.has(1) ? b.v[1].to_str() : "key";
  const bool reverse = b.has(2) && to_index(b.v[2], "reverse") != 0;  // sorted() wants an int
  if (by != "key" && by != "value") type_error("You can only sort by either \"key\" or \"value\"");
  if (v.is_undefined()) undefined_error(v);
  if (!v.is_dict()) type_error(fmt::format("'{}' object has no attribute 'items'", v.type_name()));
  ValueList items;
  for (const auto& [k, x] : v.dict_obj().entries()) items.push_back(Value::tuple({k, x}));
  const size_t pos = by == "key" ? 0 : 1;
  auto key = [&](const Value& item) { return cs ? item.items()[pos] : ignore_case(item.items()[pos]); };
  sort_values(in, items, key, reverse);
  return Value::list(std::move(items));
}

Value f_escape(Interp&, const Value& v, CallArgs& a) {
  bind_args("escape", a, {});
  if (v.is_markup()) return v;
  return Value::markup(html_escape(v.to_str()));
}

Value f_forceescape(Interp&, const Value& v, CallArgs& a) {
  bind_args("forceescape", a, {});
  return Value::markup(html_escape(v.to_str()));
}

Value f_safe(Interp&, const Value& v, CallArgs& a) {
  bind_args("safe", a, {});
  return Value::markup(v.to_str());
}

Value f_first(Interp& in, const Value& v, CallArgs& a) {
  bind_args("first", a, {});
  ValueList items = in.iterate(v);
  if (items.empty()) return Value::undefined("No first item, sequence was empty.");
  return items[0];
}

Value f_last(Interp& in, const Value& v, CallArgs& a) {
  bind_args("last", a, {});
  if (v.is_iterator()) type_error("'generator' object is not reversible");
  ValueList items = in.iterate(v);
  if (items.empty()) return Value::undefined("No last item, sequence was empty.");
  return items.back();
}

Value f_float(Interp&, const Value& v, CallArgs& a) {
  Bound b = bind_args("float", a, {"default"});
  const Value dflt = b.get(0, Value(0.0));
  if (v.is_undefined()) undefined_error(v);
  if (v.is_number()) return Value(v.as_double());
  if (v.is_string()) {
    if (auto f = parse_py_float(v.str())) return Value(*f);
  }
  return dflt;
}

Value f_int(Interp&, const Value& v, CallArgs& a) {
  Bound b = bind_args("int", a, {"default", "base"});
  const Value dflt = b.get(0, Value(0));
  const int64_t base = b.has(1) ? to_index(b.v[1], "base") : 10;
  if (v.is_undefined()) undefined_error(v);
  if (v.is_int() || v.is_bool()) return Value(v.get_int());
  if (v.is_float()) {
    const double f = v.as_double();
    if (std::isnan(f)) return dflt;
    if (std::isinf(f)) fail(ErrorKind::kType, "cannot convert float infinity to integer");
    return Value(float_to_int(f));
  }
  if (v.is_string()) {
    if (auto i = parse_py_int(v.str(), base)) return Value(*i);
    if (auto f = parse_py_float(v.str())) {
      if (std::isnan(*f) || std::isinf(*f)) return dflt;
      return Value(float_to_int(*f));
    }
  }
  return dflt;
}

Value f_join(Interp& in, const Value& v, CallArgs& a) {
  Bound b = bind_args("join", a, {"d", "attribute"});
  const std::string d = b.has(0) ? b.v[0].to_str() : "";
  const std::vector<Value> parts = b.has(1) && !b.v[1].is_none() ? attr_parts(b.v[1]) : std::vector<Value>{};
  std::string out;
  bool first = true;
  for (const Value& x : in.iterate(v)) {
    if (!first) out += d;
    first = false;
    out += (parts.empty() ? x : get_path(in, x, parts, nullptr)).to_str();
    in.check_size(out.size());
  }
  return Value(std::move(out));
}

Value f_list(Interp& in, const Value& v, CallArgs& a) {
  bind_args("list", a, {});
  return Value::list(in.iterate(v));
}

Value f_lower(Interp&, const Value& v, CallArgs& a) {
  bind_args("lower", a, {});
  return Value(str_lower(soft_str(v)));
}

Value f_upper(Interp&, const Value& v, CallArgs& a) {
  bind_args("upper", a, {});
  return Value(str_upper(soft_str(v)));
}

Value f_items(Interp&, const Value& v, CallArgs& a) {
  bind_args("items", a, {});
  if (v.is_undefined()) return Value::iterator({});
  if (!v.is_dict()) type_error("Can only get item pairs from a mapping.");
  ValueList out;
  for (const auto& [k, x] : v.dict_obj().entries()) out.push_back(Value::tuple({k, x}));
  return Value::iterator(std::move(out));
}

Value f_map(Interp& in, const Value& v, CallArgs& a) {
  if (!v.truthy()) return Value::iterator({});
  ValueList items = in.iterate(v);
  ValueList out;
  if (a.pos.empty() && std::any_of(a.kw.begin(), a.kw.end(), [](auto& kv) { return kv.first == "attribute"; })) {
    Value attribute, dflt = Value::none();
    for (auto& [k, x] : a.kw) {
      if (k == "attribute") attribute = x;
      else if (k == "default") dflt = x;
      else type_error(fmt::format("Unexpected keyword argument '{}'", k));
    }
    const std::vector<Value> parts = attr_parts(attribute);
    for (const Value& x : items) out.push_back(get_path(in, x, parts, dflt.is_none() ? nullptr : &dflt));
    return Value::iterator(std::move(out));
  }
  if (a.pos.empty()) type_error("map requires a filter argument");
  const std::string name = a.pos[0].to_str();
  CallArgs rest;
  rest.pos.assign(a.pos.begin() + 1, a.pos.end());
  rest.kw = a.kw;
  for (const Value& x : items) {
    in.step();
    CallArgs call = rest;
    out.push_back(in.apply_filter(name, x, call));
  }
  return Value::iterator(std::move(out));
}

Value min_max(Interp& in, const Value& v, CallArgs& a, bool want_max) {
  Bound b = bind_args(want_max ? "max" : "min", a, {"case_sensitive", "attribute"});
  const bool cs = b.has(0) && b.v[0].truthy();
  const std::vector<Value> parts = b.has(1) && !b.v[1].is_none() ? attr_parts(b.v[1]) : std::vector<Value>{};
  ValueList items = in.iterate(v);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  auto key = [&](const Value& x) {
    Value k = parts.empty() ? x : get_path(in, x, parts, nullptr);
    return cs ? k : ignore_case(k);
  };
  size_t best = 0;
  Value best_key = key(items[0]);
  for (size_t i = 1; i < items.size(); ++i) {
    Value k = key(items[i]);
    const int c = values_compare(k, best_key);
    if (want_max ? c > 0 : c < 0) {
      best = i;
      best_key = std::move(k);
    }
  }
  return items[best];
}
Value f_min(Interp& in, const Value& v, CallArgs& a) { return min_max(in, v, a, false); }
Value f_max(Interp& in, const Value& v, CallArgs& a) { return min_max(in, v, a, true); }

Value select_reject(Interp& in, const Value& v, CallArgs& a, bool select, bool by_attr) {
  if (!v.truthy()) return Value::iterator({});
  ValueList items = in.iterate(v);
  std::vector<Value> parts;
  size_t off = 0;
  if (by_attr) {
    if (a.pos.empty()) type_error("Missing parameter for attribute name");
    parts = attr_parts(a.pos[0]);
    off = 1;
  }
  const bool has_test = a.pos.size() > off;
  const std::string test = has_test ? a.pos[off].to_str() : "";
  CallArgs rest;
  if (has_test) rest.pos.assign(a.pos.begin() + static_cast<std::ptrdiff_t>(off) + 1, a.pos.end());
  rest.kw = a.kw;
  ValueList out;
  for (Value& x : items) {
    in.step();
    Value probe = by_attr ? get_path(in, x, parts, nullptr) : x;
    bool ok;
    if (has_test) {
      CallArgs call = rest;
      ok = in.apply_test(test, probe, call);
    } else {
      ok = probe.truthy();
    }
    if (ok == select) out.push_back(std::move(x));
  }
  return Value::iterator(std::move(out));
}
Value f_select(Interp& in, const Value& v, CallArgs& a) { return select_reject(in, v, a, true, false); }
Value f_reject(Interp& in, const Value& v, CallArgs& a) { return select_reject(in, v, a, false, false); }
Value f_selectattr(Interp& in, const Value& v, CallArgs& a) { return select_reject(in, v, a, true, true); }
Value f_rejectattr(Interp& in, const Value& v, CallArgs& a) { return select_reject(in, v, a, false, true); }

Value f_replace(Interp& in, const Value& v, CallArgs& a) {
  Bound b = bind_args("replace", a, {"*old", "*new", "count"});
  const int64_t count = b.has(2) && !b.v[2].is_none() ? to_index(b.v[2], "count") : -1;
  std::string out = py_replace(v.to_str(), b.v[0].to_str(), b.v[1].to_str(), count);
  in.check_size(out.size());
  return Value(std::move(out));
}

Value f_reverse(Interp& in, const Value& v, CallArgs& a) {
  bind_args("reverse", a, {});
  if (v.is_string()) {
    std::vector<uint32_t> cps = utf8_decode(v.str());
    std::reverse(cps.begin(), cps.end());
    return Value(utf8_encode(cps, 0, cps.size()));
  }
  const bool generator = v.is_iterator();
  ValueList items = in.iterate(v);
  std::reverse(items.begin(), items.end());
  return generator ? Value::list(std::move(items)) : Value::iterator(std::move(items));
}

Value f_round(Interp&, const Value& v, CallArgs& a) {
  Bound b = bind_args("round", a, {"precision", "method"});
  const int64_t precision = b.has(0) ? to_index(b.v[0], "precision") : 0;
  const std::string method = b.has(1) ? b.v[1].to_str() : "common";
  if (method != "common" && method != "ceil" && method != "floor")
    type_error("method must be common, ceil or floor");
  if (!v.is_number()) type_error(fmt::format("type {} doesn't define __round__ method", v.type_name()));
  if (method == "common") return py_round(v, precision);
  const double scale = std::pow(10.0, static_cast<double>(precision));
  const double x = v.as_double() * scale;
  return Value((method == "ceil" ? std::ceil(x) : std::floor(x)) / scale);
}

Value f_slice(Interp& in, const Value& v, CallArgs& a) {
  Bound b = bind_args("slice", a, {"*slices", "fill_with"});
  const int64_t slices = to_index(b.v[0], "slices");
  const Value fill = b.get(1, Value::none());
  ValueList seq = in.iterate(v);
  if (slices <= 0) fail(ErrorKind::kType, "integer division or modulo by zero");
  in.step(static_cast<uint64_t>(slices));
  const auto len = static_cast<int64_t>(seq.size());
  const int64_t per = len / slices, extra = len % slices;
  int64_t offset = 0;
  ValueList out;
  for (int64_t i = 0; i < slices; ++i) {
    const int64_t start = offset + i * per;
    if (i < extra) ++offset;
    const int64_t end = offset + (i + 1) * per;
    ValueList tmp(seq.begin() + start, seq.begin() + end);
    if (!fill.is_none() && i >= extra) tmp.push_back(fill);
    out.push_back(Value::list(std::move(tmp)));
  }
  return Value::iterator(std::move(out));
}

Value f_sort(Interp& in, const Value& v, CallArgs& a) {
  Bound b = bind_args("sort", a, {"reverse", "case_sensitive", "attribute"});
  const bool reverse = b.has(0) && to_index(b.v[0], "reverse") != 0;  // sorted() wants an int
  const bool cs = b.has(1) && b.v[1].truthy();
  std::vector<std::vector<Value>> keys;  // make_multi_attrgetter: "a,b" sorts by a then b
  if (b.has(2) && b.v[2].is_string()) {
    for (const std::string& part : py_split(b.v[2].str(), ","))
      keys.push_back(attr_parts(Value(part)));
  } else {
    keys.push_back(b.has(2) && !b.v[2].is_none() ? attr_parts(b.v[2]) : std::vector<Value>{});
  }
  ValueList items = in.iterate(v);
  auto key = [&](const Value& x) {
    ValueList k;
    for (const auto& parts : keys) {
      Value p = parts.empty() ? x : get_path(in, x, parts, nullptr);
      k.push_back(cs ? p : ignore_case(p));
    }
    return Value::list(std::move(k));
  };
  sort_values(in, items, key, reverse);
  return Value::list(std::move(items));
}

Value f_string(Interp&, const Value& v, CallArgs& a) {
  bind_args("string", a, {});
  if (v.is_string()) return v;
  return Value(v.to_str());
}

Value f_sum(Interp& in, const Value& v, CallArgs& a) {
  Bound b = bind_args("sum", a, {"attribute", "start"});
  const std::vector<Value> parts = b.has(0) && !b.v[0].is_none() ? attr_parts(b.v[0]) : std::vector<Value>{};
  Value total = b.get(1, Value(0));
  if (total.is_string()) type_error("sum() can't sum strings [use ''.join(seq) instead]");
  for (const Value& x : in.iterate(v)) total = binary_op(in, "+", total, parts.empty() ? x : get_path(in, x, parts, nullptr));
  return total;
}

Value f_title(Interp&, const Value& v, CallArgs& a) {
  bind_args("title", a, {});
  return Value(jinja_title(soft_str(v)));
}

Value f_trim(Interp&, const Value& v, CallArgs& a) {
  Bound b = bind_args("trim", a, {"chars"});
  std::string chars;
  const bool has_chars = b.has(0) && !b.v[0].is_none();
  if (has_chars) {
    if (!b.v[0].is_string()) type_error("strip arg must be None or str");
    chars = b.v[0].str();
  }
  return Value(py_strip(soft_str(v), true, true, has_chars ? &chars : nullptr));
}

Value f_unique(Interp& in, const Value& v, CallArgs& a) {
  Bound b = bind_args("unique", a, {"case_sensitive", "attribute"});
  const bool cs = b.has(0) && b.v[0].truthy();
  const std::vector<Value> parts = b.has(1) && !b.v[1].is_none() ? attr_parts(b.v[1]) : std::vector<Value>{};
  DictObj seen;
  ValueList out;
  for (Value& x : in.iterate(v)) {
    Value k = parts.empty() ? x : get_path(in, x, parts, nullptr);
    if (!cs) k = ignore_case(k);
    if (seen.find(k)) continue;
    seen.set(k, Value::none());
    out.push_back(std::move(x));
  }
  return Value::iterator(std::move(out));
}

Value f_wordcount(Interp&, const Value& v, CallArgs& a) {
  bind_args("wordcount", a, {});
  int64_t n = 0;
  bool in_word = false;
  for (uint32_t cp : utf8_decode(soft_str(v))) {
    const bool w = cp == '_' || py_isalpha(cp) || py_isdigit(cp) || (cp >= 0x80 && py_isalnum_extra(cp));
    if (w && !in_word) ++n;
    in_word = w;
  }
  return Value(n);
}

Value f_indent(Interp&, const Value& v, CallArgs& a) {
  Bound b = bind_args("indent", a, {"width", "first", "blank"});
  std::string ind;
  if (b.has(0) && b.v[0].is_string()) ind = b.v[0].str();
  else ind = std::string(static_cast<size_t>(std::max<int64_t>(0, b.has(0) ? to_index(b.v[0], "width") : 4)), ' ');
  const bool first = b.has(1) && b.v[1].truthy(), blank = b.has(2) && b.v[2].truthy();
  if (v.is_undefined()) undefined_error(v);
  if (!v.is_string()) type_error(fmt::format("indent needs a string, not {}", v.type_name()));
  std::vector<std::string> lines = py_splitlines(v.to_str() + "\n", false);
  std::string out;
  if (blank) {
    for (size_t i = 0; i < lines.size(); ++i) out += (i ? "\n" + ind : "") + lines[i];
  } else {
    out = lines.empty() ? "" : lines[0];
    for (size_t i = 1; i < lines.size(); ++i) {
      out += '\n';
      if (!lines[i].empty()) out += ind + lines[i];
    }
  }
  if (first) out = ind + out;
  return v.is_markup() ? Value::markup(std::move(out)) : Value(std::move(out));
}

Value f_format(Interp& in, const Value& v, CallArgs& a) {
  if (!a.pos.empty() && !a.kw.empty()) type_error("can't handle positional and keyword arguments at the same time");
  Value args;
  if (!a.kw.empty()) {
    args = Value::dict();
    for (auto& [k, x] : a.kw) args.dict_obj().set(k, x);
  } else {
    args = Value::tuple(a.pos);
  }
  return Value(percent_format(in, soft_str(v), args));
}

Value f_truncate(Interp& in, const Value& v, CallArgs& a) {
  Bound b = bind_args("truncate", a, {"length", "killwords", "end", "leeway"});
  const int64_t length = b.has(0) ? to_index(b.v[0], "length") : 255;
  const bool killwords = b.has(1) && b.v[1].truthy();
  const std::string end = b.has(2) ? b.v[2].to_str() : "...";
  const int64_t leeway = b.has(3) && !b.v[3].is_none() ? to_index(b.v[3], "leeway") : 5;  // truncate.leeway
  const auto end_len = static_cast<int64_t>(utf8_length(end));
  if (length < end_len) type_error(fmt::format("expected length >= {}, got {}", end_len, length));
  if (leeway < 0) type_error(fmt::format("expected leeway >= 0, got {}", leeway));
  CallArgs none;
  if (f_length(in, v, none).get_int() <= length + leeway) return v;
  if (!v.is_string()) type_error(fmt::format("can only truncate strings, not {}", v.type_name()));
  std::vector<uint32_t> cps = utf8_decode(v.str());
  std::string head = utf8_encode(cps, 0, static_cast<size_t>(length - end_len));
  if (!killwords) {
    const size_t space = head.rfind(' ');
    if (space != std::string::npos) head.resize(space);
  }
  return Value(head + end);
}

Value f_tojson(Interp&, const Value& v, CallArgs& a) {
  Bound b = bind_args("tojson", a, {"ensure_ascii", "indent", "separators", "sort_keys"});
  return Value(json_dumps(v, json_options(b)));
}

// jinja2's generator filters run their body when the result is iterated: an error inside
// becomes part of the iterator and is raised then.
template <FilterFn F>
Value lazy(Interp& in, const Value& v, CallArgs& a) {
  try {
    return F(in, v, a);
  } catch (const JinjaError& e) {
    if (e.kind() == ErrorKind::kLimit || e.binding()) throw;
    Value it = Value::iterator({});
    it.list_obj().error_kind = static_cast<int>(e.kind());
    it.list_obj().error = e.message();
    return it;
  }
}

const FilterDef kFilters[] = {
    {"abs", f_abs}, {"attr", f_attr}, {"batch", lazy<f_batch>}, {"capitalize", f_capitalize},
    {"center", f_center}, {"count", f_length}, {"d", f_default}, {"default", f_default},
    {"dictsort", f_dictsort}, {"e", f_escape}, {"escape", f_escape}, {"first", f_first},
    {"float", f_float}, {"forceescape", f_forceescape}, {"format", f_format}, {"indent", f_indent},
    {"int", f_int}, {"items", lazy<f_items>}, {"join", f_join}, {"last", f_last}, {"length", f_length},
    {"list", f_list}, {"lower", f_lower}, {"map", lazy<f_map>}, {"max", f_max}, {"min", f_min},
    {"reject", lazy<f_reject>}, {"rejectattr", lazy<f_rejectattr>}, {"replace", f_replace},
    {"reverse", f_reverse}, {"round", f_round}, {"safe", f_safe}, {"select", lazy<f_select>},
    {"selectattr", lazy<f_selectattr>}, {"slice", lazy<f_slice>}, {"sort", f_sort}, {"string", f_string},
    {"sum", f_sum}, {"title", f_title}, {"tojson", f_tojson}, {"trim", f_trim}, {"truncate", f_truncate},
    {"unique", lazy<f_unique>}, {"upper", f_upper}, {"wordcount", f_wordcount},
};

}  // namespace

const FilterDef* find_filter(std::string_view name) {
  for (const FilterDef& f : kFilters)
    if (name == f.name) return &f;
  return nullptr;
}

bool is_unsupported_filter(std::string_view name) {
  static const char* const kNames[] = {"filesizeformat", "groupby", "pprint", "random", "striptags",
                                       "urlencode", "urlize", "wordwrap", "xmlattr"};
  return std::any_of(std::begin(kNames), std::end(kNames), [&](const char* n) { return name == n; });
}

}  // namespace minfer::jinja
