// Kernel tables and their selection (once, from cpuid or the OS's ARM feature flags, and
// MINFER_ISA).
#include "backends/cpu/kernels.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "backends/cpu/kernels-ref.h"
#include "core/fp16.h"

namespace minfer::cpu {
namespace {

// X(weight type, activation type, ref dot)
#define MINFER_CPU_MATMUL_TYPES(X) \
  X(F32, F32, vec_dot_f32)         \
  X(F16, F16, vec_dot_f16)         \
  X(BF16, BF16, vec_dot_bf16)      \
  X(Q4_0, Q8_0, vec_dot_q4_0)      \
  X(Q4_1, Q8_1, vec_dot_q4_1)      \
  X(Q5_0, Q8_0, vec_dot_q5_0)      \
  X(Q5_1, Q8_1, vec_dot_q5_1)      \
  X(Q8_0, Q8_0, vec_dot_q8_0)      \
  X(Q2_K, Q8_K, vec_dot_q2_k)      \
  X(Q3_K, Q8_K, vec_dot_q3_k)      \
  X(Q4_K, Q8_K, vec_dot_q4_k)      \
  X(Q5_K, Q8_K, vec_dot_q5_k)      \
  X(Q6_K, Q8_K, vec_dot_q6_k)      \
  X(IQ4_NL, Q8_0, vec_dot_iq4_nl)  \
  X(IQ4_XS, Q8_K, vec_dot_iq4_xs)

CpuKernels make_ref() {
  CpuKernels k;
  k.isa = "ref";
#define MINFER_X(w, a, fn) k.vec_dot[type_slot(DType::w)] = ref::fn;
  MINFER_CPU_MATMUL_TYPES(MINFER_X)
#undef MINFER_X
  k.quantize[type_slot(DType::F32)] = ref::quantize_f32;
  k.quantize[type_slot(DType::F16)] = ref::quantize_f16;
  k.quantize[type_slot(DType::BF16)] = ref::quantize_bf16;
  k.quantize[type_slot(DType::Q8_0)] = ref::quantize_q8_0;
  k.quantize[type_slot(DType::Q8_1)] = ref::quantize_q8_1;
  k.quantize[type_slot(DType::Q8_K)] = ref::quantize_q8_k;
  k.dot_w64_f16 = ref::dot_w64_f16;
  k.dot_w64_f32 = ref::dot_w64_f32;
  k.mad_f16 = ref::mad_f16;
  k.dot_w64_rows_f16 = ref::dot_w64_rows_f16;
  k.mad_rows_f16 = ref::mad_rows_f16;
  k.mad_rows_f32 = ref::mad_rows_f32;
  k.row_to_f32[type_slot(DType::Q8_0)] = ref::row_to_f32_q8_0;
  k.row_to_f32[type_slot(DType::Q4_0)] = ref::row_to_f32_q4_0;
  k.silu_row = ref::silu_row;
  k.rope_row = ref::rope_row;
  k.attn_wide = ref::attn_wide;
  k.attn_tile = ref::attn_tile;
  k.attn_tile_rows = kAttnTileMaxRows;
  k.gemm[type_slot(DType::Q4_0)] = ref::gemm_q4_0;
  k.gemm[type_slot(DType::Q5_0)] = ref::gemm_q5_0;
  k.gemm[type_slot(DType::Q8_0)] = ref::gemm_q8_0;
  k.gemm[type_slot(DType::Q4_K)] = ref::gemm_q4_k;
  k.gemm[type_slot(DType::Q6_K)] = ref::gemm_q6_k;
  k.gemm[type_slot(DType::Q5_K)] = ref::gemm_q5_k;
  k.gemm[type_slot(DType::Q3_K)] = ref::gemm_q3_k;
  k.gemm[type_slot(DType::Q2_K)] = ref::gemm_q2_k;
  k.gemm[type_slot(DType::Q5_1)] = ref::gemm_q5_1;
  k.gemm[type_slot(DType::Q4_1)] = ref::gemm_q4_1;
  k.gemm[type_slot(DType::F16)] = ref::gemm_f16;
  k.gemm[type_slot(DType::BF16)] = ref::gemm_bf16;
  k.gemm[type_slot(DType::IQ4_NL)] = ref::gemm_iq4_nl;
  k.gemm[type_slot(DType::IQ4_XS)] = ref::gemm_iq4_xs;
  return k;
}

struct F16Table {
  float v[65536];
  F16Table() {
    for (uint32_t i = 0; i < 65536; ++i) v[i] = fp16_to_fp32(static_cast<uint16_t>(i));
  }
};
const F16Table kF16Table;

// Every table this build has, narrowest first; each getter is nullptr where the machine lacks
// the ISA (or the build's architecture has no such table).
constexpr const CpuKernels* (*kIsaTables[])() = {cpu_kernels_avx2, cpu_kernels_avx512, cpu_kernels_amx,
                                                 cpu_kernels_neon, cpu_kernels_dotprod, cpu_kernels_i8mm};

const CpuKernels* select() {
  const CpuKernels* best = &cpu_kernels_ref();
  std::string have = "ref";
  for (auto get : kIsaTables)
    if (const CpuKernels* t = get()) {
      best = t;
      have += ", " + std::string(t->isa);
    }
  const char* env = std::getenv("MINFER_ISA");
  if (!env || !*env) return best;
  const std::string want = env;
  if (want == "ref") return &cpu_kernels_ref();
  for (auto get : kIsaTables)
    if (const CpuKernels* t = get(); t && t->isa == want) return t;
  std::fprintf(stderr, "minfer: MINFER_ISA=%s is not available here (have: %s); using %s\n", env, have.c_str(),
               std::string(best->isa).c_str());
  return best;
}

}  // namespace

float f16_lookup(uint16_t h) { return kF16Table.v[h]; }

float exp_poly(float x) {
  constexpr float kShift = 0x1.8p23f, kInvLn2 = 0x1.715476p+0f, kLn2Hi = 0x1.62e4p-1f, kLn2Lo = 0x1.7f7d1cp-20f;
  constexpr float kC0 = 0x1.0e4020p-7f, kC1 = 0x1.573e2ep-5f, kC2 = 0x1.555e66p-3f, kC3 = 0x1.fffdb6p-2f,
                  kC4 = 0x1.ffffecp-1f;
  const float z = std::fma(x, kInvLn2, kShift);
  const float n = z - kShift;  // round(x / ln2)
  const float r = std::fma(-n, kLn2Lo, std::fma(-n, kLn2Hi, x));
  const float u = r * r;
  const float p = std::fma(std::fma(std::fma(kC0, r, kC1), u, std::fma(kC2, r, kC3)), u, std::fma(kC4, r, 1.0f));
  if (std::isnan(n)) return p;
  if (std::fabs(n) > 192.0f) return n <= 0.0f ? 0.0f : INFINITY;
  return std::ldexp(p, static_cast<int>(n));
}

DType activation_type(DType weight) {
  switch (weight) {
#define MINFER_X(w, a, fn) \
  case DType::w: return DType::a;
    MINFER_CPU_MATMUL_TYPES(MINFER_X)
#undef MINFER_X
    default: return DType::F32;
  }
}

bool matmul_supported(DType weight) {
  switch (weight) {
#define MINFER_X(w, a, fn) case DType::w:
    MINFER_CPU_MATMUL_TYPES(MINFER_X)
#undef MINFER_X
    return true;
    default: return false;
  }
}

const CpuKernels& cpu_kernels_ref() {
  static const CpuKernels k = make_ref();
  return k;
}

const CpuKernels& cpu_kernels() {
  static const CpuKernels* k = select();
  return *k;
}

int cpu_kernel_variants(const CpuKernels** out, int max) {
  int n = 0;
  if (n < max) out[n++] = &cpu_kernels_ref();
  for (auto get : kIsaTables)
    if (const CpuKernels* a = get(); a && n < max) out[n++] = a;
  return n;
}

}  // namespace minfer::cpu
