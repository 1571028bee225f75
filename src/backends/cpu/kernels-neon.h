// The AArch64 kernels, gathered into the "neon", "dotprod" and "i8mm" tables by
// kernels-neon.cpp: namespace cpu::neon (ARMv8.0 Advanced SIMD, every AArch64 CPU),
// cpu::dotprod (+ SDOT/UDOT) and cpu::i8mm (+ SMMLA/UMMLA). Defined in ISA regions
// (isa-begin.h); call only after the OS's feature flags say so. A table starts from the one
// below it (ref -> neon -> dotprod -> i8mm) and replaces the entries its ISA makes faster;
// each kernel is bit-identical to its scalar reference.
#pragma once

#include <cstdint>

namespace minfer::cpu {
struct GemmArgs;
struct AttnWideArgs;
struct AttnTileArgs;
}

namespace minfer::cpu::neon {

// vec-dot-neon.cpp
float vec_dot_f32(int64_t n, const void* w, const void* x);
float vec_dot_f16(int64_t n, const void* w, const void* x);
float vec_dot_bf16(int64_t n, const void* w, const void* x);
float vec_dot_q4_0(int64_t n, const void* w, const void* x);
float vec_dot_q4_1(int64_t n, const void* w, const void* x);
float vec_dot_q5_0(int64_t n, const void* w, const void* x);
float vec_dot_q5_1(int64_t n, const void* w, const void* x);
float vec_dot_q8_0(int64_t n, const void* w, const void* x);
float vec_dot_iq4_nl(int64_t n, const void* w, const void* x);
void quantize_f16(const float* x, void* y, int64_t n);
void quantize_bf16(const float* x, void* y, int64_t n);
void quantize_q8_0(const float* x, void* y, int64_t n);
void quantize_q8_1(const float* x, void* y, int64_t n);
// vec-dot-kquant-neon.cpp
float vec_dot_q2_k(int64_t n, const void* w, const void* x);
float vec_dot_q3_k(int64_t n, const void* w, const void* x);
float vec_dot_q4_k(int64_t n, const void* w, const void* x);
float vec_dot_q5_k(int64_t n, const void* w, const void* x);
float vec_dot_q6_k(int64_t n, const void* w, const void* x);
float vec_dot_iq4_xs(int64_t n, const void* w, const void* x);
void quantize_q8_k(const float* x, void* y, int64_t n);

// float-neon.cpp: the narrow attention's row kernels, quantized cache rows to f32
float dot_w64_f16(int64_t n, const uint16_t* x, const uint16_t* y);
float dot_w64_f32(int64_t n, const float* x, const float* y);
void mad_f16(int64_t n, uint16_t* y, const uint16_t* x, float v);
void dot_w64_rows_f16(int64_t n, const uint16_t* k, const float* q, int64_t q_stride, int64_t n_rows, float* s);
void mad_rows_f16(int64_t n, uint16_t* acc, int64_t acc_stride, const uint16_t* v, const float* p, int64_t n_rows);
void mad_rows_f32(int64_t n, float* acc, int64_t acc_stride, const float* v, const float* p, int64_t n_rows);
void row_to_f32_q8_0(int64_t n, const void* x, float* y);
void row_to_f32_q4_0(int64_t n, const void* x, float* y);
// silu-neon.cpp, rope-row-neon.cpp
void silu_row(int64_t n, float* y, const float* x);
void rope_row(int64_t half, bool neox, const float* cos, const float* sin, const float* x, float* y);
// attn-wide-neon.cpp, attn-tile-neon.cpp, attn-rows-neon.cpp
void attn_wide(const AttnWideArgs& a);
void attn_tile(const AttnTileArgs& a);
void attn_rows_f16(const AttnWideArgs& a);
// gemm-float-neon.cpp: F16 / BF16 GEMMs over repacked weights (kernels.h, GemmArgs)
void gemm_f16(const GemmArgs& a);
void gemm_bf16(const GemmArgs& a);

}  // namespace minfer::cpu::neon

namespace minfer::cpu::dotprod {

// vec-dot-dotprod.cpp
float vec_dot_q4_0(int64_t n, const void* w, const void* x);
float vec_dot_q4_1(int64_t n, const void* w, const void* x);
float vec_dot_q5_0(int64_t n, const void* w, const void* x);
float vec_dot_q5_1(int64_t n, const void* w, const void* x);
float vec_dot_q8_0(int64_t n, const void* w, const void* x);
float vec_dot_iq4_nl(int64_t n, const void* w, const void* x);
// vec-dot-kquant-dotprod.cpp
float vec_dot_q2_k(int64_t n, const void* w, const void* x);
float vec_dot_q3_k(int64_t n, const void* w, const void* x);
float vec_dot_q4_k(int64_t n, const void* w, const void* x);
float vec_dot_q5_k(int64_t n, const void* w, const void* x);
float vec_dot_q6_k(int64_t n, const void* w, const void* x);
float vec_dot_iq4_xs(int64_t n, const void* w, const void* x);

// gemm-dotprod.cpp: GEMMs over repacked weights (kernels.h, GemmArgs)
void gemm_q4_0(const GemmArgs& a);
void gemm_q5_0(const GemmArgs& a);
void gemm_q8_0(const GemmArgs& a);
void gemm_q4_1(const GemmArgs& a);
void gemm_q5_1(const GemmArgs& a);
void gemm_iq4_nl(const GemmArgs& a);
// gemm-kquant-dotprod.cpp
void gemm_q2_k(const GemmArgs& a);
void gemm_q3_k(const GemmArgs& a);
void gemm_q4_k(const GemmArgs& a);
void gemm_q5_k(const GemmArgs& a);
void gemm_q6_k(const GemmArgs& a);
void gemm_iq4_xs(const GemmArgs& a);

}  // namespace minfer::cpu::dotprod

namespace minfer::cpu::i8mm {

// gemm-i8mm.cpp: SMMLA GEMMs over repacked weights (kernels.h, GemmArgs)
void gemm_q4_0(const GemmArgs& a);
void gemm_q8_0(const GemmArgs& a);
void gemm_q5_0(const GemmArgs& a);
void gemm_iq4_nl(const GemmArgs& a);
// gemm-kquant-i8mm.cpp
void gemm_q4_k(const GemmArgs& a);
void gemm_q6_k(const GemmArgs& a);

}  // namespace minfer::cpu::i8mm
