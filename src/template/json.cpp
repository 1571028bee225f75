// Python's json.dumps on template values, byte for byte (the tojson filter as transformers
// defines it: ensure_ascii=False by default, indent, separators, sort_keys).
#include <cmath>

#include <fmt/format.h>

#include "template/builtins.h"
#include "template/error.h"
#include "template/text.h"

namespace minfer::jinja {
namespace {

constexpr int kMaxJsonDepth = 512;

void dump_string(const std::string& s, bool ensure_ascii, std::string& out) {
  out += '"';
  auto escape_cp = [&](uint32_t cp) {
    switch (cp) {
      case '"': out += "\\\""; return;
      case '\\': out += "\\\\"; return;
      case '\n': out += "\\n"; return;
      case '\r': out += "\\r"; return;
      case '\t': out += "\\t"; return;
      case '\b': out += "\\b"; return;
      case '\f': out += "\\f"; return;
      default: break;
    }
    if (cp < 0x20 || (ensure_ascii && cp >= 0x7F)) {
      if (cp >= 0x10000) {
        const uint32_t v = cp - 0x10000;
        out += fmt::format("\\u{:04x}\\u{:04x}", 0xD800 | (v >> 10), 0xDC00 | (v & 0x3FF));
      } else {
        out += fmt::format("\\u{:04x}", cp);
      }
      return;
    }
    utf8_append(out, cp);
  };
  if (is_ascii(s)) {
    for (char c : s) escape_cp(static_cast<unsigned char>(c));
  } else {
    for (uint32_t cp : utf8_decode(s)) escape_cp(cp);
  }
  out += '"';
}

std::string float_json(double f) {
  if (std::isnan(f)) return "NaN";
  if (std::isinf(f)) return f < 0 ? "-Infinity" : "Infinity";
  return float_repr(f);
}

[[noreturn]] void not_serializable(const Value& v) {
  type_error(fmt::format("Object of type {} is not JSON serializable", v.type_name()));
}

class Dumper {
 public:
  explicit Dumper(const JsonOptions& o) : o_(o) {}

  void dump(const Value& v, int depth, std::string& out) {
    if (depth > kMaxJsonDepth) fail(ErrorKind::kLimit, "tojson: value nested deeper than 512 levels (or circular)");
    switch (v.kind()) {
      case Value::Kind::kNone: out += "null"; return;
      case Value::Kind::kBool: out += v.get_bool() ? "true" : "false"; return;
      case Value::Kind::kInt: out += std::to_string(v.get_int()); return;
      case Value::Kind::kFloat: out += float_json(v.as_double()); return;
      case Value::Kind::kString: dump_string(v.str(), o_.ensure_ascii, out); return;
      case Value::Kind::kList:
        if (!v.list_obj().view.empty()) not_serializable(v);
        [[fallthrough]];
      case Value::Kind::kTuple: {
        const ValueList& items = v.items();
        if (items.empty()) {
          out += "[]";
          return;
        }
        out += '[';
        open(depth, out);
        for (size_t i = 0; i < items.size(); ++i) {
          if (i) sep(depth, out);
          dump(items[i], depth + 1, out);
        }
        close(depth, out);
        out += ']';
        return;
      }
      case Value::Kind::kDict: {
        std::vector<const std::pair<Value, Value>*> entries;
        for (const auto& e : v.dict_obj().entries()) entries.push_back(&e);
        if (entries.empty()) {
          out += "{}";
          return;
        }
        if (o_.sort_keys)
          std::stable_sort(entries.begin(), entries.end(),
                           [](auto* a, auto* b) { return values_compare(a->first, b->first) < 0; });
        out += '{';
        open(depth, out);
        bool first = true;
        for (const auto* e : entries) {
          if (!first) sep(depth, out);
          first = false;
          dump_string(key_string(e->first), o_.ensure_ascii, out);
          out += o_.key_sep;
          dump(e->second, depth + 1, out);
        }
        close(depth, out);
        out += '}';
        return;
      }
      default: not_serializable(v);
    }
  }

 private:
  static std::string key_string(const Value& k) {
    switch (k.kind()) {
      case Value::Kind::kString: return k.str();
      case Value::Kind::kBool: return k.get_bool() ? "true" : "false";
      case Value::Kind::kNone: return "null";
      case Value::Kind::kInt: return std::to_string(k.get_int());
      case Value::Kind::kFloat: return float_json(k.as_double());
      default: type_error(fmt::format("keys must be str, int, float, bool or None, not {}", k.type_name()));
    }
  }
  void newline(int level, std::string& out) const {
    out += '\n';
    for (int i = 0; i < level; ++i) out += o_.indent;
  }
  void open(int depth, std::string& out) const {
    if (o_.has_indent) newline(depth + 1, out);
  }
  void sep(int depth, std::string& out) const {
    out += o_.item_sep;
    if (o_.has_indent) newline(depth + 1, out);
  }
  void close(int depth, std::string& out) const {
    if (o_.has_indent) newline(depth, out);
  }

  const JsonOptions& o_;
};

}  // namespace

std::string json_dumps(const Value& v, const JsonOptions& opts) {
  std::string out;
  Dumper(opts).dump(v, 0, out);
  return out;
}

}  // namespace minfer::jinja
