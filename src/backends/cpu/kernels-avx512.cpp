// The "avx512" table: the AVX2 table plus AVX-512 GEMM kernels over repacked weights (VNNI for
// the quantized types, f32 fma for F16 / BF16), attention tiles and the narrow attention's
// per-key row kernels.
#include "backends/cpu/kernels-avx512.h"
#include "backends/cpu/kernels.h"

namespace minfer::cpu {
namespace {

bool cpu_has_avx512() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
}

CpuKernels make_avx512(const CpuKernels& base) {
  CpuKernels k = base;
  k.isa = "avx512";
  k.gemm[type_slot(DType::Q4_0)] = avx512::gemm_q4_0;
  k.gemm[type_slot(DType::Q5_0)] = avx512::gemm_q5_0;
  k.gemm[type_slot(DType::Q8_0)] = avx512::gemm_q8_0;
  k.gemm[type_slot(DType::Q4_K)] = avx512::gemm_q4_k;
  k.gemm[type_slot(DType::Q6_K)] = avx512::gemm_q6_k;
  k.gemm[type_slot(DType::Q5_1)] = avx512::gemm_q5_1;
  k.gemm[type_slot(DType::Q4_1)] = avx512::gemm_q4_1;
  k.gemm[type_slot(DType::F16)] = avx512::gemm_f16;
  k.gemm[type_slot(DType::BF16)] = avx512::gemm_bf16;
  k.gemm[type_slot(DType::IQ4_NL)] = avx512::gemm_iq4_nl;
  k.gemm[type_slot(DType::IQ4_XS)] = avx512::gemm_iq4_xs;
  k.gemm[type_slot(DType::Q5_K)] = avx512::gemm_q5_k;
  k.gemm[type_slot(DType::Q3_K)] = avx512::gemm_q3_k;
  k.gemm[type_slot(DType::Q2_K)] = avx512::gemm_q2_k;
  k.attn_wide = avx512::attn_wide;
  k.attn_tile = avx512::attn_tile;
  k.attn_tile_rows = kAttnTileMaxRows;
  k.dot_w64_rows_f16 = avx512::dot_w64_rows_f16;
  k.mad_rows_f16 = avx512::mad_rows_f16;
  k.attn_rows_f16 = avx512::attn_rows_f16;
  k.silu_row = avx512::silu_row;
  return k;
}

}  // namespace

const CpuKernels* cpu_kernels_avx512() {
  static const bool ok = cpu_has_avx512() && cpu_kernels_avx2();
  if (!ok) return nullptr;
  static const CpuKernels k = make_avx512(*cpu_kernels_avx2());
  return &k;
}

}  // namespace minfer::cpu
