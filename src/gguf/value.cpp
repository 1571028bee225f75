#include "gguf/value.h"

#include <fmt/format.h>

#include <cstring>
#include <limits>

#include "core/status.h"

namespace minfer {

std::string_view gguf_type_name(GgufType t) {
  static constexpr std::string_view kNames[kGgufTypeCount] = {
      "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64"};
  const auto i = static_cast<uint32_t>(t);
  return i < kGgufTypeCount ? kNames[i] : std::string_view("invalid");
}

size_t gguf_scalar_size(GgufType t) {
  switch (t) {
    case GgufType::U8: case GgufType::I8: case GgufType::BOOL: return 1;
    case GgufType::U16: case GgufType::I16: return 2;
    case GgufType::U32: case GgufType::I32: case GgufType::F32: return 4;
    case GgufType::U64: case GgufType::I64: case GgufType::F64: return 8;
    case GgufType::STRING: case GgufType::ARRAY: return 0;
  }
  return 0;
}

// ---- GgufArray ----

GgufArray::GgufArray() : GgufArray(GgufType::U8) {}

GgufArray::GgufArray(GgufType elem) : elem_type_(elem) {
  MINFER_ASSERT(static_cast<uint32_t>(elem) < kGgufTypeCount);
  if (elem == GgufType::STRING) offsets_.push_back(0);
}

GgufArray GgufArray::strings(const std::vector<std::string>& texts) {
  GgufArray a(GgufType::STRING);
  size_t total = 0;
  for (const std::string& s : texts) total += s.size();
  a.reserve(texts.size(), total);
  for (const std::string& s : texts) a.push_string(s);
  return a;
}

namespace {

template <typename T>
GgufValue load(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return GgufValue(GgufValue::Storage(v));
}

}  // namespace

GgufValue GgufArray::at(size_t i) const {
  MINFER_ASSERT(i < n_);
  const char* p = bytes_.data() + i * gguf_scalar_size(elem_type_);
  switch (elem_type_) {
    case GgufType::U8: return load<uint8_t>(p);
    case GgufType::I8: return load<int8_t>(p);
    case GgufType::U16: return load<uint16_t>(p);
    case GgufType::I16: return load<int16_t>(p);
    case GgufType::U32: return load<uint32_t>(p);
    case GgufType::I32: return load<int32_t>(p);
    case GgufType::F32: return load<float>(p);
    case GgufType::U64: return load<uint64_t>(p);
    case GgufType::I64: return load<int64_t>(p);
    case GgufType::F64: return load<double>(p);
    case GgufType::BOOL: return GgufValue(GgufValue::Storage(*p != 0));
    case GgufType::STRING: return GgufValue::make_string(std::string(string_at(i)));
    case GgufType::ARRAY: return nested_[i];
  }
  MINFER_ASSERT(false);
  return {};
}

std::string_view GgufArray::string_at(size_t i) const {
  MINFER_ASSERT(elem_type_ == GgufType::STRING && i < n_);
  return std::string_view(bytes_).substr(offsets_[i], offsets_[i + 1] - offsets_[i]);
}

std::optional<int64_t> GgufArray::int_at(size_t i) const {
  if (gguf_scalar_size(elem_type_) == 0) return std::nullopt;  // strings and arrays
  return at(i).as_int();
}

std::optional<double> GgufArray::float_at(size_t i) const {
  if (gguf_scalar_size(elem_type_) == 0) return std::nullopt;
  return at(i).as_float();
}

const GgufValue& GgufArray::array_at(size_t i) const {
  MINFER_ASSERT(elem_type_ == GgufType::ARRAY && i < n_);
  return nested_[i];
}

std::string_view GgufArray::scalar_bytes() const {
  MINFER_ASSERT(gguf_scalar_size(elem_type_) != 0);
  return bytes_;
}

void GgufArray::push_back(GgufValue v) {
  MINFER_ASSERT(v.type() == elem_type_);
  if (elem_type_ == GgufType::ARRAY) {
    nested_.push_back(std::move(v));
    ++n_;
    return;
  }
  std::visit(
      [this](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::string>) {
          push_string(x);
        } else if constexpr (std::is_same_v<T, bool>) {
          const uint8_t b = x ? 1 : 0;
          append_scalars(&b, 1);
        } else if constexpr (!std::is_same_v<T, GgufArray>) {
          append_scalars(&x, 1);
        }
      },
      v.storage());
}

void GgufArray::push_string(std::string_view s) {
  MINFER_ASSERT(elem_type_ == GgufType::STRING);
  MINFER_ASSERT(s.size() <= kMaxTextBytes - bytes_.size());
  bytes_.append(s);
  offsets_.push_back(static_cast<uint32_t>(bytes_.size()));
  ++n_;
}

void GgufArray::append_scalars(const void* values, size_t n) {
  const size_t size = gguf_scalar_size(elem_type_);
  MINFER_ASSERT(size != 0);
  bytes_.append(static_cast<const char*>(values), n * size);
  n_ += n;
}

void GgufArray::reserve(size_t n, size_t text_bytes) {
  switch (elem_type_) {
    case GgufType::STRING:
      offsets_.reserve(offsets_.size() + n);
      bytes_.reserve(bytes_.size() + text_bytes);
      break;
    case GgufType::ARRAY: nested_.reserve(nested_.size() + n); break;
    default: bytes_.reserve(bytes_.size() + n * gguf_scalar_size(elem_type_)); break;
  }
}

// ---- GgufValue ----

GgufValue GgufValue::make_array(GgufType elem, std::vector<GgufValue> items) {
  GgufArray a(elem);
  for (GgufValue& v : items) a.push_back(std::move(v));
  return GgufValue(Storage(std::move(a)));
}

GgufValue GgufValue::make_string_array(const std::vector<std::string>& items) {
  return GgufValue(Storage(GgufArray::strings(items)));
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
    std::string out = fmt::format("[{}; {}] [", gguf_type_name(a->elem_type()), a->size());
    for (size_t i = 0; i < a->size() && i < max_items; ++i) {
      if (i) out += ", ";
      out += a->at(i).to_display(max_items);
    }
    if (a->size() > max_items) out += ", ...";
    return out + "]";
  }
  if (auto b = as_bool()) return *b ? "true" : "false";
  if (type() == GgufType::F32) return fmt::format("{}", std::get<float>(v_));
  if (type() == GgufType::F64) return fmt::format("{}", std::get<double>(v_));
  if (type() == GgufType::U64) return fmt::format("{}", std::get<uint64_t>(v_));
  return fmt::format("{}", as_int().value_or(0));
}

}  // namespace minfer
