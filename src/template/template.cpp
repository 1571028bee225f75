#include "template/template.h"

#include <cstdio>
#include <new>

#include <nlohmann/json.hpp>

#include "template/builtins.h"
#include "template/error.h"
#include "template/lexer.h"
#include "template/parser.h"

namespace minfer::jinja {
namespace {

const char* kind_label(ErrorKind k) {
  switch (k) {
    case ErrorKind::kSyntax: return "syntax error";
    case ErrorKind::kUnsupported: return "unsupported";
    case ErrorKind::kUndefined: return "undefined value";
    case ErrorKind::kType: return "error";
    case ErrorKind::kSecurity: return "refused by the sandbox";
    case ErrorKind::kRaised: return "raise_exception";
    case ErrorKind::kLimit: return "limit";
  }
  return "error";
}

Error to_error(const JinjaError& e) {
  if (e.line() > 0) return make_error("template: line {}: {}: {}", e.line(), kind_label(e.kind()), e.message());
  return make_error("template: {}: {}", kind_label(e.kind()), e.message());
}

using OrderedJson = nlohmann::ordered_json;

Value from_json(const OrderedJson& j, int depth) {
  check_nesting(depth);
  switch (j.type()) {
    case OrderedJson::value_t::null: return Value::none();
    case OrderedJson::value_t::boolean: return Value(j.get<bool>());
    case OrderedJson::value_t::number_integer: return Value(j.get<int64_t>());
    case OrderedJson::value_t::number_unsigned: {
      const uint64_t u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX))
        fail(ErrorKind::kUnsupported, "integer " + std::to_string(u) + " does not fit in 64 bits");
      return Value(static_cast<int64_t>(u));
    }
    case OrderedJson::value_t::number_float: return Value(j.get<double>());
    case OrderedJson::value_t::string: return Value(j.get_ref<const std::string&>());
    case OrderedJson::value_t::array: {
      ValueList items;
      items.reserve(j.size());
      for (const auto& x : j) items.push_back(from_json(x, depth + 1));
      return Value::list(std::move(items));
    }
    case OrderedJson::value_t::object: {
      Value d = Value::dict();
      for (const auto& [k, x] : j.items()) d.dict_obj().set(k, from_json(x, depth + 1));
      return d;
    }
    default: fail(ErrorKind::kUnsupported, "binary JSON values are not supported");
  }
}

std::tm local_now() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  return tm;
}

}  // namespace

Expected<Template> Template::parse(std::string_view source) {
  try {
    Template t;
    t.program_ = std::make_shared<const Program>(jinja::parse(tokenize(source)));
    return t;
  } catch (const JinjaError& e) {
    return to_error(e);
  } catch (const std::exception& e) {
    return make_error("template: internal error while parsing: {}", e.what());
  }
}

Expected<std::string> Template::render(const Value& vars, const RenderOptions& opts) const {
  InterpOptions io;
  io.immutable = opts.immutable;
  io.now = opts.now ? *opts.now : local_now();
  io.limits = opts.limits;
  try {
    Value globals = Value::dict();
    add_globals(globals.dict_obj());
    Interp interp(io, globals);
    return interp.render(*program_, vars);
  } catch (const JinjaError& e) {
    return to_error(e);
  } catch (const std::bad_alloc&) {
    return make_error("template: out of memory while rendering");
  } catch (const std::exception& e) {  // a bug; reported rather than crashing the caller
    return make_error("template: internal error while rendering: {}", e.what());
  }
}

Expected<Value> value_from_json(std::string_view json_text) {
  OrderedJson j = OrderedJson::parse(json_text, nullptr, false);
  if (j.is_discarded()) return make_error("invalid JSON");
  try {
    return from_json(j, 0);
  } catch (const JinjaError& e) {
    return make_error("JSON input: {}", e.message());
  }
}

Expected<std::tm> parse_now(std::string_view text) {
  std::tm tm{};
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, s = 0;
  const std::string str(text);
  const int n = std::sscanf(str.c_str(), "%4d-%2d-%2d%*1[T ]%2d:%2d:%2d", &y, &mo, &d, &h, &mi, &s);
  if (n < 3 || mo < 1 || mo > 12 || d < 1 || d > 31 || h < 0 || h > 23 || mi < 0 || mi > 59 || s < 0 || s > 60)
    return make_error("invalid date '{}': expected YYYY-MM-DD or YYYY-MM-DDTHH:MM:SS", text);
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = s;
  tm.tm_isdst = -1;
  // timegm normalizes and fills the weekday and day of the year.
  std::tm copy = tm;
  const std::time_t t = timegm(&copy);
  gmtime_r(&t, &tm);
  tm.tm_isdst = -1;
  return tm;
}

}  // namespace minfer::jinja
