// AVX2 + FMA + F16C dot products of the float types and the 32-element block types, and the
// attention inner loops; the K-quants are in vec-dot-kquant-avx2.cpp. Each computes what its
// scalar reference (vec-dot-ref.cpp) computes: integer block sums exactly, float steps in a
// different order (vector lanes), so results agree to float rounding (tests/unit/test-cpu-ops).
// An AVX2 region (isa-begin.h); kernels.cpp calls it only after cpuid.
#include <cmath>
#include <vector>

#include "backends/cpu/kernels-avx2.h"
#include "backends/cpu/kernels-ref.h"
#include "core/fp16.h"
#include "quant/blocks.h"

#define MINFER_ISA avx2
#include "backends/cpu/isa-begin.h"
#include "backends/cpu/avx2-common.h"

namespace minfer::cpu::avx2 {
namespace {

inline __m256 load_f16x8(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }

inline __m256 load_bf16x8(const uint16_t* p) {
  const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}

// sum_i a(i) * b(i) with four 8-lane accumulators; the tail goes through the reference.
template <typename LoadA, typename LoadB>
float dot_f32x8(int64_t n, LoadA la, LoadB lb, float tail) {
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  int64_t i = 0;
  for (; i + 32 <= n; i += 32)
    for (int k = 0; k < 4; ++k) acc[k] = _mm256_fmadd_ps(la(i + 8 * k), lb(i + 8 * k), acc[k]);
  for (; i + 8 <= n; i += 8) acc[0] = _mm256_fmadd_ps(la(i), lb(i), acc[0]);
  return hsum_f32(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]))) + tail;
}

inline float fp16(uint16_t h) { return _cvtsh_ss(h); }

// Q8_0 / Q8_1 activation block: d at offset 0, qs at the end.
template <typename B>
inline __m256i load_q8(const B& b) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs)); }

}  // namespace

float vec_dot_f32(int64_t n, const void* w, const void* x) {
  const float* a = static_cast<const float*>(w);
  const float* b = static_cast<const float*>(x);
  const int64_t nv = n / 8 * 8;
  float tail = 0.0f;
  for (int64_t i = nv; i < n; ++i) tail += a[i] * b[i];
  return dot_f32x8(nv, [&](int64_t i) { return _mm256_loadu_ps(a + i); }, [&](int64_t i) { return _mm256_loadu_ps(b + i); }, tail);
}

float vec_dot_f16(int64_t n, const void* w, const void* x) {
  const uint16_t* a = static_cast<const uint16_t*>(w);
  const uint16_t* b = static_cast<const uint16_t*>(x);
  const int64_t nv = n / 8 * 8;
  float tail = 0.0f;
  for (int64_t i = nv; i < n; ++i) tail += fp16(a[i]) * fp16(b[i]);
  return dot_f32x8(nv, [&](int64_t i) { return load_f16x8(a + i); }, [&](int64_t i) { return load_f16x8(b + i); }, tail);
}

float vec_dot_bf16(int64_t n, const void* w, const void* x) {
  const uint16_t* a = static_cast<const uint16_t*>(w);
  const uint16_t* b = static_cast<const uint16_t*>(x);
  const int64_t nv = n / 8 * 8;
  float tail = 0.0f;
  for (int64_t i = nv; i < n; ++i) tail += bf16_to_fp32(a[i]) * bf16_to_fp32(b[i]);
  return dot_f32x8(nv, [&](int64_t i) { return load_bf16x8(a + i); }, [&](int64_t i) { return load_bf16x8(b + i); }, tail);
}

float vec_dot_q4_0(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const BlockQ4_0*>(w);
  const auto* b = static_cast<const BlockQ8_0*>(x);
  float acc = 0.0f;  // the Seq order of vec-dot-ref.cpp
  for (int64_t ib = 0; ib < n / kQK; ++ib) {
    const __m256i q = _mm256_sub_epi8(nibbles_32(a[ib].qs), _mm256_set1_epi8(8));
    const float d = fp16(a[ib].d) * fp16(b[ib].d);
    acc = std::fma(d, static_cast<float>(hsum_i32(dot_i8_i32(q, load_q8(b[ib])))), acc);
  }
  return acc;
}

