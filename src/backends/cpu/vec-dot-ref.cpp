// Scalar reference dot products of the float types and the 32-element block types, and the
// activation quantizers. These are the spec of the ISA versions: integer sums per block are
// exact; the 32-element block types fix their float order too (Seq or Lanes8 below), so every
// ISA version of them is bit-identical to these; the float types agree to within float rounding.
#include <climits>
#include <cmath>
#include <cstring>
#include <vector>

#include "backends/cpu/kernels-ref.h"
#include "core/fp16.h"
#include "quant/blocks.h"
#include "quant/quant.h"

namespace minfer::cpu::ref {
namespace {

// Plain f32 sum with 8 interleaved partial sums (element i goes to sum i % 8; the partial sums
// are added pairwise at the end). The fixed order makes the reference deterministic and lets
// the compiler keep the partial sums in vector registers.
template <typename Load>
float dot_f32_order(int64_t n, Load load) {
  float acc[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) acc[k] += load(i + k);
  for (; i < n; ++i) acc[i % 8] += load(i);
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

// Low nibble of byte i for elements 0..15 of a block, high nibble for 16..31 (Q4_0 order).
inline int nibble(const uint8_t* qs, int i) { return i < 16 ? (qs[i] & 0x0f) : (qs[i - 16] >> 4); }

// Bit i of a Q5 block's 32-bit high-bit mask (little-endian bytes).
inline int high_bit(const uint8_t* qh, int i) { return (qh[i / 8] >> (i % 8)) & 1; }

}  // namespace

float vec_dot_f32(int64_t n, const void* w, const void* x) {
  const float* a = static_cast<const float*>(w);
  const float* b = static_cast<const float*>(x);
  return dot_f32_order(n, [&](int64_t i) { return a[i] * b[i]; });
}

float vec_dot_f16(int64_t n, const void* w, const void* x) {
  const uint16_t* a = static_cast<const uint16_t*>(w);
  const uint16_t* b = static_cast<const uint16_t*>(x);
  return dot_f32_order(n, [&](int64_t i) { return f16_lookup(a[i]) * f16_lookup(b[i]); });
}

float vec_dot_bf16(int64_t n, const void* w, const void* x) {
  const uint16_t* a = static_cast<const uint16_t*>(w);
  const uint16_t* b = static_cast<const uint16_t*>(x);
  return dot_f32_order(n, [&](int64_t i) { return bf16_to_fp32(a[i]) * bf16_to_fp32(b[i]); });
}

namespace {

// The float order of Q4_1, the same on every ISA (the AVX2 kernels compute exactly this, and
// so does llama.cpp's x86 build): lane l (0..7) of a block is the
// integer sum of elements 4l..4l+3; lane l accumulates fma(d_w * d_x, lane, acc_l) over the
// blocks in order; the lanes are added as ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7));
// the mins of Q4_1/Q5_1 (m_w * s_x per block) are summed separately in block order, added last.
struct Lanes8 {
  float acc[8] = {};
  float mins = 0.0f;
  // w: the block's 32 integer weights (element order), x: its 32 activation bytes.
  void add(float d, const int* w, const int8_t* x) {
    for (int l = 0; l < 8; ++l) {
      int lane = 0;
      for (int e = 4 * l; e < 4 * l + 4; ++e) lane += w[e] * x[e];
      acc[l] = std::fma(d, static_cast<float>(lane), acc[l]);
    }
  }
  float sum() const {
    return ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7])) + mins;
  }
};

inline float dxw(uint16_t a, uint16_t b) { return fp16_to_fp32(a) * fp16_to_fp32(b); }

// The float order of Q4_0, Q5_0, Q5_1, Q8_0 and IQ4_NL: one exact integer sum per block,
// accumulated as s = fma(d_w * d_x, isum, s) in block order (Q5_1: then s = fma(m_w, s_x, s)
// for the block's min). One float per (row, token) lets the repacked GEMM kernels (repack.h)
// keep 16 rows in the lanes of one vector and follow it exactly, so decode (GEMV), prefill
// (GEMM) and every ISA give the same bits for a (row, token) pair. (IQ4_NL used Lanes8, as
// llama.cpp's x86 build does, until it got a GEMM; the results differ only by float rounding.)
struct Seq {
  float s = 0.0f;
  void add(float d, const int* w, const int8_t* x) {
    int isum = 0;
    for (int e = 0; e < kQK; ++e) isum += w[e] * x[e];
    s = std::fma(d, static_cast<float>(isum), s);
  }
  // Q5_1: the block's min term right after its integer term.
  void add_min(float m_w, float s_x) { s = std::fma(m_w, s_x, s); }
  float sum() const { return s; }
};

}  // namespace

