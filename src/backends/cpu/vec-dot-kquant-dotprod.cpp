// Dot products of the super-block types with Q8_K activations by SDOT (ARMv8.2 FEAT_DotProd):
// vec-dot-kquant-arm.h over SDOT's four-product lanes; bit-identical to the references
// (vec-dot-kquant-ref.cpp). A dotprod region (isa-begin.h); kernels-neon.cpp hands the table out.
#include <cstdint>

#include "backends/cpu/kernels-neon.h"
#include "quant/blocks.h"

#define MINFER_ISA dotprod
#include "backends/cpu/isa-begin.h"
#include "backends/cpu/neon-common.h"
#include "backends/cpu/vec-dot-kquant-arm.h"

namespace minfer::cpu::dotprod {
namespace {

// Each sub-block's products by SDOT into 4 int32 lanes; four sub-blocks' sums by pairwise adds.
struct Prod {
  using Sub16 = int32x4_t;
  static int32x4_t dot16(int8x16_t q, int8x16_t x) { return vdotq_s32(vdupq_n_s32(0), q, x); }
  static int32x4_t sums4_16(int32x4_t p0, int32x4_t p1, int32x4_t p2, int32x4_t p3) { return hsum4(p0, p1, p2, p3); }
  using Sub32 = int32x4_t;
  static int32x4_t dot32(int8x16_t q0, int8x16_t q1, int8x16_t x0, int8x16_t x1) {
    return vdotq_s32(vdotq_s32(vdupq_n_s32(0), q0, x0), q1, x1);
  }
  static int32x4_t sums4_32(int32x4_t p0, int32x4_t p1, int32x4_t p2, int32x4_t p3) { return hsum4(p0, p1, p2, p3); }
  static int32x4_t dot32_wide(int8x16_t q0, int8x16_t q1, int8x16_t x0, int8x16_t x1) { return dot32(q0, q1, x0, x1); }
};

}  // namespace

float vec_dot_q2_k(int64_t n, const void* w, const void* x) { return vec_dot_q2_k_impl<Prod>(n, w, x); }
float vec_dot_q3_k(int64_t n, const void* w, const void* x) { return vec_dot_q3_k_impl<Prod>(n, w, x); }
float vec_dot_q4_k(int64_t n, const void* w, const void* x) { return vec_dot_q45_k_impl<Prod, BlockQ4_K, false>(n, w, x); }
float vec_dot_q5_k(int64_t n, const void* w, const void* x) { return vec_dot_q45_k_impl<Prod, BlockQ5_K, true>(n, w, x); }
float vec_dot_q6_k(int64_t n, const void* w, const void* x) { return vec_dot_q6_k_impl<Prod>(n, w, x); }
float vec_dot_iq4_xs(int64_t n, const void* w, const void* x) { return vec_dot_iq4_xs_impl<Prod>(n, w, x); }

}  // namespace minfer::cpu::dotprod
#include "backends/cpu/isa-end.h"