float vec_dot_q4_1(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const BlockQ4_1*>(w);
  const auto* b = static_cast<const BlockQ8_1*>(x);
  __m256 acc = _mm256_setzero_ps();
  float mins = 0.0f;
  for (int64_t ib = 0; ib < n / kQK; ++ib) {
    const __m256 d = _mm256_set1_ps(fp16(a[ib].d) * fp16(b[ib].d));
    acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(dot_u8_i32(nibbles_32(a[ib].qs), load_q8(b[ib]))), acc);
    mins += fp16(a[ib].m) * fp16(b[ib].s);
  }
  return hsum_f32(acc) + mins;
}

float vec_dot_q5_0(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const BlockQ5_0*>(w);
  const auto* b = static_cast<const BlockQ8_0*>(x);
  float acc = 0.0f;  // the Seq order of vec-dot-ref.cpp
  for (int64_t ib = 0; ib < n / kQK; ++ib) {
    // q - 16 as a signed byte: the nibble with 0xf0 set where the fifth bit is clear.
    const __m256i hi = _mm256_andnot_si256(bytes_from_bits_32(a[ib].qh), _mm256_set1_epi8(static_cast<char>(0xf0)));
    const __m256i q = _mm256_or_si256(nibbles_32(a[ib].qs), hi);
    const float d = fp16(a[ib].d) * fp16(b[ib].d);
    acc = std::fma(d, static_cast<float>(hsum_i32(dot_i8_i32(q, load_q8(b[ib])))), acc);
  }
  return acc;
}

float vec_dot_q5_1(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const BlockQ5_1*>(w);
  const auto* b = static_cast<const BlockQ8_1*>(x);
  float acc = 0.0f;  // the Seq order of vec-dot-ref.cpp
  for (int64_t ib = 0; ib < n / kQK; ++ib) {
    const __m256i hi = _mm256_and_si256(bytes_from_bits_32(a[ib].qh), _mm256_set1_epi8(0x10));
    const __m256i q = _mm256_or_si256(nibbles_32(a[ib].qs), hi);
    const float d = fp16(a[ib].d) * fp16(b[ib].d);
    acc = std::fma(d, static_cast<float>(hsum_i32(dot_u8_i32(q, load_q8(b[ib])))), acc);
    acc = std::fma(fp16(a[ib].m), fp16(b[ib].s), acc);
  }
  return acc;
}

float vec_dot_q8_0(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const BlockQ8_0*>(w);
  const auto* b = static_cast<const BlockQ8_0*>(x);
  float acc = 0.0f;  // the Seq order of vec-dot-ref.cpp
  for (int64_t ib = 0; ib < n / kQK; ++ib) {
    const float d = fp16(a[ib].d) * fp16(b[ib].d);
    acc = std::fma(d, static_cast<float>(hsum_i32(dot_i8_i32(load_q8(a[ib]), load_q8(b[ib])))), acc);
  }
  return acc;
}

float vec_dot_iq4_nl(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const BlockIQ4_NL*>(w);
  const auto* b = static_cast<const BlockQ8_0*>(x);
  const __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues));
  const __m256i table = _mm256_set_m128i(t, t);
  float acc = 0.0f;  // the Seq order of vec-dot-ref.cpp
  for (int64_t ib = 0; ib < n / kQK; ++ib) {
    const __m256i q = _mm256_shuffle_epi8(table, nibbles_32(a[ib].qs));
    const float d = fp16(a[ib].d) * fp16(b[ib].d);
    acc = std::fma(d, static_cast<float>(hsum_i32(dot_i8_i32(q, load_q8(b[ib])))), acc);
  }
  return acc;
}

