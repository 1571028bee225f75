// The GGML tensor type table: id (as stored in GGUF), name, block size (elements) and block
// size (bytes). One X-macro list drives the enum, the names and the size queries.
//
//   DType t = DType::Q4_K;
//   dtype_name(t);            // "Q4_K"
//   row_bytes(t, 4096);       // 2304
//   auto parsed = dtype_from_name("Q8_0");
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace minfer {

// X(name, ggml id, elements per block, bytes per block)
#define MINFER_DTYPES(X)   \
  X(F32, 0, 1, 4)          \
  X(F16, 1, 1, 2)          \
  X(Q4_0, 2, 32, 18)       \
  X(Q4_1, 3, 32, 20)       \
  X(Q5_0, 6, 32, 22)       \
  X(Q5_1, 7, 32, 24)       \
  X(Q8_0, 8, 32, 34)       \
  X(Q8_1, 9, 32, 36)       \
  X(Q2_K, 10, 256, 84)     \
  X(Q3_K, 11, 256, 110)    \
  X(Q4_K, 12, 256, 144)    \
  X(Q5_K, 13, 256, 176)    \
  X(Q6_K, 14, 256, 210)    \
  X(Q8_K, 15, 256, 292)    \
  X(IQ2_XXS, 16, 256, 66)  \
  X(IQ2_XS, 17, 256, 74)   \
  X(IQ3_XXS, 18, 256, 98)  \
  X(IQ1_S, 19, 256, 50)    \
  X(IQ4_NL, 20, 32, 18)    \
  X(IQ3_S, 21, 256, 110)   \
  X(IQ2_S, 22, 256, 82)    \
  X(IQ4_XS, 23, 256, 136)  \
  X(I8, 24, 1, 1)          \
  X(I16, 25, 1, 2)         \
  X(I32, 26, 1, 4)         \
  X(I64, 27, 1, 8)         \
  X(F64, 28, 1, 8)         \
  X(IQ1_M, 29, 256, 56)    \
  X(BF16, 30, 1, 2)        \
  X(TQ1_0, 34, 256, 54)    \
  X(TQ2_0, 35, 256, 66)    \
  X(MXFP4, 39, 32, 17)

enum class DType : uint32_t {
#define MINFER_X(name, id, blk, bytes) name = id,
  MINFER_DTYPES(MINFER_X)
#undef MINFER_X
};

struct DTypeInfo {
  DType type;
  std::string_view name;
  uint32_t block_elems;  // elements per block
  uint32_t block_bytes;  // bytes per block
};

// Table entry for a GGML type id, or nullopt for an id GGML does not define.
std::optional<DTypeInfo> dtype_info(uint32_t id);
const DTypeInfo& dtype_info(DType t);
std::string_view dtype_name(DType t);
std::optional<DType> dtype_from_name(std::string_view name);

// Bytes of one row of n elements; n must be a multiple of the block size.
inline size_t row_bytes(DType t, int64_t n) {
  const DTypeInfo& i = dtype_info(t);
  return static_cast<size_t>(n / i.block_elems) * i.block_bytes;
}

// Whether minfer can dequantize this type (and so use it as a weight).
bool dtype_supported(DType t);

}  // namespace minfer
