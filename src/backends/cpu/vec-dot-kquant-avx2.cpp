// AVX2 dot products of the super-block types with Q8_K activations. Same math as
// vec-dot-kquant-ref.cpp: the quants are expanded to unsigned bytes (q + offset), multiplied
// with the activations by maddubs, weighted by the sub-block scales with madd, and the offsets
// and mins are taken back through Q8_K's 16-element sums. Integer sums are exact.
#include "backends/cpu/kernels-avx2.h"
#include "quant/blocks.h"

#define MINFER_ISA avx2
#include "backends/cpu/isa-begin.h"
#include "backends/cpu/avx2-common.h"

namespace minfer::cpu::avx2 {
namespace {

inline float fp16(uint16_t h) { return _cvtsh_ss(h); }

inline __m256i load32(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// Scale vector for 32 elements made of two 16-element sub-blocks: low lane sa, high lane sb.
inline __m256i scale_pair(int sa, int sb) {
  return _mm256_set_m128i(_mm_set1_epi16(static_cast<int16_t>(sb)), _mm_set1_epi16(static_cast<int16_t>(sa)));
}

int scale_q3_k(const uint8_t* s, int j) {
  const int low = j < 8 ? (s[j] & 0x0f) : (s[j - 8] >> 4);
  const int high = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
  return low | (high << 4);
}

// bits (shift .. shift+width-1) of every byte of v.
inline __m256i bits(__m256i v, int shift, int mask) {
  return _mm256_and_si256(_mm256_srli_epi16(v, shift), _mm256_set1_epi8(static_cast<char>(mask)));
}

}  // namespace

float vec_dot_q2_k(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const BlockQ2_K*>(w);
  const auto* b = static_cast<const BlockQ8_K*>(x);
  float s = 0.0f;
  for (int64_t ib = 0; ib < n / kQKK; ++ib) {
    __m256i sumi = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      const __m256i qv = load32(a[ib].qs + 32 * h);
      for (int sh = 0; sh < 4; ++sh) {  // elements 128h + 32sh + l: bits 2sh.. of qs[32h + l]
        const int j = 8 * h + 2 * sh;     // first of the two 16-element sub-blocks
        const __m256i p = madd_us8(bits(qv, 2 * sh, 3), load32(b[ib].qs + 128 * h + 32 * sh));
        sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, scale_pair(a[ib].scales[j] & 0x0f, a[ib].scales[j + 1] & 0x0f)));
      }
    }
    int sum_m = 0;
    for (int j = 0; j < 16; ++j) sum_m += (a[ib].scales[j] >> 4) * b[ib].bsums[j];
    s += b[ib].d * (fp16(a[ib].d) * static_cast<float>(hsum_i32(sumi)) - fp16(a[ib].dmin) * static_cast<float>(sum_m));
  }
  return s;
}

float vec_dot_q3_k(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const BlockQ3_K*>(w);
  const auto* b = static_cast<const BlockQ8_K*>(x);
  float s = 0.0f;
  for (int64_t ib = 0; ib < n / kQKK; ++ib) {
    int sc[16];
    for (int j = 0; j < 16; ++j) sc[j] = scale_q3_k(a[ib].scales, j) - 32;
    const __m256i hm = load32(a[ib].hmask);
    __m256i sumi = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      const __m256i qv = load32(a[ib].qs + 32 * h);
      for (int sh = 0; sh < 4; ++sh) {  // u = low 2 bits + 4 * high bit = q + 4, in 0..7
        const __m256i u = _mm256_or_si256(bits(qv, 2 * sh, 3), _mm256_slli_epi16(bits(hm, 4 * h + sh, 1), 2));
        const int j = 8 * h + 2 * sh;
        const __m256i p = madd_us8(u, load32(b[ib].qs + 128 * h + 32 * sh));
        sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, scale_pair(sc[j], sc[j + 1])));
      }
    }
    int offset = 0;  // sum_j sc_j * sum(x in j): the -4 of every quant
    for (int j = 0; j < 16; ++j) offset += sc[j] * b[ib].bsums[j];
    s += b[ib].d * fp16(a[ib].d) * static_cast<float>(hsum_i32(sumi) - 4 * offset);
  }
  return s;
}

float vec_dot_q4_k(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const BlockQ4_K*>(w);
  const auto* b = static_cast<const BlockQ8_K*>(x);
  float s = 0.0f;
  for (int64_t ib = 0; ib < n / kQKK; ++ib) {
    __m256i sumi = _mm256_setzero_si256();
    int sum_m = 0;
    for (int c = 0; c < 4; ++c) {  // sub-blocks 2c (low nibbles) and 2c+1 (high nibbles)
      const __m256i qv = load32(a[ib].qs + 32 * c);
      int sc0, m0, sc1, m1;
      unpack_scale_min_k4(a[ib].scales, 2 * c, &sc0, &m0);
      unpack_scale_min_k4(a[ib].scales, 2 * c + 1, &sc1, &m1);
      const __m256i p0 = madd_us8(bits(qv, 0, 0x0f), load32(b[ib].qs + 64 * c));
      const __m256i p1 = madd_us8(bits(qv, 4, 0x0f), load32(b[ib].qs + 64 * c + 32));
      sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p0, _mm256_set1_epi16(static_cast<int16_t>(sc0))));
      sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p1, _mm256_set1_epi16(static_cast<int16_t>(sc1))));
      sum_m += m0 * (b[ib].bsums[4 * c] + b[ib].bsums[4 * c + 1]) + m1 * (b[ib].bsums[4 * c + 2] + b[ib].bsums[4 * c + 3]);
    }
    s += b[ib].d * (fp16(a[ib].d) * static_cast<float>(hsum_i32(sumi)) - fp16(a[ib].dmin) * static_cast<float>(sum_m));
  }
  return s;
}