// The W64 order (kernels.h) with 16 lanes as two 8-lane registers: r[2g] holds lanes 0-7 of
// group g, r[2g + 1] lanes 8-15. Then the n % 64 tail, product by product, added in double to
// the lanes' sum as the reference does (tail(e) is the f32 product of element e), so a -0 sum
// with no tail stays -0.
template <class LoadX, class LoadY, class Tail>
float dot_w64(int64_t n, LoadX load_x, LoadY load_y, Tail tail) {
  __m256 r[8];
  for (auto& v : r) v = _mm256_setzero_ps();
  const int64_t np = n / 64 * 64;
  for (int64_t i = 0; i < np; i += 64)
    for (int k = 0; k < 8; ++k) r[k] = _mm256_fmadd_ps(load_x(i + 8 * k), load_y(i + 8 * k), r[k]);
  const __m256 lo = _mm256_add_ps(_mm256_add_ps(r[0], r[4]), _mm256_add_ps(r[2], r[6]));  // lanes 0-7
  const __m256 hi = _mm256_add_ps(_mm256_add_ps(r[1], r[5]), _mm256_add_ps(r[3], r[7]));  // lanes 8-15
  const __m256 t8 = _mm256_add_ps(lo, hi);
  const __m128 t4 = _mm_add_ps(_mm256_castps256_ps128(t8), _mm256_extractf128_ps(t8, 1));
  const __m128 t2 = _mm_add_ps(t4, _mm_movehl_ps(t4, t4));
  const __m128 t1 = _mm_add_ss(t2, _mm_movehdup_ps(t2));
  double sum = _mm_cvtss_f32(t1);
  for (int64_t e = np; e < n; ++e) sum += static_cast<double>(tail(e));
  return static_cast<float>(sum);
}

float dot_w64_f16(int64_t n, const uint16_t* x, const uint16_t* y) {
  return dot_w64(n, [&](int64_t i) { return load_f16x8(x + i); }, [&](int64_t i) { return load_f16x8(y + i); },
                 [&](int64_t e) { return fp16(x[e]) * fp16(y[e]); });
}

float dot_w64_f32(int64_t n, const float* x, const float* y) {
  return dot_w64(n, [&](int64_t i) { return _mm256_loadu_ps(x + i); }, [&](int64_t i) { return _mm256_loadu_ps(y + i); },
                 [&](int64_t e) { return x[e] * y[e]; });
}

void mad_f16(int64_t n, uint16_t* y, const uint16_t* x, float v) {
  const __m256 vv = _mm256_set1_ps(v);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 r = _mm256_fmadd_ps(load_f16x8(x + i), vv, load_f16x8(y + i));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), _mm256_cvtps_ph(r, _MM_FROUND_TO_NEAREST_INT));
  }
  for (; i < n; ++i) y[i] = fp32_to_fp16(std::fma(fp16(x[i]), v, fp16(y[i])));
}

// The cache row widened to f32 once ([n] on the stack: n <= kMaxRowElems), then each query
// row's W64 chain reads it from L1: the same products and sums as dot_w64_f16.
constexpr int64_t kMaxRowElems = 512;

void dot_w64_rows_f16(int64_t n, const uint16_t* k, const float* q, int64_t q_stride, int64_t n_rows, float* s) {
  if (n > kMaxRowElems) {  // beyond any head size: row by row
    std::vector<uint16_t> q16(static_cast<size_t>(n));  // [n]
    for (int64_t r = 0; r < n_rows; ++r) {
      for (int64_t i = 0; i < n; ++i) q16[static_cast<size_t>(i)] = _cvtss_sh(q[r * q_stride + i], _MM_FROUND_TO_NEAREST_INT);
      s[r] = dot_w64_f16(n, k, q16.data());
    }
    return;
  }
  alignas(32) float kf[kMaxRowElems];  // [n] the cache row in f32
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_store_ps(kf + i, load_f16x8(k + i));
  for (; i < n; ++i) kf[i] = fp16(k[i]);
  for (int64_t r = 0; r < n_rows; ++r) {
    const float* qr = q + r * q_stride;
    s[r] = dot_w64(n, [&](int64_t e) { return _mm256_load_ps(kf + e); }, [&](int64_t e) { return _mm256_loadu_ps(qr + e); },
                   [&](int64_t e) { return kf[e] * qr[e]; });
  }
}

