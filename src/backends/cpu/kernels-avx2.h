// The AVX2 + FMA + F16C kernels (namespace cpu::avx2), gathered into the "avx2" table by
// kernels-avx2.cpp. Defined in ISA regions (isa-begin.h); call only after cpuid says so.
#pragma once

#include <cstdint>

namespace minfer::cpu {
struct GemmArgs;
struct AttnWideArgs;
struct AttnTileArgs;
}

namespace minfer::cpu::avx2 {

// gemm-avx2.cpp
void gemm_q4_0(const GemmArgs& a);
void gemm_q5_0(const GemmArgs& a);
void gemm_q8_0(const GemmArgs& a);
void gemm_q4_1(const GemmArgs& a);
void gemm_q5_1(const GemmArgs& a);
// gemm-float-avx2.cpp (x: f32 rows of the F16 / BF16-rounded activations, kernels.h)
void gemm_f16(const GemmArgs& a);
void gemm_bf16(const GemmArgs& a);
// gemm-iq4-avx2.cpp
void gemm_iq4_nl(const GemmArgs& a);
void gemm_iq4_xs(const GemmArgs& a);
// gemm-kquant-avx2.cpp
void gemm_q5_k(const GemmArgs& a);
void gemm_q3_k(const GemmArgs& a);
void gemm_q2_k(const GemmArgs& a);
void gemm_q4_k(const GemmArgs& a);
void gemm_q6_k(const GemmArgs& a);

// vec-dot-avx2.cpp
void quantize_q8_0(const float* x, void* y, int64_t n);
void quantize_q8_1(const float* x, void* y, int64_t n);
void quantize_q8_k(const float* x, void* y, int64_t n);  // quantize-q8k-avx2.cpp
float vec_dot_f32(int64_t n, const void* w, const void* x);
float vec_dot_f16(int64_t n, const void* w, const void* x);
float vec_dot_bf16(int64_t n, const void* w, const void* x);
float vec_dot_q4_0(int64_t n, const void* w, const void* x);
float vec_dot_q4_1(int64_t n, const void* w, const void* x);
float vec_dot_q5_0(int64_t n, const void* w, const void* x);
float vec_dot_q5_1(int64_t n, const void* w, const void* x);
float vec_dot_q8_0(int64_t n, const void* w, const void* x);
float vec_dot_iq4_nl(int64_t n, const void* w, const void* x);
float dot_w64_f16(int64_t n, const uint16_t* x, const uint16_t* y);
float dot_w64_f32(int64_t n, const float* x, const float* y);
void mad_f16(int64_t n, uint16_t* y, const uint16_t* x, float v);
void dot_w64_rows_f16(int64_t n, const uint16_t* k, const float* q, int64_t q_stride, int64_t n_rows, float* s);
void mad_rows_f16(int64_t n, uint16_t* acc, int64_t acc_stride, const uint16_t* v, const float* p, int64_t n_rows);
void mad_rows_f32(int64_t n, float* acc, int64_t acc_stride, const float* v, const float* p, int64_t n_rows);
void row_to_f32_q8_0(int64_t n, const void* x, float* y);
void quantize_f16(const float* x, void* y, int64_t n);
void row_to_f32_q4_0(int64_t n, const void* x, float* y);
void silu_row(int64_t n, float* y, const float* x);
void rope_row(int64_t half, bool neox, const float* cos, const float* sin, const float* x, float* y);  // rope-row-avx2.cpp
void attn_wide(const AttnWideArgs& a);  // attn-wide-*.cpp
void attn_tile(const AttnTileArgs& a);  // attn-tile-*.cpp
// vec-dot-kquant-avx2.cpp
float vec_dot_q2_k(int64_t n, const void* w, const void* x);
float vec_dot_q3_k(int64_t n, const void* w, const void* x);
float vec_dot_q4_k(int64_t n, const void* w, const void* x);
float vec_dot_q5_k(int64_t n, const void* w, const void* x);
float vec_dot_q6_k(int64_t n, const void* w, const void* x);
float vec_dot_iq4_xs(int64_t n, const void* w, const void* x);

}  // namespace minfer::cpu::avx2
