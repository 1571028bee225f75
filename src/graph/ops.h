// The operations of the compute graph. One X-macro list drives the enum, the names used in
// dumps (DOT, JSON) and the per-op properties the passes need.
//
//   Op op = Op::kMatmul;
//   op_name(op);          // "matmul"
//   op_is_view(op);       // false: allocates its own output
//
// Conventions for every op (shapes are ggml-style, ne[0] contiguous, tensors row-major):
//   activations are f32 [d, n_tokens] (or [hd, n_head, n_tokens]); weights keep their GGUF type.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace minfer {

// X(Enum, "name", in_place, view, help)
//   in_place: the output may share its first source's buffer when that source dies here
//   view:     the output is the first source's storage (no allocation at all)
#define MINFER_OPS(X)                                                                                   \
  X(kInput, "input", false, false, "graph input, filled by the host before compute")                \
  X(kWeight, "weight", false, false, "constant tensor bound to model memory (GGUF tensor)")         \
  X(kKvCache, "kv_cache", false, false, "persistent K or V region of one layer [n_embd_kv, n_ctx]")  \
  X(kGetRows, "get_rows", false, false, "out[r] = src0 row src1[r] (embedding lookup, tail gather)") \
  X(kRmsNorm, "rms_norm", true, false, "x / sqrt(mean(x^2) + eps) over ne[0]")                       \
  X(kRmsNormMul, "rms_norm_mul", true, false, "fused rms_norm(src0) * src1 (row broadcast)")          \
  X(kAdd, "add", true, false, "src0 + src1 (src1 broadcast over rows when it has one row)")          \
  X(kMul, "mul", true, false, "src0 * src1 (src1 broadcast over rows when it has one row)")          \
  X(kSilu, "silu", true, false, "x * sigmoid(x)")                                                   \
  X(kSwiglu, "swiglu", true, false, "fused silu(src0) * src1")                                       \
  X(kGelu, "gelu", true, false, "GELU, tanh approximation (Gemma's FFN)")                            \
  X(kGeglu, "geglu", true, false, "fused gelu(src0) * src1")                                         \
  X(kScale, "scale", true, false, "x * c (Gemma's embedding and query scales)")                      \
  X(kSoftcap, "softcap", true, false, "c * tanh(x / c): logit soft-capping (Gemma 2)")               \
  X(kHadamard, "hadamard", true, false, "runs of n values times the n x n Walsh-Hadamard rotation")  \
  X(kTopK, "top_k", false, false, "I32 indices of the k largest values of each row, largest first")  \
  X(kMoeWeights, "moe_weights", false, false, "softmax(src0 row) at the experts src1 (renormalised)")  \
  X(kMatmulId, "matmul_id", false, false, "out[t][j] = expert src2[t][j] of weight src0 times x row")  \
  X(kMoeSum, "moe_sum", false, false, "out[t] = sum_j src1[t][j] * src0[t][j] (experts' outputs)")    \
  X(kMatmul, "matmul", false, false, "out[t][o] = sum_i src0[o][i] * src1[t][i] (src0 = weight)")    \
  X(kMatmulSwiglu, "matmul_swiglu", false, false, "fused swiglu(src0 x src2, src1 x src2): FFN gate and up") \
  X(kRope, "rope", true, false, "rotary position embedding of src0 at positions src1")              \
  X(kKvStore, "kv_store", false, true, "writes rows of src1 into cache src0 at positions src2")     \
  X(kAttn, "attn", false, false, "causal GQA attention of q=src0 over caches src1 (K), src2 (V)")    \
  X(kReshape, "reshape", false, true, "same bytes, new shape")                                      \
  X(kCopy, "copy", false, false, "copy of src0 onto this node's backend (split boundary)")

enum class Op : uint8_t {
#define MINFER_X(e, name, in_place, view, help) e,
  MINFER_OPS(MINFER_X)
#undef MINFER_X
};

constexpr int kOpCount = 0
#define MINFER_X(e, name, in_place, view, help) +1
    MINFER_OPS(MINFER_X)
#undef MINFER_X
    ;

std::string_view op_name(Op op);
std::string_view op_help(Op op);
std::optional<Op> op_from_name(std::string_view name);
bool op_in_place(Op op);
bool op_is_view(Op op);
// Leaves have no sources and get their storage from outside the activation arena (inputs are
// the exception: they are planned in the arena but never freed).
inline bool op_is_leaf(Op op) { return op == Op::kInput || op == Op::kWeight || op == Op::kKvCache; }

enum class RopeMode : uint8_t {
  kNorm = 0,  // rotates pairs (2i, 2i+1): Llama
  kNeox = 2,  // rotates pairs (i, i + n_rot/2): GPT-NeoX, Qwen
};

}  // namespace minfer
