// GGUF metadata values: every GGUF value type, including arrays of arrays.
// The variant index equals the GGUF type id, so `v.type()` is a plain cast.
//
//   GgufValue v = GgufValue::make_string("llama");
//   if (auto s = v.as_string()) ...
//   if (auto n = v.as_uint()) ...          // any unsigned/signed integer that fits
//   if (const GgufArray* a = v.as_array(); a && a->elem_type() == GgufType::STRING)
//     std::string_view tok = a->string_at(0);
//
// Arrays are stored compactly, at about their size in the file: a 151k-entry token list is one
// text buffer and one offset table, not 151k variants.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

namespace minfer {

enum class GgufType : uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, BOOL = 7,
  STRING = 8, ARRAY = 9, U64 = 10, I64 = 11, F64 = 12,
};
constexpr uint32_t kGgufTypeCount = 13;

std::string_view gguf_type_name(GgufType t);  // "u32", "string", "array"...
// Bytes of one numeric or bool value (bool: 1); 0 for STRING and ARRAY.
size_t gguf_scalar_size(GgufType t);

// The GGUF type of a C++ scalar: gguf_type_of<int32_t>() == GgufType::I32.
template <typename T>
constexpr GgufType gguf_type_of() {
  if constexpr (std::is_same_v<T, uint8_t>) return GgufType::U8;
  else if constexpr (std::is_same_v<T, int8_t>) return GgufType::I8;
  else if constexpr (std::is_same_v<T, uint16_t>) return GgufType::U16;
  else if constexpr (std::is_same_v<T, int16_t>) return GgufType::I16;
  else if constexpr (std::is_same_v<T, uint32_t>) return GgufType::U32;
  else if constexpr (std::is_same_v<T, int32_t>) return GgufType::I32;
  else if constexpr (std::is_same_v<T, float>) return GgufType::F32;
  else if constexpr (std::is_same_v<T, bool>) return GgufType::BOOL;
  else if constexpr (std::is_same_v<T, uint64_t>) return GgufType::U64;
  else if constexpr (std::is_same_v<T, int64_t>) return GgufType::I64;
  else if constexpr (std::is_same_v<T, double>) return GgufType::F64;
  else static_assert(!sizeof(T), "not a GGUF scalar type");
}

class GgufValue;

// A typed GGUF array. Storage by element type:
//   numeric, BOOL: bytes_ = the n values back to back, native little-endian (bool: one 0/1 byte)
//   STRING:        bytes_ = the n texts concatenated; offsets_[n + 1], text i = [off[i], off[i+1])
//   ARRAY:         nested_[n], each an array value (rare; allowed by GGUF)
class GgufArray {
 public:
  static constexpr uint64_t kMaxTextBytes = UINT32_MAX;  // STRING arrays: total text limit

  GgufArray();  // an empty u8 array
  explicit GgufArray(GgufType elem);

  static GgufArray strings(const std::vector<std::string>& texts);
  template <typename T>
  static GgufArray of(const std::vector<T>& values);  // T: a GGUF scalar type (bool too)

  GgufType elem_type() const { return elem_type_; }
  size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }

  GgufValue at(size_t i) const;                 // a copy of item i, any element type
  std::string_view string_at(size_t i) const;   // STRING arrays only; a view into this array
  std::optional<int64_t> int_at(size_t i) const;   // as GgufValue::as_int of item i
  std::optional<double> float_at(size_t i) const;  // as GgufValue::as_float of item i
  const GgufValue& array_at(size_t i) const;    // ARRAY arrays only
  // Numeric and bool arrays: the values' bytes [size() * gguf_scalar_size(elem_type())].
  std::string_view scalar_bytes() const;

  // Appending checks the element type (a mismatch is a bug). STRING text past kMaxTextBytes is
  // a bug too: a parser checks the total first.
  void push_back(GgufValue v);
  void push_string(std::string_view s);
  void append_scalars(const void* values, size_t n);  // n values of elem_type(), little-endian
  void reserve(size_t n, size_t text_bytes = 0);      // room for n more items (and their text)
  size_t text_bytes() const { return elem_type_ == GgufType::STRING ? bytes_.size() : 0; }

 private:
  GgufType elem_type_;
  size_t n_ = 0;
  std::string bytes_;
  std::vector<uint32_t> offsets_;
  std::vector<GgufValue> nested_;
};

class GgufValue {
 public:
  using Storage = std::variant<uint8_t, int8_t, uint16_t, int16_t, uint32_t, int32_t, float,
                               bool, std::string, GgufArray, uint64_t, int64_t, double>;

  GgufValue() : v_(uint8_t{0}) {}
  explicit GgufValue(Storage v) : v_(std::move(v)) {}

  static GgufValue make_string(std::string s) { return GgufValue(Storage(std::move(s))); }
  // Every item must be of type `elem`.
  static GgufValue make_array(GgufType elem, std::vector<GgufValue> items);
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

// Defined once GgufValue is complete: a GgufArray local needs its destructor.
template <typename T>
GgufArray GgufArray::of(const std::vector<T>& values) {
  GgufArray a(gguf_type_of<T>());
  a.reserve(values.size());
  for (const T x : values) {
    const auto v = static_cast<std::conditional_t<std::is_same_v<T, bool>, uint8_t, T>>(x);
    a.append_scalars(&v, 1);
  }
  return a;
}

}  // namespace minfer
