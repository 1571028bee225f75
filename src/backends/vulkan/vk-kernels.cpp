#include "backends/vulkan/vk-kernels.h"

namespace minfer::vulkan {

uint32_t act_round_mode(DType weight) {
  switch (weight) {
    case DType::F32: return 0;
    case DType::F16: return 1;
    case DType::BF16: return 2;
    case DType::Q4_0:
    case DType::Q5_0:
    case DType::Q8_0:
    case DType::IQ4_NL: return 3;
    case DType::Q4_1:
    case DType::Q5_1: return 5;
    default: return 4;  // Q2_K .. Q6_K, IQ4_XS
  }
}

int dequant_type(DType t) {
  constexpr DType kTypes[] = {DType::F32,  DType::F16,  DType::Q8_0, DType::Q4_0, DType::BF16,
                              DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::IQ4_NL, DType::Q2_K,
                              DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_XS};
  for (size_t i = 0; i < std::size(kTypes); ++i)
    if (kTypes[i] == t) return static_cast<int>(i);
  return -1;
}

}  // namespace minfer::vulkan
