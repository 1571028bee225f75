// GGUF metadata values: every GGUF value type, including arrays of arrays.
// The variant index equals the GGUF type id, so `v.type()` is a plain cast.
//
//   GgufValue v = GgufValue::make_string("llama");
//   if (auto s = v.as_string()) ...
//   if (auto n = v.as_uint()) ...          // any unsigned/signed integer that fits
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace minfer {

enum class GgufType : uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, BOOL = 7,
  STRING = 8, ARRAY = 9, U64 = 10, I64 = 11, F64 = 12,
};
constexpr uint32_t kGgufTypeCount = 13;

std::string_view gguf_type_name(GgufType t);  // "u32", "string", "array"...

class GgufValue;

struct GgufArray {
  GgufType elem_type = GgufType::U8;
  std::vector<GgufValue> items;
};

class GgufValue {
 public:
  using Storage = std::variant<uint8_t, int8_t, uint16_t, int16_t, uint32_t, int32_t, float,
                               bool, std::string, GgufArray, uint64_t, int64_t, double>;

  GgufValue() : v_(uint8_t{0}) {}
  explicit GgufValue(Storage v) : v_(std::move(v)) {}

  static GgufValue make_string(std::string s) { return GgufValue(Storage(std::move(s))); }
  static GgufValue make_array(GgufType elem, std::vector<GgufValue> items) {
    return GgufValue(Storage(GgufArray{elem, std::move(items)}));
  }
  static GgufValue make_string_array(const std::vector<std::string>& items);

  GgufType type() const { return static_cast<GgufType>(v_.index()); }
  const Storage& storage() const { return v_; }

  bool is_integer() const;
  std::optional<int64_t> as_int() const;    // any integer type whose value fits in int64
  std::optional<uint64_t> as_uint() const;  // any integer type whose value is >= 0
  std::optional<double> as_float() const;   // F32/F64 or any integer
  std::optional<bool> as_bool() const;
  const std::string* as_string() const;
  const GgufArray* as_array() const;

  // Short human-readable rendering: arrays show their type, length and first items.
  std::string to_display(size_t max_items = 8) const;

 private:
  Storage v_;
};

struct GgufKV {
  std::string key;
  GgufValue value;
};

}  // namespace minfer
