// The "avx2" table: AVX2/FMA/F16C dot products where they exist, the reference elsewhere.
// The activation quantizers produce the reference's bytes exactly (tests/unit/test-cpu-ops).
#include "backends/cpu/kernels-avx2.h"
#include "backends/cpu/kernels.h"

namespace minfer::cpu {
namespace {

bool cpu_has_avx2() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
}

CpuKernels make_avx2() {
  CpuKernels k = cpu_kernels_ref();
  k.isa = "avx2";
  k.vec_dot[type_slot(DType::F32)] = avx2::vec_dot_f32;
  k.vec_dot[type_slot(DType::F16)] = avx2::vec_dot_f16;
  k.vec_dot[type_slot(DType::BF16)] = avx2::vec_dot_bf16;
  k.vec_dot[type_slot(DType::Q4_0)] = avx2::vec_dot_q4_0;
  k.vec_dot[type_slot(DType::Q4_1)] = avx2::vec_dot_q4_1;
  k.vec_dot[type_slot(DType::Q5_0)] = avx2::vec_dot_q5_0;
  k.vec_dot[type_slot(DType::Q5_1)] = avx2::vec_dot_q5_1;
  k.vec_dot[type_slot(DType::Q8_0)] = avx2::vec_dot_q8_0;
  k.vec_dot[type_slot(DType::IQ4_NL)] = avx2::vec_dot_iq4_nl;
  k.vec_dot[type_slot(DType::Q2_K)] = avx2::vec_dot_q2_k;
  k.vec_dot[type_slot(DType::Q3_K)] = avx2::vec_dot_q3_k;
  k.vec_dot[type_slot(DType::Q4_K)] = avx2::vec_dot_q4_k;
  k.vec_dot[type_slot(DType::Q5_K)] = avx2::vec_dot_q5_k;
  k.vec_dot[type_slot(DType::Q6_K)] = avx2::vec_dot_q6_k;
  k.vec_dot[type_slot(DType::IQ4_XS)] = avx2::vec_dot_iq4_xs;
  k.dot_w64_f16 = avx2::dot_w64_f16;
  k.dot_w64_f32 = avx2::dot_w64_f32;
  k.mad_f16 = avx2::mad_f16;
  k.dot_w64_rows_f16 = avx2::dot_w64_rows_f16;
  k.mad_rows_f16 = avx2::mad_rows_f16;
  k.mad_rows_f32 = avx2::mad_rows_f32;
  k.row_to_f32[type_slot(DType::Q8_0)] = avx2::row_to_f32_q8_0;
  k.row_to_f32[type_slot(DType::Q4_0)] = avx2::row_to_f32_q4_0;
  k.silu_row = avx2::silu_row;
  k.rope_row = avx2::rope_row;
  k.attn_wide = avx2::attn_wide;
  k.attn_tile = avx2::attn_tile;
  k.attn_tile_rows = 32;
  k.quantize[type_slot(DType::F16)] = avx2::quantize_f16;
  k.quantize[type_slot(DType::Q8_0)] = avx2::quantize_q8_0;
  k.quantize[type_slot(DType::Q8_1)] = avx2::quantize_q8_1;
  k.quantize[type_slot(DType::Q8_K)] = avx2::quantize_q8_k;
  // Only this ISA's own GEMMs: a weight type without one keeps the AVX2 row kernels (same bits)
  // rather than the scalar reference GEMM.
  for (GemmFn& g : k.gemm) g = nullptr;
  k.gemm[type_slot(DType::Q4_0)] = avx2::gemm_q4_0;
  k.gemm[type_slot(DType::Q5_0)] = avx2::gemm_q5_0;
  k.gemm[type_slot(DType::Q8_0)] = avx2::gemm_q8_0;
  k.gemm[type_slot(DType::Q4_1)] = avx2::gemm_q4_1;
  k.gemm[type_slot(DType::Q5_1)] = avx2::gemm_q5_1;
  k.gemm[type_slot(DType::F16)] = avx2::gemm_f16;
  k.gemm[type_slot(DType::BF16)] = avx2::gemm_bf16;
  k.gemm[type_slot(DType::IQ4_NL)] = avx2::gemm_iq4_nl;
  k.gemm[type_slot(DType::IQ4_XS)] = avx2::gemm_iq4_xs;
  k.gemm[type_slot(DType::Q5_K)] = avx2::gemm_q5_k;
  k.gemm[type_slot(DType::Q3_K)] = avx2::gemm_q3_k;
  k.gemm[type_slot(DType::Q2_K)] = avx2::gemm_q2_k;
  k.gemm[type_slot(DType::Q4_K)] = avx2::gemm_q4_k;
  k.gemm[type_slot(DType::Q6_K)] = avx2::gemm_q6_k;
  return k;
}

}  // namespace

const CpuKernels* cpu_kernels_avx2() {
  static const bool ok = cpu_has_avx2();
  if (!ok) return nullptr;
  static const CpuKernels k = make_avx2();
  return &k;
}

}  // namespace minfer::cpu
