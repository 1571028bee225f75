// The AArch64 tables: "neon" (ARMv8.0 Advanced SIMD: every AArch64 CPU), "dotprod" (+ SDOT,
// FEAT_DotProd: Cortex-A55/A76 and later, Neoverse, Apple M1) and "i8mm" (+ SMMLA, FEAT_I8MM:
// Neoverse V1/N2, Apple M2 and later). Each starts from the one below it (the reference for
// neon) and replaces the entries its ISA makes faster (kernels-neon.h); every entry is
// bit-identical to the reference. The CPU's features come from the OS: getauxval's hardware
// capabilities on Linux, sysctl's hw.optional.arm.FEAT_* on macOS (neon is always there).
#include "backends/cpu/kernels-neon.h"
#include "backends/cpu/kernels.h"

#if defined(__linux__)
#include <sys/auxv.h>
#elif defined(__APPLE__)
#include <sys/sysctl.h>
#include <sys/types.h>
#endif

namespace minfer::cpu {
namespace {

struct ArmFeatures {
  bool neon = false, dotprod = false, i8mm = false;
};

#if defined(__linux__)
// The bits of <asm/hwcap.h> (Linux 5.10+; spelled out for older headers).
constexpr unsigned long kHwcapAsimd = 1ul << 1;     // HWCAP_ASIMD
constexpr unsigned long kHwcapAsimdDp = 1ul << 20;  // HWCAP_ASIMDDP
constexpr unsigned long kHwcap2I8mm = 1ul << 13;    // HWCAP2_I8MM

ArmFeatures arm_features() {
  const unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
  ArmFeatures f;
  f.neon = (hw & kHwcapAsimd) != 0;
  f.dotprod = f.neon && (hw & kHwcapAsimdDp) != 0;
  f.i8mm = f.dotprod && (hw2 & kHwcap2I8mm) != 0;
  return f;
}
#elif defined(__APPLE__)
bool sysctl_flag(const char* name) {
  int v = 0;
  size_t size = sizeof(v);
  return sysctlbyname(name, &v, &size, nullptr, 0) == 0 && v != 0;
}

ArmFeatures arm_features() {
  ArmFeatures f;
  f.neon = true;  // every arm64 Mac
  f.dotprod = sysctl_flag("hw.optional.arm.FEAT_DotProd");
  f.i8mm = f.dotprod && sysctl_flag("hw.optional.arm.FEAT_I8MM");
  return f;
}
#else
ArmFeatures arm_features() {
  ArmFeatures f;
  f.neon = true;  // AArch64 has Advanced SIMD; other OSes: no way to ask for more yet
  return f;
}
#endif

const ArmFeatures& features() {
  static const ArmFeatures f = arm_features();
  return f;
}

CpuKernels make_neon() {
  CpuKernels k = cpu_kernels_ref();
  k.isa = "neon";
  k.vec_dot[type_slot(DType::F32)] = neon::vec_dot_f32;
  k.vec_dot[type_slot(DType::F16)] = neon::vec_dot_f16;
  k.vec_dot[type_slot(DType::BF16)] = neon::vec_dot_bf16;
  k.vec_dot[type_slot(DType::Q4_0)] = neon::vec_dot_q4_0;
  k.vec_dot[type_slot(DType::Q4_1)] = neon::vec_dot_q4_1;
  k.vec_dot[type_slot(DType::Q5_0)] = neon::vec_dot_q5_0;
  k.vec_dot[type_slot(DType::Q5_1)] = neon::vec_dot_q5_1;
  k.vec_dot[type_slot(DType::Q8_0)] = neon::vec_dot_q8_0;
  k.vec_dot[type_slot(DType::IQ4_NL)] = neon::vec_dot_iq4_nl;
  k.quantize[type_slot(DType::F16)] = neon::quantize_f16;
  k.quantize[type_slot(DType::BF16)] = neon::quantize_bf16;
  k.quantize[type_slot(DType::Q8_0)] = neon::quantize_q8_0;
  k.vec_dot[type_slot(DType::Q2_K)] = neon::vec_dot_q2_k;
  k.vec_dot[type_slot(DType::Q3_K)] = neon::vec_dot_q3_k;
  k.vec_dot[type_slot(DType::Q4_K)] = neon::vec_dot_q4_k;
  k.vec_dot[type_slot(DType::Q5_K)] = neon::vec_dot_q5_k;
  k.vec_dot[type_slot(DType::Q6_K)] = neon::vec_dot_q6_k;
  k.vec_dot[type_slot(DType::IQ4_XS)] = neon::vec_dot_iq4_xs;
  k.quantize[type_slot(DType::Q8_1)] = neon::quantize_q8_1;
  k.quantize[type_slot(DType::Q8_K)] = neon::quantize_q8_k;
  k.dot_w64_f16 = neon::dot_w64_f16;
  k.dot_w64_f32 = neon::dot_w64_f32;
  k.mad_f16 = neon::mad_f16;
  k.dot_w64_rows_f16 = neon::dot_w64_rows_f16;
  k.mad_rows_f16 = neon::mad_rows_f16;
  k.mad_rows_f32 = neon::mad_rows_f32;
  k.row_to_f32[type_slot(DType::Q8_0)] = neon::row_to_f32_q8_0;
  k.row_to_f32[type_slot(DType::Q4_0)] = neon::row_to_f32_q4_0;
  k.silu_row = neon::silu_row;
  k.rope_row = neon::rope_row;
  k.attn_wide = neon::attn_wide;
  k.attn_tile = neon::attn_tile;
  k.attn_tile_rows = kAttnTileMaxRows;  // the reference's tiles (attn-tile-neon.cpp splits them)
  k.attn_rows_f16 = neon::attn_rows_f16;
  // Only the ARM tables' own GEMMs: a weight type without one keeps its row kernels (same
  // bits) and is not repacked, rather than going through the scalar reference GEMM. ARMv8.0
  // has no quantized GEMM on purpose: the repacked layouts are made for SDOT, and emulating one
  // SDOT (16 products) takes 5-6 instructions (SMULL x2, SADDLP x2, ADDP), where the row
  // kernels' widening multiplies do 8 products per instruction; the row kernels are this
  // table's GEMV (llvm-mca: docs/cpu-performance.md).
  for (GemmFn& g : k.gemm) g = nullptr;
  k.gemm[type_slot(DType::F16)] = neon::gemm_f16;
  k.gemm[type_slot(DType::BF16)] = neon::gemm_bf16;
  return k;
}

CpuKernels make_dotprod(const CpuKernels& base) {
  CpuKernels k = base;
  k.isa = "dotprod";
  k.vec_dot[type_slot(DType::Q4_0)] = dotprod::vec_dot_q4_0;
  k.vec_dot[type_slot(DType::Q4_1)] = dotprod::vec_dot_q4_1;
  k.vec_dot[type_slot(DType::Q5_0)] = dotprod::vec_dot_q5_0;
  k.vec_dot[type_slot(DType::Q5_1)] = dotprod::vec_dot_q5_1;
  k.vec_dot[type_slot(DType::Q8_0)] = dotprod::vec_dot_q8_0;
  k.vec_dot[type_slot(DType::IQ4_NL)] = dotprod::vec_dot_iq4_nl;
  k.vec_dot[type_slot(DType::Q2_K)] = dotprod::vec_dot_q2_k;
  k.vec_dot[type_slot(DType::Q3_K)] = dotprod::vec_dot_q3_k;
  k.vec_dot[type_slot(DType::Q4_K)] = dotprod::vec_dot_q4_k;
  k.vec_dot[type_slot(DType::Q5_K)] = dotprod::vec_dot_q5_k;
  k.vec_dot[type_slot(DType::Q6_K)] = dotprod::vec_dot_q6_k;
  k.vec_dot[type_slot(DType::IQ4_XS)] = dotprod::vec_dot_iq4_xs;
  k.gemm[type_slot(DType::Q4_0)] = dotprod::gemm_q4_0;
  k.gemm[type_slot(DType::Q5_0)] = dotprod::gemm_q5_0;
  k.gemm[type_slot(DType::Q8_0)] = dotprod::gemm_q8_0;
  k.gemm[type_slot(DType::Q4_1)] = dotprod::gemm_q4_1;
  k.gemm[type_slot(DType::Q5_1)] = dotprod::gemm_q5_1;
  k.gemm[type_slot(DType::IQ4_NL)] = dotprod::gemm_iq4_nl;
  k.gemm[type_slot(DType::Q2_K)] = dotprod::gemm_q2_k;
  k.gemm[type_slot(DType::Q3_K)] = dotprod::gemm_q3_k;
  k.gemm[type_slot(DType::Q4_K)] = dotprod::gemm_q4_k;
  k.gemm[type_slot(DType::Q5_K)] = dotprod::gemm_q5_k;
  k.gemm[type_slot(DType::Q6_K)] = dotprod::gemm_q6_k;
  k.gemm[type_slot(DType::IQ4_XS)] = dotprod::gemm_iq4_xs;
  return k;
}

CpuKernels make_i8mm(const CpuKernels& base) {
  CpuKernels k = base;
  k.isa = "i8mm";
  k.gemm[type_slot(DType::Q4_0)] = i8mm::gemm_q4_0;
  k.gemm[type_slot(DType::Q8_0)] = i8mm::gemm_q8_0;
  k.gemm[type_slot(DType::Q5_0)] = i8mm::gemm_q5_0;
  k.gemm[type_slot(DType::IQ4_NL)] = i8mm::gemm_iq4_nl;
  k.gemm[type_slot(DType::Q4_K)] = i8mm::gemm_q4_k;
  k.gemm[type_slot(DType::Q6_K)] = i8mm::gemm_q6_k;
  return k;
}

}  // namespace

const CpuKernels* cpu_kernels_neon() {
  if (!features().neon) return nullptr;
  static const CpuKernels k = make_neon();
  return &k;
}

const CpuKernels* cpu_kernels_dotprod() {
  if (!features().dotprod || !cpu_kernels_neon()) return nullptr;
  static const CpuKernels k = make_dotprod(*cpu_kernels_neon());
  return &k;
}

const CpuKernels* cpu_kernels_i8mm() {
  if (!features().i8mm || !cpu_kernels_dotprod()) return nullptr;
  static const CpuKernels k = make_i8mm(*cpu_kernels_dotprod());
  return &k;
}

}  // namespace minfer::cpu
