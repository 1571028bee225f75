#include "gguf/value.h"

#include <fmt/format.h>

#include <limits>

namespace minfer {

std::string_view gguf_type_name(GgufType t) {
  static constexpr std::string_view kNames[kGgufTypeCount] = {
      "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64"};
  const auto i = static_cast<uint32_t>(t);
  return i < kGgufTypeCount ? kNames[i] : std::string_view("invalid");
}

GgufValue GgufValue::make_string_array(const std::vector<std::string>& items) {
  std::vector<GgufValue> v;
  v.reserve(items.size());
  for (const auto& s : items) v.push_back(make_string(s));
  return make_array(GgufType::STRING, std::move(v));
}

bool GgufValue::is_integer() const {
  switch (type()) {
    case GgufType::U8: case GgufType::I8: case GgufType::U16: case GgufType::I16:
    case GgufType::U32: case GgufType::I32: case GgufType::U64: case GgufType::I64:
      return true;
    default:
      return false;
  }
}

std::optional<int64_t> GgufValue::as_int() const {
  return std::visit(
      [](const auto& x) -> std::optional<int64_t> {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, bool> || std::is_floating_point_v<T> ||
                      !std::is_integral_v<T>) {
          return std::nullopt;
        } else if constexpr (std::is_same_v<T, uint64_t>) {
          if (x > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
          return static_cast<int64_t>(x);
        } else {
          return static_cast<int64_t>(x);
        }
      },
      v_);
}

std::optional<uint64_t> GgufValue::as_uint() const {
  if (type() == GgufType::U64) return std::get<uint64_t>(v_);
  auto i = as_int();
  if (!i || *i < 0) return std::nullopt;
  return static_cast<uint64_t>(*i);
}

std::optional<double> GgufValue::as_float() const {
  if (type() == GgufType::F32) return std::get<float>(v_);
  if (type() == GgufType::F64) return std::get<double>(v_);
  if (type() == GgufType::U64) return static_cast<double>(std::get<uint64_t>(v_));
  if (auto i = as_int()) return static_cast<double>(*i);
  return std::nullopt;
}

std::optional<bool> GgufValue::as_bool() const {
  if (type() == GgufType::BOOL) return std::get<bool>(v_);
  return std::nullopt;
}

const std::string* GgufValue::as_string() const { return std::get_if<std::string>(&v_); }
const GgufArray* GgufValue::as_array() const { return std::get_if<GgufArray>(&v_); }

std::string GgufValue::to_display(size_t max_items) const {
  if (const auto* s = as_string()) {
    std::string out = "\"";
    const size_t limit = 120;
    for (size_t i = 0; i < s->size() && i < limit; ++i) {
      const char c = (*s)[i];
      if (c == '\n') out += "\\n";
      else if (c == '"') out += "\\\"";
      else if (static_cast<unsigned char>(c) < 0x20) out += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
      else out += c;
    }
    if (s->size() > limit) out += fmt::format("...\" ({} bytes)", s->size());
    else out += "\"";
    return out;
  }
  if (const auto* a = as_array()) {
    std::string out = fmt::format("[{}; {}] [", gguf_type_name(a->elem_type), a->items.size());
    for (size_t i = 0; i < a->items.size() && i < max_items; ++i) {
      if (i) out += ", ";
      out += a->items[i].to_display(max_items);
    }
    if (a->items.size() > max_items) out += ", ...";
    return out + "]";
  }
  if (auto b = as_bool()) return *b ? "true" : "false";
  if (type() == GgufType::F32) return fmt::format("{}", std::get<float>(v_));
  if (type() == GgufType::F64) return fmt::format("{}", std::get<double>(v_));
  if (type() == GgufType::U64) return fmt::format("{}", std::get<uint64_t>(v_));
  return fmt::format("{}", as_int().value_or(0));
}

}  // namespace minfer