// sum_b d_w * d_x * sum_i (q_i - 8) * x_i
float vec_dot_q4_0(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const BlockQ4_0*>(w);
  const auto* b = static_cast<const BlockQ8_0*>(x);
  Seq acc;
  int q[kQK];
  for (int64_t ib = 0; ib < n / kQK; ++ib) {
    for (int i = 0; i < kQK; ++i) q[i] = nibble(a[ib].qs, i) - 8;
    acc.add(dxw(a[ib].d, b[ib].d), q, b[ib].qs);
  }
  return acc.sum();
}

// sum_b d_w * d_x * sum_i q_i * x_i + m_w * s_x   (s_x = d_x * sum_i x_i, stored in the Q8_1 block)
float vec_dot_q4_1(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const BlockQ4_1*>(w);
  const auto* b = static_cast<const BlockQ8_1*>(x);
  Lanes8 acc;
  int q[kQK];
  for (int64_t ib = 0; ib < n / kQK; ++ib) {
    for (int i = 0; i < kQK; ++i) q[i] = nibble(a[ib].qs, i);
    acc.add(dxw(a[ib].d, b[ib].d), q, b[ib].qs);
    acc.mins += dxw(a[ib].m, b[ib].s);
  }
  return acc.sum();
}

float vec_dot_q5_0(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const BlockQ5_0*>(w);
  const auto* b = static_cast<const BlockQ8_0*>(x);
  Seq acc;
  int q[kQK];
  for (int64_t ib = 0; ib < n / kQK; ++ib) {
    for (int i = 0; i < kQK; ++i) q[i] = (nibble(a[ib].qs, i) | (high_bit(a[ib].qh, i) << 4)) - 16;
    acc.add(dxw(a[ib].d, b[ib].d), q, b[ib].qs);
  }
  return acc.sum();
}

float vec_dot_q5_1(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const BlockQ5_1*>(w);
  const auto* b = static_cast<const BlockQ8_1*>(x);
  Seq acc;
  int q[kQK];
  for (int64_t ib = 0; ib < n / kQK; ++ib) {
    for (int i = 0; i < kQK; ++i) q[i] = nibble(a[ib].qs, i) | (high_bit(a[ib].qh, i) << 4);
    acc.add(dxw(a[ib].d, b[ib].d), q, b[ib].qs);
    acc.add_min(fp16_to_fp32(a[ib].m), fp16_to_fp32(b[ib].s));
  }
  return acc.sum();
}

float vec_dot_q8_0(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const BlockQ8_0*>(w);
  const auto* b = static_cast<const BlockQ8_0*>(x);
  Seq acc;
  int q[kQK];
  for (int64_t ib = 0; ib < n / kQK; ++ib) {
    for (int i = 0; i < kQK; ++i) q[i] = a[ib].qs[i];
    acc.add(dxw(a[ib].d, b[ib].d), q, b[ib].qs);
  }
  return acc.sum();
}

float vec_dot_iq4_nl(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const BlockIQ4_NL*>(w);
  const auto* b = static_cast<const BlockQ8_0*>(x);
  Seq acc;
  int q[kQK];
  for (int64_t ib = 0; ib < n / kQK; ++ib) {
    for (int i = 0; i < kQK; ++i) q[i] = kIq4nlValues[nibble(a[ib].qs, i)];
    acc.add(dxw(a[ib].d, b[ib].d), q, b[ib].qs);
  }
  return acc.sum();
}

// ---- attention ------------------------------------------------------------------------------

// The W64 order of kernels.h. Each lane is one fused multiply-add chain; acc[16 * g + l] is
// lane l of group g.
template <class T, class ToF32>
float dot_w64(int64_t n, const T* x, const T* y, ToF32 f32) {
  float acc[64] = {};
  const int64_t np = n / 64 * 64;
  for (int64_t i = 0; i < np; i += 64)
    for (int e = 0; e < 64; ++e) acc[e] = std::fma(f32(x[i + e]), f32(y[i + e]), acc[e]);
  float a[16];
  for (int l = 0; l < 16; ++l) a[l] = (acc[l] + acc[32 + l]) + (acc[16 + l] + acc[48 + l]);
  for (int w = 8; w >= 1; w /= 2)
    for (int l = 0; l < w; ++l) a[l] = a[l] + a[l + w];
  double sum = a[0];
  for (int64_t i = np; i < n; ++i) sum += static_cast<double>(f32(x[i]) * f32(y[i]));
  return static_cast<float>(sum);
}

float dot_w64_f16(int64_t n, const uint16_t* x, const uint16_t* y) {
  return dot_w64(n, x, y, [](uint16_t h) { return f16_lookup(h); });
}

float dot_w64_f32(int64_t n, const float* x, const float* y) {
  return dot_w64(n, x, y, [](float f) { return f; });
}

void mad_f16(int64_t n, uint16_t* y, const uint16_t* x, float v) {
  for (int64_t i = 0; i < n; ++i) y[i] = fp32_to_fp16(std::fma(f16_lookup(x[i]), v, f16_lookup(y[i])));
}

