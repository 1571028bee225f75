// The compute shaders (shaders/<name>.comp) as the host sees them: their names, the bindings
// and push constants every dispatch gives, and the type numbers they are specialized and
// pushed with (internal to backends/vulkan).
//
//   const char* spv = kKernelNames[static_cast<size_t>(Kernel::kMatmul)];  // "matmul" (.spv)
//   int t = dequant_type(DType::Q4_K);        // 11: matmul's specialization constant 0
//   uint32_t mode = act_round_mode(DType::Q4_K);  // 4: x rounded to Q8_K blocks first
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>

#include "core/dtype.h"

namespace minfer::vulkan {

// The compute shaders (shaders/<name>.comp), one pipeline each, built on first use.
enum class Kernel : uint8_t {
  kBinary, kScale, kRmsNorm, kUnary, kRope, kMatmul, kGetRows, kKvStore, kAttn, kActRound, kMoe, kHadamard, kCount
};
inline constexpr const char* kKernelNames[] = {"binary",   "scale",    "rms_norm", "unary",     "rope", "matmul",
                                               "get_rows", "kv_store", "attn",     "act_round", "moe", "hadamard"};
static_assert(std::size(kKernelNames) == static_cast<size_t>(Kernel::kCount));

// Storage buffers per dispatch: src0, src1, dst, src2, src3 (a shader declares those it reads).
inline constexpr uint32_t kBindings = 5;
// Push constants per dispatch: 32 words (Vulkan guarantees 128 bytes).
inline constexpr uint32_t kPushWords = 32;

// How shaders/act_round.comp rounds a matmul's activations for this weight type: as the CPU
// backend does before its dot products (cpu/kernels.h): 0 not at all (F32), 1 f16, 2 bf16,
// 3 Q8_0 blocks, 5 Q8_1 blocks (Q8_0's values and each block's sum), 4 Q8_K blocks.
uint32_t act_round_mode(DType weight);

// shaders/dequant.glsl's type numbers, in its order; -1: a type it does not read.
int dequant_type(DType t);

}  // namespace minfer::vulkan