float vec_dot_q5_k(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const BlockQ5_K*>(w);
  const auto* b = static_cast<const BlockQ8_K*>(x);
  float s = 0.0f;
  for (int64_t ib = 0; ib < n / kQKK; ++ib) {
    const __m256i hb = load32(a[ib].qh);
    __m256i sumi = _mm256_setzero_si256();
    int sum_m = 0;
    for (int c = 0; c < 4; ++c) {
      const __m256i qv = load32(a[ib].qs + 32 * c);
      int sc0, m0, sc1, m1;
      unpack_scale_min_k4(a[ib].scales, 2 * c, &sc0, &m0);
      unpack_scale_min_k4(a[ib].scales, 2 * c + 1, &sc1, &m1);
      const __m256i q0 = _mm256_or_si256(bits(qv, 0, 0x0f), _mm256_slli_epi16(bits(hb, 2 * c, 1), 4));
      const __m256i q1 = _mm256_or_si256(bits(qv, 4, 0x0f), _mm256_slli_epi16(bits(hb, 2 * c + 1, 1), 4));
      const __m256i p0 = madd_us8(q0, load32(b[ib].qs + 64 * c));
      const __m256i p1 = madd_us8(q1, load32(b[ib].qs + 64 * c + 32));
      sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p0, _mm256_set1_epi16(static_cast<int16_t>(sc0))));
      sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p1, _mm256_set1_epi16(static_cast<int16_t>(sc1))));
      sum_m += m0 * (b[ib].bsums[4 * c] + b[ib].bsums[4 * c + 1]) + m1 * (b[ib].bsums[4 * c + 2] + b[ib].bsums[4 * c + 3]);
    }
    s += b[ib].d * (fp16(a[ib].d) * static_cast<float>(hsum_i32(sumi)) - fp16(a[ib].dmin) * static_cast<float>(sum_m));
  }
  return s;
}

float vec_dot_q6_k(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const BlockQ6_K*>(w);
  const auto* b = static_cast<const BlockQ8_K*>(x);
  float s = 0.0f;
  for (int64_t ib = 0; ib < n / kQKK; ++ib) {
    __m256i sumi = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      const __m256i l0 = load32(a[ib].ql + 64 * h), l1 = load32(a[ib].ql + 64 * h + 32);
      const __m256i qh = load32(a[ib].qh + 32 * h);
      for (int sh = 0; sh < 4; ++sh) {  // u = q + 32 in 0..63
        const __m256i low = bits(sh < 2 ? (sh == 0 ? l0 : l1) : (sh == 2 ? l0 : l1), sh < 2 ? 0 : 4, 0x0f);
        const __m256i u = _mm256_or_si256(low, _mm256_slli_epi16(bits(qh, 2 * sh, 3), 4));
        const int j = 8 * h + 2 * sh;
        const __m256i p = madd_us8(u, load32(b[ib].qs + 128 * h + 32 * sh));
        sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, scale_pair(a[ib].scales[j], a[ib].scales[j + 1])));
      }
    }
    int offset = 0;
    for (int j = 0; j < 16; ++j) offset += a[ib].scales[j] * b[ib].bsums[j];
    s += b[ib].d * fp16(a[ib].d) * static_cast<float>(hsum_i32(sumi) - 32 * offset);
  }
  return s;
}

float vec_dot_iq4_xs(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const BlockIQ4_XS*>(w);
  const auto* b = static_cast<const BlockQ8_K*>(x);
  const __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues));
  const __m256i table = _mm256_set_m128i(t, t);
  float s = 0.0f;
  for (int64_t ib = 0; ib < n / kQKK; ++ib) {
    __m256i sumi = _mm256_setzero_si256();
    for (int j = 0; j < 8; ++j) {
      const int ls = (((a[ib].scales_l[j / 2] >> (4 * (j % 2))) & 0x0f) | (((a[ib].scales_h >> (2 * j)) & 3) << 4)) - 32;
      const __m256i q = _mm256_shuffle_epi8(table, nibbles_32(a[ib].qs + 16 * j));
      const __m256i y = load32(b[ib].qs + 32 * j);
      const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(q, q), _mm256_sign_epi8(y, q));
      sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, _mm256_set1_epi16(static_cast<int16_t>(ls))));
    }
    s += b[ib].d * fp16(a[ib].d) * static_cast<float>(hsum_i32(sumi));
  }
  return s;
}

}  // namespace minfer::cpu::avx2

#include "backends/cpu/isa-end.h"
