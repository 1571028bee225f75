// GgufWriter: serialises metadata and tensor infos, then streams tensor bytes from producers.
// Output goes to PATH.tmp and is renamed into place only when complete.
#include "gguf/writer.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "gguf/reader.h"

namespace minfer {
namespace {

uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

class Sink {
 public:
  Sink(std::FILE* f, std::string path) : f_(f), path_(std::move(path)) {}
  void bytes(const void* p, size_t n) {
    if (ok_ && n && std::fwrite(p, 1, n, f_) != n) {
      ok_ = false;
      err_ = errno;
    }
    pos_ += n;
  }
  template <typename T>
  void pod(T v) { bytes(&v, sizeof(T)); }
  void string(std::string_view s) {
    pod<uint64_t>(s.size());
    bytes(s.data(), s.size());
  }
  void pad_to(uint64_t alignment) {
    static const uint8_t kZeros[256] = {};
    uint64_t n = align_up(pos_, alignment) - pos_;
    while (n > 0) {
      const size_t k = n > sizeof(kZeros) ? sizeof(kZeros) : static_cast<size_t>(n);
      bytes(kZeros, k);
      n -= k;
    }
  }
  uint64_t pos() const { return pos_; }
  Status status() const {
    if (ok_) return Status::ok();
    return make_error("gguf: writing '{}' failed: {}", path_, std::strerror(err_));
  }

 private:
  std::FILE* f_;
  std::string path_;
  uint64_t pos_ = 0;
  bool ok_ = true;
  int err_ = 0;
};

void write_value(Sink& s, const GgufValue& v) {
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::string>) {
          s.string(x);
        } else if constexpr (std::is_same_v<T, GgufArray>) {
          s.pod<uint32_t>(static_cast<uint32_t>(x.elem_type()));
          s.pod<uint64_t>(x.size());
          // Items carry no type tag; a nested array item writes its own element type + length.
          if (x.elem_type() == GgufType::STRING) {
            for (size_t i = 0; i < x.size(); ++i) s.string(x.string_at(i));
          } else if (x.elem_type() == GgufType::ARRAY) {
            for (size_t i = 0; i < x.size(); ++i) write_value(s, x.array_at(i));
          } else {
            const std::string_view b = x.scalar_bytes();  // already little-endian, bools 0/1
            s.bytes(b.data(), b.size());
          }
        } else if constexpr (std::is_same_v<T, bool>) {
          s.pod<uint8_t>(x ? 1 : 0);
        } else {
          s.pod<T>(x);
        }
      },
      v.storage());
}

}  // namespace

void GgufWriter::add(const std::string& key, GgufValue value) {
  for (GgufKV& kv : kvs_)
    if (kv.key == key) {
      kv.value = std::move(value);
      return;
    }
  kvs_.push_back({key, std::move(value)});
}

void GgufWriter::remove(const std::string& key) {
  std::erase_if(kvs_, [&](const GgufKV& kv) { return kv.key == key; });
}

void GgufWriter::add_tensor(std::string name, DType type, std::vector<int64_t> shape,
                            Producer produce) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  const DTypeInfo& info = dtype_info(type);
  MINFER_ASSERT(shape.empty() || shape[0] % info.block_elems == 0);
  const size_t n_bytes = static_cast<size_t>(n / info.block_elems) * info.block_bytes;
  tensors_.push_back({std::move(name), type, std::move(shape), n_bytes, std::move(produce)});
}

void GgufWriter::add_tensor(std::string name, DType type, std::vector<int64_t> shape,
                            std::vector<uint8_t> data) {
  auto owned = std::make_shared<std::vector<uint8_t>>(std::move(data));
  add_tensor(std::move(name), type, std::move(shape), [owned](uint8_t* dst, size_t n) -> Status {
    if (owned->size() != n)
      return make_error("gguf writer: tensor data has {} bytes, expected {}", owned->size(), n);
    std::memcpy(dst, owned->data(), n);
    return Status::ok();
  });
}

void GgufWriter::add_tensor_view(std::string name, DType type, std::vector<int64_t> shape,
                                 const void* data) {
  add_tensor(std::move(name), type, std::move(shape), [data](uint8_t* dst, size_t n) -> Status {
    std::memcpy(dst, data, n);
    return Status::ok();
  });
}

