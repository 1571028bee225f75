// The CPU implementation of each graph op. Every function reads its sources and writes its
// destination as described in graph/ops.h; tensors are contiguous row-major.
//
//   OpArgs a{{&node, dst}, {{&src0, p0}, {&src1, p1}}};
//   OpContext ctx{pool, cpu_kernels(), work.data(), work.size()};
//   op_matmul(ctx, a);
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>

#include "backends/cpu/kernels.h"
#include "backends/cpu/repack.h"
#include "core/thread-pool.h"
#include "graph/graph.h"

namespace minfer::cpu {

class RopeAngles;  // rope-angles.h

struct TensorArg {
  const Node* node = nullptr;
  void* data = nullptr;

  float* f32() const { return static_cast<float*>(data); }
  const int32_t* i32() const { return static_cast<const int32_t*>(data); }
};

struct OpArgs {
  TensorArg dst;
  TensorArg src[4];
};

// Repacked copies of matmul weights, by the weight's data address (CpuBackend::prepare).
using RepackMap = std::unordered_map<const void*, std::shared_ptr<const RepackedWeight>>;

// What the work buffer holds after a matmul converted its activations (ops-matmul.cpp): the
// next matmul of the same tensor to the same form reads them there instead of converting
// again (a layer's q, k and v projections). The backend forgets it (valid = false) when a
// matmul writes over the source bytes and after any op other than a matmul or a view (which
// might use the work buffer or write anywhere).
struct WorkActivations {
  bool valid = false;
  const Node* src = nullptr;  // the activation tensor
  const void* data = nullptr;
  DType act = DType::F32;     // the form: activation type, with the GEMM's block sums and scales or not,
  bool gemm = false, f32_rows = false;  // with the F16 / BF16 GEMMs' f32 rows or not
  int64_t reuses = 0;  // conversions saved (the backend's stats)
  bool overlaps(const void* p, size_t n) const {
    const auto* a = static_cast<const uint8_t*>(data);
    const auto* b = static_cast<const uint8_t*>(p);
    return valid && b < a + src->n_bytes() && a < b + n;
  }
};

struct OpContext {
  ThreadPool& pool;
  const CpuKernels& k;
  uint8_t* work = nullptr;  // scratch of op_work_size() bytes
  size_t work_size = 0;
  const RepackMap* repacked = nullptr;  // none: every matmul uses the row kernels
  RopeAngles* rope = nullptr;           // none: every rope computes its angles
  WorkActivations* work_acts = nullptr; // none: every matmul converts its activations
};

// Scratch bytes the op needs (matmul: the quantized activations). src1: the activations
// (matmul_swiglu: its src2).
size_t op_work_size(const Node& n, const Node* src0, const Node* src1);

void op_get_rows(const OpContext& c, const OpArgs& a);      // ops-rows.cpp
void op_kv_store(const OpContext& c, const OpArgs& a);      // ops-rows.cpp
void op_rms_norm(const OpContext& c, const OpArgs& a);      // ops-elementwise.cpp
void op_rms_norm_mul(const OpContext& c, const OpArgs& a);  // ops-elementwise.cpp
void op_add(const OpContext& c, const OpArgs& a);           // ops-elementwise.cpp
void op_mul(const OpContext& c, const OpArgs& a);           // ops-elementwise.cpp
void op_silu(const OpContext& c, const OpArgs& a);          // ops-elementwise.cpp
void op_swiglu(const OpContext& c, const OpArgs& a);        // ops-elementwise.cpp
// y = silu(g) * u over one row of n, as swiglu computes it (ops-elementwise.cpp); silu_row's
// tail rule (kernels.h) applies to the row as given.
void swiglu_row(const CpuKernels& k, int64_t n, float* y, const float* g, const float* u);
void op_gelu(const OpContext& c, const OpArgs& a);          // ops-elementwise.cpp
void op_geglu(const OpContext& c, const OpArgs& a);         // ops-elementwise.cpp
void op_scale(const OpContext& c, const OpArgs& a);         // ops-elementwise.cpp
void op_softcap(const OpContext& c, const OpArgs& a);       // ops-elementwise.cpp
void op_hadamard(const OpContext& c, const OpArgs& a);      // ops-elementwise.cpp
void op_top_k(const OpContext& c, const OpArgs& a);         // ops-moe.cpp
void op_moe_weights(const OpContext& c, const OpArgs& a);   // ops-moe.cpp
void op_matmul_id(const OpContext& c, const OpArgs& a);     // ops-moe.cpp
void op_moe_sum(const OpContext& c, const OpArgs& a);       // ops-moe.cpp
size_t matmul_id_work_size(const Node& n, const Node& w, const Node& x);  // ops-moe.cpp
void op_matmul(const OpContext& c, const OpArgs& a);        // ops-matmul.cpp
// Several decode matmuls of one activation tensor (a layer's q, k and v) as one job: the
// activations converted once, every weight's row groups as one range streamed by the threads
// (one hand-off and one tail instead of one per matmul). The bits of one op_matmul each.
// can_join_matmuls says whether ops qualify (2+, all repacked, one activation form, fewer than
// 16 rows: a 512-row prefill measured no faster joined; outputs apart from one another and
// from the tensor); op_matmuls_joint takes at most 8.
bool can_join_matmuls(const OpContext& c, std::span<const OpArgs> ops);
void op_matmuls_joint(const OpContext& c, std::span<const OpArgs> ops);
void op_matmul_swiglu(const OpContext& c, const OpArgs& a); // ops-matmul.cpp
void op_rope(const OpContext& c, const OpArgs& a);          // ops-rope.cpp
void op_attn(const OpContext& c, const OpArgs& a);          // ops-attn.cpp

// The KV cache types kv_store writes and attn reads (F16, F32, Q8_0, Q4_0).
inline bool kv_cache_type(DType t) { return t == DType::F16 || t == DType::F32 || t == DType::Q8_0 || t == DType::Q4_0; }

constexpr int64_t kMaxHeadDim = 512;  // attention keeps a head's accumulator on the stack

}  // namespace minfer::cpu
