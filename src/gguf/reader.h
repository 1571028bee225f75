// GGUF v2/v3 reader. Files are mmap'd read-only; tensors are zero-copy views into the map.
// Every count, length, type, shape and offset is checked before use; errors name the file,
// the field and the bad value. A split model (NAME-00001-of-0000N.gguf) opens from its first
// part and presents one metadata table (the first part's) and one tensor index.
//
//   auto f = GgufFile::open("model.gguf");
//   if (!f) { fprintf(stderr, "%s\n", f.error().message.c_str()); return 1; }
//   const GgufTensor* t = f->find_tensor("blk.0.attn_q.weight");
//   uint32_t n_layer = f->get_uint("llama.block_count").value_or(0);
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "gguf/value.h"

namespace minfer {

constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" little-endian
constexpr uint32_t kGgufDefaultAlignment = 32;
constexpr int kGgufMaxDims = 4;

struct GgufTensor {
  std::string name;
  DType type;
  std::vector<int64_t> shape;  // GGUF order: shape[0] = ne[0], the contiguous dimension
  uint64_t offset = 0;         // from the start of its part's data section
  uint32_t part = 0;           // index of the part file holding it
  const uint8_t* data = nullptr;  // zero-copy view into the mapped part
  size_t n_bytes = 0;

  int64_t n_elements() const;
  int64_t n_rows() const { return shape.empty() ? 1 : n_elements() / shape[0]; }
  std::span<const uint8_t> bytes() const { return {data, n_bytes}; }
};

// One parsed GGUF image (a single part). Used by GgufFile and directly by the fuzz target.
struct GgufImage {
  uint32_t version = 0;
  uint32_t alignment = kGgufDefaultAlignment;
  std::vector<GgufKV> metadata;
  std::vector<GgufTensor> tensors;  // data pointers point into the parsed buffer
  uint64_t data_offset = 0;         // start of the data section in the buffer
};

// Parses a GGUF image held in memory. `name` is used in error messages.
Expected<GgufImage> gguf_parse(const uint8_t* data, size_t size, std::string_view name);

struct GgufPart {
  std::string path;
  uint64_t file_size = 0;
  uint64_t data_offset = 0;
  size_t n_tensors = 0;
};

class MappedFile;

class GgufFile {
 public:
  // Opens and maps a GGUF file; for a split model, pass the first part.
  static Expected<GgufFile> open(const std::string& path);

  GgufFile(GgufFile&&) noexcept;
  GgufFile& operator=(GgufFile&&) noexcept;
  ~GgufFile();

  uint32_t version() const { return version_; }
  uint32_t alignment() const { return alignment_; }
  const std::vector<GgufKV>& metadata() const { return metadata_; }
  const std::vector<GgufTensor>& tensors() const { return tensors_; }
  const std::vector<GgufPart>& parts() const { return parts_; }
  const std::string& path() const { return parts_.front().path; }
  uint64_t total_file_size() const;

  const GgufValue* find(std::string_view key) const;
  const GgufTensor* find_tensor(std::string_view name) const;

  // Typed lookups: an error names the key when it is missing or of the wrong type.
  Expected<uint64_t> get_uint(std::string_view key) const;
  Expected<int64_t> get_int(std::string_view key) const;
  Expected<double> get_float(std::string_view key) const;
  Expected<bool> get_bool(std::string_view key) const;
  Expected<std::string> get_string(std::string_view key) const;
  Expected<const GgufArray*> get_array(std::string_view key) const;

 private:
  GgufFile();
  uint32_t version_ = 0;
  uint32_t alignment_ = kGgufDefaultAlignment;
  std::vector<GgufKV> metadata_;
  std::vector<GgufTensor> tensors_;
  std::vector<GgufPart> parts_;
  std::vector<std::unique_ptr<MappedFile>> maps_;
};

// "NAME-00001-of-00003.gguf" -> {"NAME", 1, 3}; nullopt when the path is not a split name.
struct SplitName {
  std::string prefix;  // path up to "-00001-of-00003.gguf"
  int index = 0;       // 1-based
  int count = 0;
};
std::optional<SplitName> parse_split_name(std::string_view path);
std::string make_split_name(std::string_view prefix, int index, int count);

}  // namespace minfer