Status GgufWriter::write_part(const std::string& path, const std::vector<GgufKV>& kvs,
                              size_t first, size_t last) const {
  if (alignment_ == 0 || (alignment_ & (alignment_ - 1)) != 0)
    return make_error("gguf writer: alignment {} is not a power of two", alignment_);
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) return make_error("gguf: cannot create '{}': {}", tmp, std::strerror(errno));
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> guard(f, std::fclose);
  std::vector<char> buf(1 << 20);
  std::setvbuf(f, buf.data(), _IOFBF, buf.size());
  Sink s(f, tmp);

  s.pod<uint32_t>(kGgufMagic);
  s.pod<uint32_t>(3);
  s.pod<int64_t>(static_cast<int64_t>(last - first));
  s.pod<int64_t>(static_cast<int64_t>(kvs.size()));
  for (const GgufKV& kv : kvs) {
    s.string(kv.key);
    s.pod<uint32_t>(static_cast<uint32_t>(kv.value.type()));
    write_value(s, kv.value);
  }
  uint64_t offset = 0;
  for (size_t i = first; i < last; ++i) {
    const PendingTensor& t = tensors_[i];
    s.string(t.name);
    s.pod<uint32_t>(static_cast<uint32_t>(t.shape.size()));
    for (int64_t d : t.shape) s.pod<int64_t>(d);
    s.pod<uint32_t>(static_cast<uint32_t>(t.type));
    s.pod<uint64_t>(offset);
    offset = align_up(offset + t.n_bytes, alignment_);
  }
  s.pad_to(alignment_);
  std::vector<uint8_t> data;
  for (size_t i = first; i < last; ++i) {
    const PendingTensor& t = tensors_[i];
    data.assign(t.n_bytes, 0);
    Status st = t.produce(data.data(), t.n_bytes);
    if (!st) {
      guard.reset();
      std::remove(tmp.c_str());
      return make_error("gguf: tensor '{}': {}", t.name, st.error().message);
    }
    s.bytes(data.data(), data.size());
    s.pad_to(alignment_);
  }
  Status st = s.status();
  const bool closed = std::fclose(guard.release()) == 0;
  if (st && !closed) st = make_error("gguf: closing '{}' failed: {}", tmp, std::strerror(errno));
  if (st && std::rename(tmp.c_str(), path.c_str()) != 0)
    st = make_error("gguf: cannot rename '{}' to '{}': {}", tmp, path, std::strerror(errno));
  if (!st) std::remove(tmp.c_str());
  return st;
}

Status GgufWriter::write(const std::string& path) const {
  std::vector<GgufKV> kvs = kvs_;
  if (alignment_ != kGgufDefaultAlignment) {
    bool found = false;
    for (GgufKV& kv : kvs)
      if (kv.key == "general.alignment") {
        kv.value = GgufValue(GgufValue::Storage(alignment_));
        found = true;
      }
    if (!found) kvs.push_back({"general.alignment", GgufValue(GgufValue::Storage(alignment_))});
  }
  return write_part(path, kvs, 0, tensors_.size());
}

Expected<std::vector<std::string>> GgufWriter::write_split(const std::string& prefix,
                                                           const SplitOptions& opt) const {
  // Group tensors into parts in order.
  std::vector<std::pair<size_t, size_t>> ranges;
  size_t begin = 0;
  uint64_t bytes = 0;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const bool full_count = opt.max_tensors && i - begin >= opt.max_tensors;
    const bool full_bytes = opt.max_bytes && i > begin && bytes + tensors_[i].n_bytes > opt.max_bytes;
    if (full_count || full_bytes) {
      ranges.emplace_back(begin, i);
      begin = i;
      bytes = 0;
    }
    bytes += tensors_[i].n_bytes;
  }
  ranges.emplace_back(begin, tensors_.size());
  if (ranges.size() > 99999) return make_error("gguf writer: {} parts exceed 99999", ranges.size());

  const auto count = static_cast<uint16_t>(ranges.size());
  std::vector<std::string> paths;
  for (size_t p = 0; p < ranges.size(); ++p) {
    std::vector<GgufKV> kvs;
    if (p == 0) {
      kvs = kvs_;
      if (alignment_ != kGgufDefaultAlignment)
        kvs.push_back({"general.alignment", GgufValue(GgufValue::Storage(alignment_))});
    }
    std::erase_if(kvs, [](const GgufKV& kv) { return kv.key.starts_with("split."); });
    kvs.push_back({"split.no", GgufValue(GgufValue::Storage(static_cast<uint16_t>(p)))});
    kvs.push_back({"split.count", GgufValue(GgufValue::Storage(count))});
    kvs.push_back({"split.tensors.count",
                   GgufValue(GgufValue::Storage(static_cast<int32_t>(tensors_.size())))});
    if (p > 0 && alignment_ != kGgufDefaultAlignment)
      kvs.push_back({"general.alignment", GgufValue(GgufValue::Storage(alignment_))});
    const std::string path = make_split_name(prefix, static_cast<int>(p + 1), count);
    MINFER_TRY(write_part(path, kvs, ranges[p].first, ranges[p].second));
    paths.push_back(path);
  }
  return paths;
}

}  // namespace minfer
