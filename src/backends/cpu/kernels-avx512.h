// The AVX-512 (F, BW, VL, DQ, VNNI) kernels (namespace cpu::avx512), gathered into the "avx512"
// table by kernels-avx512.cpp; the AMX GEMMs hand them their token tails. Defined in ISA regions
// (isa-begin.h); call only after cpuid says so.
#pragma once

#include <cstdint>

namespace minfer::cpu {
struct GemmArgs;
struct AttnWideArgs;
struct AttnTileArgs;
}

namespace minfer::cpu::avx512 {

void gemm_q4_0(const GemmArgs& a);  // gemm-avx512.cpp
void gemm_q5_0(const GemmArgs& a);
void gemm_q8_0(const GemmArgs& a);
void gemm_q4_k(const GemmArgs& a);
void gemm_q6_k(const GemmArgs& a);
void gemm_q5_1(const GemmArgs& a);
void gemm_q4_1(const GemmArgs& a);
void gemm_f16(const GemmArgs& a);  // gemm-float-avx512.cpp
void gemm_bf16(const GemmArgs& a);
void gemm_iq4_nl(const GemmArgs& a);  // gemm-iq4-avx512.cpp
void gemm_iq4_xs(const GemmArgs& a);
void gemm_q5_k(const GemmArgs& a);  // gemm-kquant-avx512.cpp
void gemm_q3_k(const GemmArgs& a);
void gemm_q2_k(const GemmArgs& a);
void attn_wide(const AttnWideArgs& a);  // attn-wide-avx512.cpp
void attn_tile(const AttnTileArgs& a);  // attn-tile-avx512.cpp
void dot_w64_rows_f16(int64_t n, const uint16_t* k, const float* q, int64_t q_stride, int64_t n_rows, float* s);  // attn-rows-avx512.cpp
void mad_rows_f16(int64_t n, uint16_t* acc, int64_t acc_stride, const uint16_t* v, const float* p, int64_t n_rows);
void attn_rows_f16(const AttnWideArgs& a);
void silu_row(int64_t n, float* y, const float* x);  // silu-avx512.cpp

}  // namespace minfer::cpu::avx512
