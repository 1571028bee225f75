// gguf_parse: the bounds-checked parser of one GGUF image held in memory.
// Nothing read from the file is trusted: every count is checked against the bytes left before
// anything is allocated, and every tensor's extent against the data section.
#include <algorithm>
#include <cstring>
#include <limits>
#include <unordered_set>

#include "gguf/reader.h"

namespace minfer {
namespace {

constexpr int kMaxArrayDepth = 8;    // nested arrays deeper than this are refused
constexpr uint64_t kMaxNameLen = 1u << 16;  // key and tensor-name length limit (bytes)

struct ParseError {
  Error error;
};

class Cursor {
 public:
  Cursor(const uint8_t* data, size_t size, std::string_view name)
      : data_(data), size_(size), name_(name) {}

  template <typename... Args>
  [[noreturn]] void fail(fmt::format_string<Args...> f, Args&&... args) const {
    throw ParseError{Error{fmt::format("gguf: '{}': {}", name_,
                                       fmt::format(f, std::forward<Args>(args)...))}};
  }

  size_t pos() const { return pos_; }
  size_t left() const { return size_ - pos_; }

  template <typename T>
  T read(std::string_view field) {
    if (left() < sizeof(T))
      fail("truncated at offset {:#x} reading {} ({} bytes needed, {} left)", pos_, field,
           sizeof(T), left());
    T v;
    std::memcpy(&v, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  // A view into the parsed buffer: copy what outlives it.
  std::string_view read_string_view(std::string_view field, uint64_t max_len) {
    const uint64_t n = read<uint64_t>(field);
    if (n > left())
      fail("{} length {} at offset {:#x} runs past end of file ({} bytes left)", field, n,
           pos_ - 8, left());
    if (n > max_len) fail("{} length {} exceeds the limit {}", field, n, max_len);
    return {reinterpret_cast<const char*>(take(static_cast<size_t>(n), field)), static_cast<size_t>(n)};
  }
  std::string read_string(std::string_view field, uint64_t max_len) {
    return std::string(read_string_view(field, max_len));
  }

  const uint8_t* take(size_t n, std::string_view field) {
    if (n > left())
      fail("truncated at offset {:#x} reading {} ({} bytes needed, {} left)", pos_, field, n, left());
    const uint8_t* p = data_ + pos_;
    pos_ += n;
    return p;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
  std::string_view name_;
};

// Smallest encoding of one value of a type, used to bound counts before allocating.
uint64_t min_encoded_size(GgufType t) {
  if (t == GgufType::STRING) return 8;   // length
  if (t == GgufType::ARRAY) return 12;   // element type + length
  return gguf_scalar_size(t);
}

GgufType read_type(Cursor& c, std::string_view what) {
  const uint32_t t = c.read<uint32_t>(what);
  if (t >= kGgufTypeCount) c.fail("{} has invalid value type {} (valid: 0..{})", what, t, kGgufTypeCount - 1);
  return static_cast<GgufType>(t);
}

void check_bool(const Cursor& c, const std::string& key, uint8_t b) {
  if (b > 1) c.fail("key '{}': bool value {} is not 0 or 1", key, b);
}

GgufValue read_value(Cursor& c, GgufType t, const std::string& key, int depth);

// Reads n items of type elem straight into the compact array: no GgufValue per item.
GgufArray read_array(Cursor& c, GgufType elem, size_t n, const std::string& key, int depth) {
  GgufArray a(elem);
  if (elem == GgufType::STRING) {
    // A first pass over a copy of the cursor checks every length and sizes the text buffer.
    const std::string what = fmt::format("key '{}' string", key);
    Cursor probe = c;
    uint64_t text = 0;
    for (size_t i = 0; i < n; ++i) {
      text += probe.read_string_view(what, c.left()).size();
      if (text > GgufArray::kMaxTextBytes)
        c.fail("key '{}': string array holds more than {} bytes of text (at item {} of {})", key,
               GgufArray::kMaxTextBytes, i, n);
    }
    a.reserve(n, static_cast<size_t>(text));
    for (size_t i = 0; i < n; ++i) a.push_string(c.read_string_view(what, c.left()));
  } else if (elem == GgufType::ARRAY) {
    a.reserve(n);
    for (size_t i = 0; i < n; ++i) a.push_back(read_value(c, elem, key, depth + 1));
  } else {
    const uint8_t* p = c.take(n * gguf_scalar_size(elem), key);
    if (elem == GgufType::BOOL)
      for (size_t i = 0; i < n; ++i) check_bool(c, key, p[i]);
    a.append_scalars(p, n);
  }
  return a;
}

GgufValue read_value(Cursor& c, GgufType t, const std::string& key, int depth) {
  using S = GgufValue::Storage;
  switch (t) {
    case GgufType::U8: return GgufValue(S(c.read<uint8_t>(key)));
    case GgufType::I8: return GgufValue(S(c.read<int8_t>(key)));
    case GgufType::U16: return GgufValue(S(c.read<uint16_t>(key)));
    case GgufType::I16: return GgufValue(S(c.read<int16_t>(key)));
    case GgufType::U32: return GgufValue(S(c.read<uint32_t>(key)));
    case GgufType::I32: return GgufValue(S(c.read<int32_t>(key)));
    case GgufType::F32: return GgufValue(S(c.read<float>(key)));
    case GgufType::U64: return GgufValue(S(c.read<uint64_t>(key)));
    case GgufType::I64: return GgufValue(S(c.read<int64_t>(key)));
    case GgufType::F64: return GgufValue(S(c.read<double>(key)));
    case GgufType::BOOL: {
      const uint8_t b = c.read<uint8_t>(key);
      check_bool(c, key, b);
      return GgufValue(S(b != 0));
    }
    case GgufType::STRING:
      return GgufValue::make_string(c.read_string(fmt::format("key '{}' string", key), c.left()));
    case GgufType::ARRAY: {
      if (depth >= kMaxArrayDepth) c.fail("key '{}': arrays nested deeper than {}", key, kMaxArrayDepth);
      const GgufType elem = read_type(c, fmt::format("key '{}' array element type", key));
      const uint64_t n = c.read<uint64_t>(fmt::format("key '{}' array length", key));
      if (n > c.left() / min_encoded_size(elem))
        c.fail("key '{}': array of {} x {} needs at least {} bytes, only {} left", key, n,
               gguf_type_name(elem), n > UINT64_MAX / min_encoded_size(elem) ? UINT64_MAX : n * min_encoded_size(elem), c.left());
      return GgufValue(S(read_array(c, elem, static_cast<size_t>(n), key, depth)));
    }
  }
  c.fail("key '{}': unreachable value type", key);
}

uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

}  // namespace

int64_t GgufTensor::n_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Expected<GgufImage> gguf_parse(const uint8_t* data, size_t size, std::string_view name) {
  try {
    Cursor c(data, size, name);
    GgufImage img;
    const uint32_t magic = c.read<uint32_t>("magic");
    if (magic != kGgufMagic)
      c.fail("bad magic {:#010x} (expected 'GGUF' = {:#010x}); not a GGUF file", magic, kGgufMagic);
    img.version = c.read<uint32_t>("version");
    if (img.version == 0 || (img.version & 0xffffu) == 0)
      c.fail("version {:#x} is invalid (wrong endianness?)", img.version);
    if (img.version == 1) c.fail("GGUF version 1 is not supported (only 2 and 3)");
    if (img.version > 3) c.fail("GGUF version {} is newer than supported (3)", img.version);

    const int64_t n_tensors = c.read<int64_t>("tensor count");
    const int64_t n_kv = c.read<int64_t>("metadata count");
    // Each KV takes >= 8 (key len) + 4 (type) + 1 bytes; each tensor info >= 8 + 4 + 8 + 4 + 8.
    if (n_kv < 0 || static_cast<uint64_t>(n_kv) > c.left() / 13)
      c.fail("metadata count {} is impossible for a file of {} bytes", n_kv, size);
    if (n_tensors < 0 || static_cast<uint64_t>(n_tensors) > c.left() / 32)
      c.fail("tensor count {} is impossible for a file of {} bytes", n_tensors, size);

    std::unordered_set<std::string> keys;
    img.metadata.reserve(static_cast<size_t>(n_kv));
    for (int64_t i = 0; i < n_kv; ++i) {
      std::string key = c.read_string(fmt::format("metadata key #{}", i), kMaxNameLen);
      if (key.empty()) c.fail("metadata key #{} is empty", i);
      if (!keys.insert(key).second) c.fail("duplicate metadata key '{}'", key);
      const GgufType t = read_type(c, fmt::format("key '{}'", key));
      GgufValue v = read_value(c, t, key, 0);
      img.metadata.push_back({std::move(key), std::move(v)});
    }

    for (const GgufKV& kv : img.metadata) {
      if (kv.key != "general.alignment") continue;
      if (kv.value.type() != GgufType::U32)
        c.fail("general.alignment has type {}, expected u32", gguf_type_name(kv.value.type()));
      const uint32_t a = std::get<uint32_t>(kv.value.storage());
      if (a == 0 || (a & (a - 1)) != 0) c.fail("general.alignment {} is not a power of two", a);
      img.alignment = a;
    }

    std::unordered_set<std::string> names;
    img.tensors.reserve(static_cast<size_t>(n_tensors));
    for (int64_t i = 0; i < n_tensors; ++i) {
      GgufTensor t;
      t.name = c.read_string(fmt::format("tensor #{} name", i), kMaxNameLen);
      if (!names.insert(t.name).second) c.fail("duplicate tensor name '{}'", t.name);
      const uint32_t n_dims = c.read<uint32_t>(fmt::format("tensor '{}' n_dims", t.name));
      if (n_dims > kGgufMaxDims)
        c.fail("tensor '{}' has {} dimensions, at most {} allowed", t.name, n_dims, kGgufMaxDims);
      int64_t n_elem = 1;
      for (uint32_t d = 0; d < n_dims; ++d) {
        const int64_t ne = c.read<int64_t>(fmt::format("tensor '{}' ne[{}]", t.name, d));
        if (ne < 0) c.fail("tensor '{}' ne[{}] = {} is negative", t.name, d, ne);
        if (ne != 0 && n_elem > std::numeric_limits<int64_t>::max() / ne)
          c.fail("tensor '{}' element count overflows at ne[{}] = {}", t.name, d, ne);
        n_elem *= ne;
        t.shape.push_back(ne);
      }
      const uint32_t type_id = c.read<uint32_t>(fmt::format("tensor '{}' type", t.name));
      const auto info = dtype_info(type_id);
      if (!info) c.fail("tensor '{}' has unknown type id {}", t.name, type_id);
      t.type = info->type;
      const int64_t ne0 = t.shape.empty() ? 1 : t.shape[0];
      if (ne0 % info->block_elems != 0)
        c.fail("tensor '{}' ({}) ne[0] = {} is not a multiple of the block size {}", t.name,
               info->name, ne0, info->block_elems);
      t.offset = c.read<uint64_t>(fmt::format("tensor '{}' offset", t.name));
      const uint64_t n_blocks = static_cast<uint64_t>(n_elem) / info->block_elems;
      if (n_blocks > std::numeric_limits<uint64_t>::max() / info->block_bytes)
        c.fail("tensor '{}' byte size overflows", t.name);
      t.n_bytes = static_cast<size_t>(n_blocks * info->block_bytes);
      img.tensors.push_back(std::move(t));
    }

    img.data_offset = align_up(c.pos(), img.alignment);
    const uint64_t data_size = img.data_offset <= size ? size - img.data_offset : 0;
    for (GgufTensor& t : img.tensors) {
      if (t.offset % img.alignment != 0)
        c.fail("tensor '{}' offset {:#x} is not a multiple of the alignment {}", t.name, t.offset,
               img.alignment);
      if (t.offset > data_size || t.n_bytes > data_size - t.offset)
        c.fail("tensor '{}' ({} bytes at data offset {:#x}) ends at {:#x}, past end of file {:#x}",
               t.name, t.n_bytes, t.offset, img.data_offset + t.offset + t.n_bytes, size);
      // A zero-byte tensor in a file whose data section is absent points at the end, not past it.
      t.data = t.n_bytes ? data + img.data_offset + t.offset
                         : data + std::min<uint64_t>(img.data_offset + t.offset, size);
    }
    // Tensors must not overlap one another.
    std::vector<const GgufTensor*> by_offset;
    for (const GgufTensor& t : img.tensors) by_offset.push_back(&t);
    std::sort(by_offset.begin(), by_offset.end(),
              [](const GgufTensor* a, const GgufTensor* b) { return a->offset < b->offset; });
    for (size_t i = 1; i < by_offset.size(); ++i) {
      const GgufTensor& a = *by_offset[i - 1];
      const GgufTensor& b = *by_offset[i];
      if (a.offset + a.n_bytes > b.offset)
        c.fail("tensors '{}' [{:#x}, {:#x}) and '{}' [{:#x}, ...) overlap", a.name, a.offset,
               a.offset + a.n_bytes, b.name, b.offset);
    }
    return img;
  } catch (const ParseError& e) {
    return e.error;
  } catch (const std::bad_alloc&) {
    return make_error("gguf: '{}': out of memory while parsing", name);
  }
}

}  // namespace minfer
