// GgufFile: maps a GGUF file (and the other parts of a split model) and merges them into one
// metadata table and one tensor index.
#include "gguf/reader.h"

#include <unordered_set>

#include "gguf/mapped-file.h"

namespace minfer {

GgufFile::GgufFile() = default;
GgufFile::GgufFile(GgufFile&&) noexcept = default;
GgufFile& GgufFile::operator=(GgufFile&&) noexcept = default;
GgufFile::~GgufFile() = default;

namespace {

std::optional<int64_t> find_int(const GgufImage& img, std::string_view key) {
  for (const GgufKV& kv : img.metadata)
    if (kv.key == key) return kv.value.as_int();
  return std::nullopt;
}

}  // namespace

Expected<GgufFile> GgufFile::open(const std::string& path) {
  GgufFile f;
  auto first_map = MappedFile::open(path);
  if (!first_map) return first_map.error();
  auto first = gguf_parse((*first_map)->data(), (*first_map)->size(), path);
  if (!first) return first.error();

  f.version_ = first->version;
  f.alignment_ = first->alignment;
  f.metadata_ = std::move(first->metadata);

  int64_t split_count = 1;
  if (const GgufValue* v = f.find("split.count")) {
    auto n = v->as_int();
    if (!n || *n < 1 || *n > 99999)
      return make_error("gguf: '{}': split.count {} is not a valid part count (1..99999)", path,
                        v->to_display());
    split_count = *n;
  }
  if (const GgufValue* v = f.find("split.no")) {
    auto n = v->as_int();
    if (!n || *n != 0)
      return make_error("gguf: '{}' is part {} of a split model; open the first part (split.no 0)",
                        path, v->to_display());
  }

  auto add_part = [&f](const std::string& part_path, std::unique_ptr<MappedFile> map,
                       GgufImage& img) {
    const uint32_t index = static_cast<uint32_t>(f.parts_.size());
    for (GgufTensor& t : img.tensors) {
      t.part = index;
      f.tensors_.push_back(std::move(t));
    }
    f.parts_.push_back({part_path, static_cast<uint64_t>(map->size()), img.data_offset,
                        img.tensors.size()});
    // The metadata and tensor infos were copied out: the header pages (~5 MiB for a 150k-token
    // vocabulary) need not stay resident. Tensor data starts at or after data_offset.
    map->drop_pages(static_cast<size_t>(img.data_offset));
    f.maps_.push_back(std::move(map));
  };
  add_part(path, std::move(*first_map), *first);

  if (split_count > 1) {
    auto name = parse_split_name(path);
    if (!name)
      return make_error("gguf: '{}' has split.count {} but its name is not NAME-00001-of-{:05d}.gguf",
                        path, split_count, split_count);
    if (name->count != split_count)
      return make_error("gguf: '{}': file name says {} parts, split.count says {}", path,
                        name->count, split_count);
    for (int i = 2; i <= split_count; ++i) {
      const std::string part_path = make_split_name(name->prefix, i, static_cast<int>(split_count));
      auto map = MappedFile::open(part_path);
      if (!map)
        return make_error("gguf: split part {} of {} of '{}' is missing: {}", i, split_count, path,
                          map.error().message);
      auto img = gguf_parse((*map)->data(), (*map)->size(), part_path);
      if (!img) return img.error();
      const auto no = find_int(*img, "split.no");
      if (!no || *no != i - 1)
        return make_error("gguf: '{}': split.no is {}, expected {}", part_path,
                          no ? std::to_string(*no) : std::string("missing"), i - 1);
      const auto cnt = find_int(*img, "split.count");
      if (!cnt || *cnt != split_count)
        return make_error("gguf: '{}': split.count is {}, expected {}", part_path,
                          cnt ? std::to_string(*cnt) : std::string("missing"), split_count);
      add_part(part_path, std::move(*map), *img);
    }
  }

  if (const GgufValue* v = f.find("split.tensors.count")) {
    auto n = v->as_int();
    if (!n || *n != static_cast<int64_t>(f.tensors_.size()))
      return make_error("gguf: '{}': split.tensors.count is {} but the parts hold {} tensors", path,
                        v->to_display(), f.tensors_.size());
  }
  std::unordered_set<std::string_view> names;
  for (const GgufTensor& t : f.tensors_)
    if (!names.insert(t.name).second)
      return make_error("gguf: '{}': tensor '{}' appears in more than one part", path, t.name);
  return f;
}

uint64_t GgufFile::total_file_size() const {
  uint64_t n = 0;
  for (const GgufPart& p : parts_) n += p.file_size;
  return n;
}

const GgufValue* GgufFile::find(std::string_view key) const {
  for (const GgufKV& kv : metadata_)
    if (kv.key == key) return &kv.value;
  return nullptr;
}

const GgufTensor* GgufFile::find_tensor(std::string_view name) const {
  for (const GgufTensor& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}

namespace {

template <typename T>
Expected<T> typed(const GgufFile& f, std::string_view key, const char* want,
                  std::optional<T> (*get)(const GgufValue&)) {
  const GgufValue* v = f.find(key);
  if (!v) return make_error("gguf: '{}': missing metadata key '{}'", f.path(), key);
  auto x = get(*v);
  if (!x)
    return make_error("gguf: '{}': key '{}' is {} {}, expected {}", f.path(), key,
                      gguf_type_name(v->type()), v->to_display(), want);
  return *x;
}

}  // namespace

Expected<uint64_t> GgufFile::get_uint(std::string_view key) const {
  return typed<uint64_t>(*this, key, "a non-negative integer",
                         [](const GgufValue& v) { return v.as_uint(); });
}
Expected<int64_t> GgufFile::get_int(std::string_view key) const {
  return typed<int64_t>(*this, key, "an integer", [](const GgufValue& v) { return v.as_int(); });
}
Expected<double> GgufFile::get_float(std::string_view key) const {
  return typed<double>(*this, key, "a number", [](const GgufValue& v) { return v.as_float(); });
}
Expected<bool> GgufFile::get_bool(std::string_view key) const {
  return typed<bool>(*this, key, "a bool", [](const GgufValue& v) { return v.as_bool(); });
}
Expected<std::string> GgufFile::get_string(std::string_view key) const {
  return typed<std::string>(*this, key, "a string", [](const GgufValue& v) {
    const std::string* s = v.as_string();
    return s ? std::optional<std::string>(*s) : std::nullopt;
  });
}
Expected<const GgufArray*> GgufFile::get_array(std::string_view key) const {
  return typed<const GgufArray*>(*this, key, "an array", [](const GgufValue& v) {
    const GgufArray* a = v.as_array();
    return a ? std::optional<const GgufArray*>(a) : std::nullopt;
  });
}

}  // namespace minfer
