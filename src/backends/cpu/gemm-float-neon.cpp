// ARMv8.0 Advanced SIMD GEMMs of F16 / BF16 weights over their element-major repacked layout
// (repack.h: a group of 16 rows is w[n_in][16]) and f32 activation rows holding the values
// already rounded to F16 / BF16 (op_matmul, kernels.h). Element e of a group is two 16-byte
// loads widened to four f32 vectors (F16: FCVTL / FCVTL2; BF16: USHLL by 16); each token's x_e
// is a lane of a vector of 4 consecutive activations (FMLA by element). One accumulator per
// (row quad, token):
//   s = fma(w_e, x_e, s)  for e = 0 .. n_in - 1 in order
// the float order of gemm-ref.cpp's gemm_f16 / gemm_bf16 and the x86 kernels, so the results
// are bit-identical to them. Tiles (32 registers): 1 group x 4 tokens (16 accumulators, 4
// weight vectors, 4 activation vectors); decode (1-2 tokens) 2 groups x T tokens (8 T
// independent chains). A NEON region (isa-begin.h).
#include <cstdint>

#include "backends/cpu/kernels-neon.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/repack.h"

#define MINFER_ISA neon
#include "backends/cpu/isa-begin.h"
// GCC's scheduling before register allocation hoists the loads of the unrolled elements and
// spills accumulators; without it the tiles keep them in registers.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-schedule-insns")
#endif

namespace minfer::cpu::neon {
namespace {

struct F16Load {
  static void load(const uint16_t* p, float32x4_t w[4]) {
    const float16x8_t a = vreinterpretq_f16_u16(vld1q_u16(p)), b = vreinterpretq_f16_u16(vld1q_u16(p + 8));
    w[0] = vcvt_f32_f16(vget_low_f16(a));
    w[1] = vcvt_high_f32_f16(a);
    w[2] = vcvt_f32_f16(vget_low_f16(b));
    w[3] = vcvt_high_f32_f16(b);
  }
};

struct BF16Load {
  static void load(const uint16_t* p, float32x4_t w[4]) {
    const uint16x8_t a = vld1q_u16(p), b = vld1q_u16(p + 8);
    w[0] = vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(a), 16));
    w[1] = vreinterpretq_f32_u32(vshll_high_n_u16(a, 16));
    w[2] = vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(b), 16));
    w[3] = vreinterpretq_f32_u32(vshll_high_n_u16(b, 16));
  }
};

// for (int i = I; i < N; ++i) f.template operator()<i>(): lanes must be constants.
template <int I, int N, class F>
[[gnu::always_inline]] inline void static_for(F&& f) {
  if constexpr (I < N) {
    f.template operator()<I>();
    static_for<I + 1, N>(f);
  }
}

// acc[q] = fma(w[q], lane L of x, acc[q]) for the 4 quads of a group.
template <int L>
[[gnu::always_inline]] inline void fma4(float32x4_t acc[4], const float32x4_t w[4], float32x4_t x) {
  #pragma GCC unroll 4
  for (int q = 0; q < 4; ++q) acc[q] = vfmaq_laneq_f32(acc[q], w[q], x, L);
}

// Groups g .. g + G - 1, tokens t0 .. t0 + T - 1; elements 4 at a time, one activation vector
// per token (n_in is a multiple of 32).
template <class Ld, int G, int T>
[[gnu::noinline]] void tile(const GemmArgs& a, int64_t g, int64_t t0) {
  const int64_t n_in = a.n_blocks * 32;
  const size_t group = static_cast<size_t>(n_in) * kRepackRows;  // u16 per group
  const auto* w = reinterpret_cast<const uint16_t*>(a.w) + static_cast<size_t>(g) * group;
  const float* x[T];
  #pragma GCC unroll 8
  for (int i = 0; i < T; ++i) x[i] = reinterpret_cast<const float*>(a.x + static_cast<size_t>(t0 + i) * a.x_row);
  float32x4_t acc[G][T][4];
  #pragma GCC unroll 4
  for (int j = 0; j < G; ++j) {
    #pragma GCC unroll 8
    for (int i = 0; i < T; ++i) {
      #pragma GCC unroll 4
      for (int q = 0; q < 4; ++q) acc[j][i][q] = vdupq_n_f32(0.0f);
    }
  }
  for (int64_t e = 0; e < n_in; e += 4) {
    float32x4_t xv[T];
    #pragma GCC unroll 8
    for (int i = 0; i < T; ++i) xv[i] = vld1q_f32(x[i] + e);
    static_for<0, 4>([&]<int L>() {
      #pragma GCC unroll 4
      for (int j = 0; j < G; ++j) {
        float32x4_t wv[4];
        Ld::load(w + j * group + (e + L) * kRepackRows, wv);
        #pragma GCC unroll 8
        for (int i = 0; i < T; ++i) fma4<L>(acc[j][i], wv, xv[i]);
      }
    });
  }
  #pragma GCC unroll 4
  for (int j = 0; j < G; ++j) {
    #pragma GCC unroll 8
    for (int i = 0; i < T; ++i) {
      #pragma GCC unroll 4
      for (int q = 0; q < 4; ++q) vst1q_f32(a.y + (t0 + i) * a.y_stride + (g + j) * kRepackRows + 4 * q, acc[j][i][q]);
    }
  }
}

template <class Ld, int G>
void groups(const GemmArgs& a, int64_t g) {
  int64_t t = 0;
  if constexpr (G == 1) {
    for (; t + 4 <= a.n_tok; t += 4) tile<Ld, 1, 4>(a, g, t);
    if (t + 2 <= a.n_tok) tile<Ld, 1, 2>(a, g, t), t += 2;
  } else {
    for (; t + 2 <= a.n_tok; t += 2) tile<Ld, G, 2>(a, g, t);
  }
  if (t < a.n_tok) tile<Ld, G, 1>(a, g, t);
}

template <class Ld>
void gemm(const GemmArgs& a) {
  int64_t g = a.g0;
  if (a.n_tok <= 2)
    for (; g + 2 <= a.g1; g += 2) groups<Ld, 2>(a, g);
  for (; g < a.g1; ++g) groups<Ld, 1>(a, g);
}

}  // namespace

void gemm_f16(const GemmArgs& a) { gemm<F16Load>(a); }
void gemm_bf16(const GemmArgs& a) { gemm<BF16Load>(a); }

}  // namespace minfer::cpu::neon

#include "backends/cpu/isa-end.h"
