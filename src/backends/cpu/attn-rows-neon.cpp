// ARMv8.0 Advanced SIMD form of kernels.h's AttnRowsF16Fn: the narrow f16-cache attention of up
// to kAttnRowsMax query rows of one KV head as one kernel, the float steps of ops-attn.cpp's
// composed loop (dot_w64_rows_f16, online_step, f16(acc * ms), mad_rows_f16) bit for bit. Keys
// go in blocks of 8: the block's K and V rows are widened to f32 once; each row's 8 scores
// (W64 chains, neon-float.h) and online steps come first, then each row's V sums
// over the block's keys with a run of its f16 accumulator held in registers as f32 values
// (rounded by FCVTN / FCVTL after every step, as the f16 stores would). The next block's rows
// are asked for into L2 meanwhile. A NEON region (isa-begin.h); kernels-neon.cpp hands the
// table out.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "backends/cpu/attn-online.h"
#include "backends/cpu/kernels-neon.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/prefetch.h"

#define MINFER_ISA neon
#include "backends/cpu/isa-begin.h"
#include "backends/cpu/neon-float.h"

namespace minfer::cpu::neon {
namespace {

constexpr int64_t kBlock = 8;

// The W64 dot of a K row and a query row, n a multiple of 64 (no tail).
inline float key_dot(const float* k, const float* q, int64_t n) {
  return w64_dot(n, [&](int64_t e, float32x4_t& x, float32x4_t& y) {
    x = vld1q_f32(k + e);
    y = vld1q_f32(q + e);
  });
}

// Dimensions i .. i + 4 U - 1 of one row's f16 accumulator y over the block's nb keys: on a new
// maximum y = f16(y * ms[b]), then y = f16(fma(v_b, p[b], y)).
template <int U>
inline void v_run(uint16_t* y, const float (*vf)[kAttnRowsMaxDim], int64_t i, int64_t nb, const float* p, const float* ms) {
  float32x4_t x[U];
  for (int u = 0; u < U; u += 2) load_f16x8(y + i + 4 * u, x[u], x[u + 1]);
  for (int64_t b = 0; b < nb; ++b) {
    if (ms[b] != 1.0f)  // acc * 1 would change nothing
      for (int u = 0; u < U; ++u) x[u] = round_f16(vmulq_n_f32(x[u], ms[b]));
    for (int u = 0; u < U; ++u) x[u] = round_f16(vfmaq_n_f32(x[u], vld1q_f32(vf[b] + i + 4 * u), p[b]));
  }
  for (int u = 0; u < U; u += 2) store_f16x8(y + i + 4 * u, x[u], x[u + 1]);
}

}  // namespace

void attn_rows_f16(const AttnWideArgs& a) {
  const int64_t R = a.G, hd = a.hd, hd_v = a.hd_v;
  const size_t k_bytes = static_cast<size_t>(hd) * 2, v_bytes = static_cast<size_t>(hd_v) * 2;
  alignas(16) uint16_t acc[kAttnRowsMax][kAttnRowsMaxDim];  // [R][hd_v] the f16 V sums
  alignas(16) float kf[kBlock][kAttnRowsMaxDim];            // [nb][hd] the block's K rows in f32
  alignas(16) float vf[kBlock][kAttnRowsMaxDim];            // [nb][hd_v]
  float m[kAttnRowsMax], l[kAttnRowsMax];                   // [R] running max and sum
  for (int64_t r = 0; r < R; ++r) {
    std::fill(acc[r], acc[r] + hd_v, uint16_t{0});
    m[r] = -INFINITY;
    l[r] = 0.0f;
  }
  for (int64_t j = 0; j < std::min(a.n_kv, kBlock); ++j) {
    prefetch_lines_l2(a.k_at(j), k_bytes);
    prefetch_lines_l2(a.v_at(j), v_bytes);
  }
  for (int64_t j0 = 0; j0 < a.n_kv; j0 += kBlock) {
    const int64_t nb = std::min(kBlock, a.n_kv - j0);
    for (int64_t j = j0 + kBlock; j < std::min(a.n_kv, j0 + 2 * kBlock); ++j) {
      prefetch_lines_l2(a.k_at(j), k_bytes);
      prefetch_lines_l2(a.v_at(j), v_bytes);
    }
    for (int64_t b = 0; b < nb; ++b) {
      widen_row4(a.k_at(j0 + b), hd, true, kf[b]);
      widen_row4(a.v_at(j0 + b), hd_v, true, vf[b]);
    }
    float p[kAttnRowsMax][kBlock], ms[kAttnRowsMax][kBlock];  // [R][nb] weights, rescale factors
    for (int64_t r = 0; r < R; ++r) {
      const float* qr = a.q + r * a.q_stride;
      for (int64_t b = 0; b < nb; ++b) {
        const OnlineStep st = online_step(narrow_score(key_dot(kf[b], qr, hd), a.scale, a.softcap), m[r], l[r]);
        p[r][b] = st.p;
        ms[r][b] = st.ms;
      }
    }
    for (int64_t r = 0; r < R; ++r) {
      int64_t i = 0;
      for (; i + 32 <= hd_v; i += 32) v_run<8>(acc[r], vf, i, nb, p[r], ms[r]);
      for (; i < hd_v; i += 16) v_run<4>(acc[r], vf, i, nb, p[r], ms[r]);
    }
  }
  for (int64_t r = 0; r < R; ++r) {
    const float32x4_t inv = vdupq_n_f32(l[r] == 0.0f ? 0.0f : 1.0f / l[r]);
    float* yr = a.y + r * a.y_stride;
    for (int64_t i = 0; i < hd_v; i += 8) {
      float32x4_t lo, hi;
      load_f16x8(acc[r] + i, lo, hi);
      vst1q_f32(yr + i, vmulq_f32(lo, inv));
      vst1q_f32(yr + i + 4, vmulq_f32(hi, inv));
    }
  }
}

}  // namespace minfer::cpu::neon

#include "backends/cpu/isa-end.h"