void mad_rows_f16(int64_t n, uint16_t* acc, int64_t acc_stride, const uint16_t* v, const float* p, int64_t n_rows) {
  if (n > kMaxRowElems) {
    for (int64_t r = 0; r < n_rows; ++r) mad_f16(n, acc + r * acc_stride, v, p[r]);
    return;
  }
  alignas(32) float vf[kMaxRowElems];  // [n] the cache row in f32
  const int64_t nv = n / 8 * 8;
  for (int64_t i = 0; i < nv; i += 8) _mm256_store_ps(vf + i, load_f16x8(v + i));
  for (int64_t r = 0; r < n_rows; ++r) {
    uint16_t* y = acc + r * acc_stride;
    const __m256 pv = _mm256_set1_ps(p[r]);
    for (int64_t i = 0; i < nv; i += 8) {
      const __m256 t = _mm256_fmadd_ps(_mm256_load_ps(vf + i), pv, load_f16x8(y + i));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), _mm256_cvtps_ph(t, _MM_FROUND_TO_NEAREST_INT));
    }
    for (int64_t i = nv; i < n; ++i) y[i] = fp32_to_fp16(std::fma(fp16(v[i]), p[r], fp16(y[i])));
  }
}

void mad_rows_f32(int64_t n, float* acc, int64_t acc_stride, const float* v, const float* p, int64_t n_rows) {
  const int64_t nv = n / 8 * 8;
  for (int64_t r = 0; r < n_rows; ++r) {
    float* y = acc + r * acc_stride;
    const __m256 pv = _mm256_set1_ps(p[r]);
    for (int64_t i = 0; i < nv; i += 8)
      _mm256_storeu_ps(y + i, _mm256_fmadd_ps(_mm256_loadu_ps(v + i), pv, _mm256_loadu_ps(y + i)));
    for (int64_t i = nv; i < n; ++i) y[i] = std::fma(v[i], p[r], y[i]);
  }
}

// Cache rows to f32 (kernels.h RowToF32Fn): 32 values per block, d * q as one product each.
void row_to_f32_q8_0(int64_t n, const void* x, float* y) {
  const auto* b = static_cast<const BlockQ8_0*>(x);
  for (int64_t ib = 0; ib < n / kQK; ++ib, y += kQK) {
    const __m256 d = _mm256_set1_ps(fp16(b[ib].d));
    for (int i = 0; i < kQK; i += 8) {
      const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b[ib].qs + i));
      _mm256_storeu_ps(y + i, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q))));
    }
  }
}

void row_to_f32_q4_0(int64_t n, const void* x, float* y) {
  const auto* b = static_cast<const BlockQ4_0*>(x);
  for (int64_t ib = 0; ib < n / kQK; ++ib, y += kQK) {
    const __m256 d = _mm256_set1_ps(fp16(b[ib].d));
    alignas(32) int8_t q[kQK];  // the block's values, q - 8
    _mm256_store_si256(reinterpret_cast<__m256i*>(q), _mm256_sub_epi8(nibbles_32(b[ib].qs), _mm256_set1_epi8(8)));
    for (int i = 0; i < kQK; i += 8) {
      const __m128i qi = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(q + i));
      _mm256_storeu_ps(y + i, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(qi))));
    }
  }
}

