// AVX-512 GEMMs of F16 / BF16 weights over their element-major repacked layout (repack.h: a
// group of 16 rows is w[n_in][16]) and f32 activation rows holding the values already rounded
// to F16 / BF16 (op_matmul, kernels.h). One 32-byte load is element e of the group's 16 rows,
// widened to one zmm of f32 (F16: vcvtph2ps; BF16: zero-extend to 32 bits, shift left 16);
// each token's x_e is broadcast from memory. One accumulator per (group, token):
//   s = fma(w_e, x_e, s)  for e = 0 .. n_in - 1 in order
// the float order of gemm-ref.cpp's gemm_f16 / gemm_bf16, so the results are bit-identical to
// it, whatever the batch and the tiling.
// Tiles: G groups x T tokens of accumulators. Prefill (4+ tokens): 4 x 6 (24 accumulators; 4
// weight vectors and 6 broadcasts per element) runs at the fma throughput (measured on a Zen 4
// core: ~114 GFLOP/s, one zmm fma a cycle; 3 x 8 the same; 2 x 8 and 2 x 12 ~96-100).
// Decode (1-3 tokens): 4 groups at once, so 4 x T independent fma chains hide the fma latency
// while the weights stream from memory (2 groups: ~20% slower; 8 groups: no faster). Group
// counts left over: 2 x 8, then 1 x 8.
// An AVX-512 region (isa-begin.h); called only after cpuid says so (kernels-avx512.cpp).
#include <immintrin.h>

#include <cstdint>

#include "backends/cpu/kernels.h"
#include "backends/cpu/repack.h"

#define MINFER_ISA avx512
#include "backends/cpu/isa-begin.h"

namespace minfer::cpu::avx512 {
namespace {

struct F16Load {
  static __m512 load(const uint16_t* p) { return _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(p))); }
};

struct BF16Load {
  static __m512 load(const uint16_t* p) {
    const __m512i u = _mm512_cvtepu16_epi32(_mm256_load_si256(reinterpret_cast<const __m256i*>(p)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(u, 16));
  }
};

// Groups g .. g + G - 1, tokens t0 .. t0 + T - 1. The repacked data is 64-byte aligned and a
// group's element e sits at 32 e bytes, so the loads are aligned.
template <class L, int G, int T>
void tile(const GemmArgs& a, int64_t g, int64_t t0) {
  const int64_t n_in = a.n_blocks * 32;
  const size_t group = static_cast<size_t>(n_in) * kRepackRows;  // u16 per group
  const auto* w = reinterpret_cast<const uint16_t*>(a.w) + static_cast<size_t>(g) * group;
  const float* x[T];
  for (int i = 0; i < T; ++i) x[i] = reinterpret_cast<const float*>(a.x + static_cast<size_t>(t0 + i) * a.x_row);
  __m512 acc[G][T];
  for (int j = 0; j < G; ++j)
    for (int i = 0; i < T; ++i) acc[j][i] = _mm512_setzero_ps();
#pragma GCC unroll 2
  for (int64_t e = 0; e < n_in; ++e) {
    __m512 wv[G];
    for (int j = 0; j < G; ++j) wv[j] = L::load(w + j * group + e * kRepackRows);
    for (int i = 0; i < T; ++i) {
      const __m512 xv = _mm512_set1_ps(x[i][e]);
      for (int j = 0; j < G; ++j) acc[j][i] = _mm512_fmadd_ps(wv[j], xv, acc[j][i]);
    }
  }
  for (int j = 0; j < G; ++j)
    for (int i = 0; i < T; ++i) _mm512_storeu_ps(a.y + (t0 + i) * a.y_stride + (g + j) * kRepackRows, acc[j][i]);
}

// Tokens t0 .. t0 + n - 1 (n < kMaxT) of groups g .. g + G - 1.
template <class L, int G, int kMaxT>
void tile_tail(const GemmArgs& a, int64_t g, int64_t t0, int64_t n) {
  if constexpr (kMaxT > 1) {
    if (n == kMaxT - 1) return tile<L, G, kMaxT - 1>(a, g, t0);
    tile_tail<L, G, kMaxT - 1>(a, g, t0, n);
  }
}

// All tokens of groups g .. g + G - 1, in tiles of kT tokens.
template <class L, int G, int kT>
void groups(const GemmArgs& a, int64_t g) {
  int64_t t = 0;
  for (; t + kT <= a.n_tok; t += kT) tile<L, G, kT>(a, g, t);
  if (t < a.n_tok) tile_tail<L, G, kT>(a, g, t, a.n_tok - t);
}

template <class L>
void gemm(const GemmArgs& a) {
  int64_t g = a.g0;
  if (a.n_tok <= 3) {
    for (; g + 4 <= a.g1; g += 4) groups<L, 4, 3>(a, g);
  } else {
    for (; g + 4 <= a.g1; g += 4) groups<L, 4, 6>(a, g);
  }
  for (; g + 2 <= a.g1; g += 2) groups<L, 2, 8>(a, g);
  for (; g < a.g1; ++g) groups<L, 1, 8>(a, g);
}

}  // namespace

void gemm_f16(const GemmArgs& a) { gemm<F16Load>(a); }
void gemm_bf16(const GemmArgs& a) { gemm<BF16Load>(a); }

}  // namespace minfer::cpu::avx512

#include "backends/cpu/isa-end.h"