// By definition: the one-row kernels above, row by row (q_r rounds to f16 exactly).
void dot_w64_rows_f16(int64_t n, const uint16_t* k, const float* q, int64_t q_stride, int64_t n_rows, float* s) {
  std::vector<uint16_t> q16(static_cast<size_t>(n));  // [n] one query row in f16
  for (int64_t r = 0; r < n_rows; ++r) {
    for (int64_t i = 0; i < n; ++i) q16[static_cast<size_t>(i)] = fp32_to_fp16(q[r * q_stride + i]);
    s[r] = dot_w64_f16(n, k, q16.data());
  }
}

void mad_rows_f16(int64_t n, uint16_t* acc, int64_t acc_stride, const uint16_t* v, const float* p, int64_t n_rows) {
  for (int64_t r = 0; r < n_rows; ++r) mad_f16(n, acc + r * acc_stride, v, p[r]);
}

void mad_rows_f32(int64_t n, float* acc, int64_t acc_stride, const float* v, const float* p, int64_t n_rows) {
  for (int64_t r = 0; r < n_rows; ++r) {
    float* y = acc + r * acc_stride;
    for (int64_t i = 0; i < n; ++i) y[i] = std::fma(v[i], p[r], y[i]);
  }
}

void row_to_f32_q8_0(int64_t n, const void* x, float* y) { dequantize_row(DType::Q8_0, x, y, n); }
void row_to_f32_q4_0(int64_t n, const void* x, float* y) { dequantize_row(DType::Q4_0, x, y, n); }

void silu_row(int64_t n, float* y, const float* x) {
  const int64_t nv = n / 16 * 16;
  for (int64_t i = 0; i < nv; ++i) y[i] = x[i] / (1.0f + exp_poly(0.0f - x[i]));
  for (int64_t i = nv; i < n; ++i) y[i] = x[i] / (1.0f + std::exp(-x[i]));
}

// ---- activation quantizers ----------------------------------------------------------------

void quantize_f32(const float* x, void* y, int64_t n) { std::memcpy(y, x, static_cast<size_t>(n) * sizeof(float)); }

void quantize_f16(const float* x, void* y, int64_t n) {
  uint16_t* o = static_cast<uint16_t*>(y);
  for (int64_t i = 0; i < n; ++i) o[i] = fp32_to_fp16(x[i]);
}

void quantize_bf16(const float* x, void* y, int64_t n) {
  uint16_t* o = static_cast<uint16_t*>(y);
  for (int64_t i = 0; i < n; ++i) o[i] = fp32_to_bf16(x[i]);
}

// Q8_0 / Q8_1 activations: d = max|x| / 127 stored as f16, q = round-half-even(x * 127 / max|x|)
// with the f32 reciprocal 127 / max (not 1 / d). This is the rounding of llama.cpp's x86 path;
// the weight quantizer (quant/legacy.cpp) rounds half away from zero and scales by 1 / d, as
// gguf-py does. A different choice here flips about one element in 10^5, and with quantized
// activations one flip can move a random model's logits by ~0.1 (see docs/design-cpu-numerics.md).
template <typename Block>
void quantize_q8_blocks(const float* x, Block* b, int64_t n, bool with_sum) {
  for (int64_t ib = 0; ib < n / kQK; ++ib, x += kQK) {
    float amax = 0.0f;
    for (int i = 0; i < kQK; ++i) amax = std::fmax(amax, std::fabs(x[i]));
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    int sum = 0;
    for (int i = 0; i < kQK; ++i) {
      // NaN and out-of-range values become INT_MIN, as x86's conversions give (and the vector
      // quantizers get); the sum wraps as their integer adds do. No undefined behaviour.
      const float v = std::nearbyint(x[i] * id);
      const int q = v >= -2147483648.0f && v < 2147483648.0f ? static_cast<int>(v) : INT_MIN;
      b[ib].qs[i] = static_cast<int8_t>(q);
      sum = static_cast<int>(static_cast<unsigned>(sum) + static_cast<unsigned>(q));
    }
    b[ib].d = fp32_to_fp16(d);
    if constexpr (requires { b[ib].s; }) {
      if (with_sum) b[ib].s = fp32_to_fp16(static_cast<float>(sum) * d);
    }
  }
}

void quantize_q8_0(const float* x, void* y, int64_t n) { quantize_q8_blocks(x, static_cast<BlockQ8_0*>(y), n, false); }

void quantize_q8_1(const float* x, void* y, int64_t n) { quantize_q8_blocks(x, static_cast<BlockQ8_1*>(y), n, true); }

void quantize_q8_k(const float* x, void* y, int64_t n) { quantize_row(DType::Q8_K, x, y, n); }

}  // namespace minfer::cpu::ref