// F16 activations and cache rows: F16C's round-to-nearest-even, the reference's rule bit for bit
// (NaN, infinities and subnormals included: CpuQuantize test).
void quantize_f16(const float* x, void* y, int64_t n) {
  auto* o = static_cast<uint16_t*>(y);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(o + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < n; ++i) o[i] = fp32_to_fp16(x[i]);
}

// Q8_0 / Q8_1 activations exactly as the reference (vec-dot-ref.cpp): amax by max (exact in
// any order), d = amax / 127, q = round-half-even(x * (127 / amax)) by cvtps (MXCSR's default
// rounding), the Q8_1 sum as an integer. A block whose scale is not finite (a subnormal or
// non-finite largest value) takes the reference's scalar rules.
template <bool kWithSum, typename Block>
void quantize_q8_blocks(const float* x, Block* b, int64_t n) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  for (int64_t ib = 0; ib < n / kQK; ++ib, x += kQK) {
    __m256 v[4];
    for (int j = 0; j < 4; ++j) v[j] = _mm256_loadu_ps(x + 8 * j);
    __m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, v[0]), _mm256_andnot_ps(sign, v[1])),
                             _mm256_max_ps(_mm256_andnot_ps(sign, v[2]), _mm256_andnot_ps(sign, v[3])));
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    const float amax = _mm_cvtss_f32(h);
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    const __m256 inf = _mm256_set1_ps(INFINITY);
    __m256 bad = _mm256_setzero_ps();  // lanes with NaN or +-inf (max_ps may drop a NaN)
    for (int j = 0; j < 4; ++j) bad = _mm256_or_ps(bad, _mm256_cmp_ps(_mm256_andnot_ps(sign, v[j]), inf, _CMP_NLT_UQ));
    if (_mm256_movemask_ps(bad) != 0 || !std::isfinite(id)) {  // subnormal or non-finite: the scalar rules
      if constexpr (kWithSum) ref::quantize_q8_1(x, &b[ib], kQK);
      else ref::quantize_q8_0(x, &b[ib], kQK);
      continue;
    }
    const __m256 mul = _mm256_set1_ps(id);
    __m256i q[4];
    for (int j = 0; j < 4; ++j) q[j] = _mm256_cvtps_epi32(_mm256_mul_ps(v[j], mul));
    // int32 -> int8 with the lanes back in order.
    const __m256i p16a = _mm256_packs_epi32(q[0], q[1]), p16b = _mm256_packs_epi32(q[2], q[3]);
    __m256i p8 = _mm256_packs_epi16(p16a, p16b);
    p8 = _mm256_permutevar8x32_epi32(p8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(b[ib].qs), p8);
    b[ib].d = _cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);  // d is finite here: fp32_to_fp16's bits
    if constexpr (kWithSum) {
      const int sum = hsum_i32(_mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3])));
      b[ib].s = _cvtss_sh(static_cast<float>(sum) * d, _MM_FROUND_TO_NEAREST_INT);
    }
  }
}

void quantize_q8_0(const float* x, void* y, int64_t n) { quantize_q8_blocks<false>(x, static_cast<BlockQ8_0*>(y), n); }
void quantize_q8_1(const float* x, void* y, int64_t n) { quantize_q8_blocks<true>(x, static_cast<BlockQ8_1*>(y), n); }

void silu_row(int64_t n, float* y, const float* x) {
  const int64_t nv = n / 16 * 16;
  const __m256 one = _mm256_set1_ps(1.0f);
  for (int64_t i = 0; i < nv; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m256 e = exp_poly8(_mm256_sub_ps(_mm256_setzero_ps(), v));
    _mm256_storeu_ps(y + i, _mm256_div_ps(v, _mm256_add_ps(one, e)));
  }
  for (int64_t i = nv; i < n; ++i) y[i] = x[i] / (1.0f + std::exp(-x[i]));
}

}  // namespace minfer::cpu::avx2

#include "backends/cpu/isa-end.h"
