#include "core/dtype.h"

#include "core/status.h"

namespace minfer {
namespace {

constexpr DTypeInfo kTable[] = {
#define MINFER_X(name, id, blk, bytes) {DType::name, #name, blk, bytes},
    MINFER_DTYPES(MINFER_X)
#undef MINFER_X
};

}  // namespace

std::optional<DTypeInfo> dtype_info(uint32_t id) {
  for (const DTypeInfo& i : kTable)
    if (static_cast<uint32_t>(i.type) == id) return i;
  return std::nullopt;
}

const DTypeInfo& dtype_info(DType t) {
  for (const DTypeInfo& i : kTable)
    if (i.type == t) return i;
  assert_fail("dtype_info: unknown DType", __FILE__, __LINE__);
}

std::string_view dtype_name(DType t) { return dtype_info(t).name; }

std::optional<DType> dtype_from_name(std::string_view name) {
  for (const DTypeInfo& i : kTable)
    if (i.name == name) return i.type;
  return std::nullopt;
}

bool dtype_supported(DType t) {
  switch (t) {
    case DType::F32: case DType::F16: case DType::BF16:
    case DType::Q4_0: case DType::Q4_1: case DType::Q5_0: case DType::Q5_1: case DType::Q8_0:
    case DType::Q2_K: case DType::Q3_K: case DType::Q4_K: case DType::Q5_K: case DType::Q6_K:
    case DType::Q8_K: case DType::IQ4_NL: case DType::IQ4_XS:
      return true;
    default:
      return false;
  }
}

}  // namespace minfer
