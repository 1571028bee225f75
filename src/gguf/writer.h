// GGUF v3 writer: metadata of every type, tensors, alignment, and split output.
// Tensor bytes are produced at write time by a callback, so a large model never needs to sit
// in memory at once (quantize streams through it).
//
//   GgufWriter w;
//   w.add("general.architecture", GgufValue::make_string("llama"));
//   w.add_u32("llama.block_count", 2);
//   w.add_tensor("token_embd.weight", DType::F32, {64, 100}, std::move(bytes));
//   Status s = w.write("out.gguf");
//   Status s2 = w.write_split("out", {.max_tensors = 10});   // out-00001-of-0000N.gguf ...
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "gguf/value.h"

namespace minfer {

class GgufWriter {
 public:
  // Fills dst (exactly the tensor's byte size). Called once per tensor, in order.
  using Producer = std::function<Status(uint8_t* dst, size_t n_bytes)>;

  void set_alignment(uint32_t alignment) { alignment_ = alignment; }  // power of two
  // Adds or replaces a metadata key (replacing keeps the original position).
  void add(const std::string& key, GgufValue value);
  void add_u32(const std::string& key, uint32_t v) { add(key, GgufValue(GgufValue::Storage(v))); }
  void add_i32(const std::string& key, int32_t v) { add(key, GgufValue(GgufValue::Storage(v))); }
  void add_f32(const std::string& key, float v) { add(key, GgufValue(GgufValue::Storage(v))); }
  void add_bool(const std::string& key, bool v) { add(key, GgufValue(GgufValue::Storage(v))); }
  void add_string(const std::string& key, std::string v) { add(key, GgufValue::make_string(std::move(v))); }
  void remove(const std::string& key);

  // shape in GGUF order (ne[0] first); shape[0] must be a multiple of the type's block size.
  void add_tensor(std::string name, DType type, std::vector<int64_t> shape, Producer produce);
  void add_tensor(std::string name, DType type, std::vector<int64_t> shape, std::vector<uint8_t> data);
  // Borrows data, which must stay valid until write() returns.
  void add_tensor_view(std::string name, DType type, std::vector<int64_t> shape, const void* data);

  size_t n_tensors() const { return tensors_.size(); }

  Status write(const std::string& path) const;

  struct SplitOptions {
    size_t max_tensors = 0;  // tensors per part (0 = no limit)
    uint64_t max_bytes = 0;  // tensor bytes per part (0 = no limit); a part holds >= 1 tensor
  };
  // Writes prefix-00001-of-0000N.gguf ...; the first part carries all metadata, every part
  // carries split.no / split.count / split.tensors.count. Returns the written paths.
  Expected<std::vector<std::string>> write_split(const std::string& prefix,
                                                 const SplitOptions& opt) const;

 private:
  struct PendingTensor {
    std::string name;
    DType type;
    std::vector<int64_t> shape;
    size_t n_bytes;
    Producer produce;
  };
  Status write_part(const std::string& path, const std::vector<GgufKV>& kvs, size_t first,
                    size_t last) const;

  uint32_t alignment_ = 32;
  std::vector<GgufKV> kvs_;
  std::vector<PendingTensor> tensors_;
};

}  // namespace minfer
