// AVX2 (+ FMA, F16C) GEMMs of F16 / BF16 weights over their element-major repacked layout
// (repack.h: a group of 16 rows is w[n_in][16]) and f32 activation rows holding the values
// already rounded to F16 / BF16 (op_matmul, kernels.h). Element e of a group is two 16-byte
// loads (rows 0-7, 8-15), each widened to one ymm of f32 (F16: vcvtph2ps; BF16: zero-extend
// to 32 bits, shift left 16); each token's x_e is broadcast from memory. One accumulator per
// (row half, token):
//   s = fma(w_e, x_e, s)  for e = 0 .. n_in - 1 in order
// the float order of gemm-ref.cpp's gemm_f16 / gemm_bf16 and gemm-float-avx512.cpp, so the
// results are bit-identical to both.
// Tiles (16 ymm registers): 1 group x 6 tokens (12 accumulators, 2 weight vectors; ~105
// GFLOP/s a Zen 4 core, 2.6x the row kernels); decode (1-2 tokens) 2 groups x T tokens (4 T
// independent chains). With one 2-D accumulator array over both halves GCC 12 stored every
// accumulator to the stack each element (~42 GFLOP/s): hence lo and hi.
// An AVX2 region (isa-begin.h).
#include <immintrin.h>

#include <cstdint>

#include "backends/cpu/kernels-avx2.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/repack.h"

#define MINFER_ISA avx2
#include "backends/cpu/isa-begin.h"

namespace minfer::cpu::avx2 {
namespace {

struct F16Load {
  static __m256 load(const uint16_t* p) { return _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(p))); }
};

struct BF16Load {
  static __m256 load(const uint16_t* p) {
    const __m256i u = _mm256_cvtepu16_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(u, 16));
  }
};

// Groups g .. g + G - 1, tokens t0 .. t0 + T - 1 (the loads are 16-byte aligned: repack.h).
template <class L, int G, int T>
void tile(const GemmArgs& a, int64_t g, int64_t t0) {
  const int64_t n_in = a.n_blocks * 32;
  const size_t group = static_cast<size_t>(n_in) * kRepackRows;  // u16 per group
  const auto* w = reinterpret_cast<const uint16_t*>(a.w) + static_cast<size_t>(g) * group;
  const float* x[T];
  for (int i = 0; i < T; ++i) x[i] = reinterpret_cast<const float*>(a.x + static_cast<size_t>(t0 + i) * a.x_row);
  __m256 lo[G][T], hi[G][T];  // rows 0-7, 8-15 (one 2-D array per half keeps GCC from spilling)
  for (int j = 0; j < G; ++j)
    for (int i = 0; i < T; ++i) lo[j][i] = hi[j][i] = _mm256_setzero_ps();
  for (int64_t e = 0; e < n_in; ++e) {
    __m256 wl[G], wh[G];
    for (int j = 0; j < G; ++j) {
      wl[j] = L::load(w + j * group + e * kRepackRows);
      wh[j] = L::load(w + j * group + e * kRepackRows + 8);
    }
    for (int i = 0; i < T; ++i) {
      const __m256 xv = _mm256_broadcast_ss(x[i] + e);
      for (int j = 0; j < G; ++j) {
        lo[j][i] = _mm256_fmadd_ps(wl[j], xv, lo[j][i]);
        hi[j][i] = _mm256_fmadd_ps(wh[j], xv, hi[j][i]);
      }
    }
  }
  for (int j = 0; j < G; ++j)
    for (int i = 0; i < T; ++i) {
      _mm256_storeu_ps(a.y + (t0 + i) * a.y_stride + (g + j) * kRepackRows, lo[j][i]);
      _mm256_storeu_ps(a.y + (t0 + i) * a.y_stride + (g + j) * kRepackRows + 8, hi[j][i]);
    }
}

// Tokens t0 .. t0 + n - 1 (n < kMaxT) of groups g .. g + G - 1.
template <class L, int G, int kMaxT>
void tile_tail(const GemmArgs& a, int64_t g, int64_t t0, int64_t n) {
  if constexpr (kMaxT > 1) {
    if (n == kMaxT - 1) return tile<L, G, kMaxT - 1>(a, g, t0);
    tile_tail<L, G, kMaxT - 1>(a, g, t0, n);
  }
}

template <class L, int G, int kT>
void groups(const GemmArgs& a, int64_t g) {
  int64_t t = 0;
  for (; t + kT <= a.n_tok; t += kT) tile<L, G, kT>(a, g, t);
  if (t < a.n_tok) tile_tail<L, G, kT>(a, g, t, a.n_tok - t);
}

template <class L>
void gemm(const GemmArgs& a) {
  int64_t g = a.g0;
  if (a.n_tok <= 2)
    for (; g + 2 <= a.g1; g += 2) groups<L, 2, 2>(a, g);
  for (; g < a.g1; ++g) groups<L, 1, 6>(a, g);
}

}  // namespace

void gemm_f16(const GemmArgs& a) { gemm<F16Load>(a); }
void gemm_bf16(const GemmArgs& a) { gemm<BF16Load>(a); }

}  // namespace minfer::cpu::avx2

#include "backends/cpu/isa-end.h"
