// Scalar reference dot products of the 256-element super-block types (Q2_K ... Q6_K, IQ4_XS)
// with Q8_K activations. Per super-block: integer sums per sub-block, weighted by the integer
// sub-block scales, then one float product with the super-block scales:
//   x = (d * sc_j) * q - (dmin * m_j)  =>  dot = d_x * (d * sum_j sc_j * sum_i q_i x_i
//                                                   - dmin * sum_j m_j * sum_i x_i)
// where sum_i x_i over a sub-block comes from Q8_K's 16-element bsums.
// Element orders and scale packing: quant/blocks.h and docs/formats.md.
#include "backends/cpu/kernels-ref.h"
#include "core/fp16.h"
#include "quant/blocks.h"

namespace minfer::cpu::ref {
namespace {

// 6-bit scale j of Q3_K (stored with +32 offset).
int scale_q3_k(const uint8_t* s, int j) {
  const int low = j < 8 ? (s[j] & 0x0f) : (s[j - 8] >> 4);
  const int high = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
  return low | (high << 4);
}

// Sum of Q8_K's 16-element sums over sub-block j of `width` elements.
int bsum(const BlockQ8_K& y, int j, int width) {
  int s = 0;
  for (int k = j * width / 16; k < (j + 1) * width / 16; ++k) s += y.bsums[k];
  return s;
}

}  // namespace

float vec_dot_q2_k(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const BlockQ2_K*>(w);
  const auto* b = static_cast<const BlockQ8_K*>(x);
  float s = 0.0f;
  for (int64_t ib = 0; ib < n / kQKK; ++ib) {
    int q[kQKK];  // element e = 128h + 32s + l: bits 2s..2s+1 of qs[32h + l]
    for (int e = 0; e < kQKK; ++e) q[e] = (a[ib].qs[32 * (e / 128) + e % 32] >> (2 * ((e / 32) % 4))) & 3;
    int sum_q = 0, sum_m = 0;
    for (int j = 0; j < 16; ++j) {
      int isum = 0;
      for (int i = 16 * j; i < 16 * j + 16; ++i) isum += q[i] * b[ib].qs[i];
      sum_q += (a[ib].scales[j] & 0x0f) * isum;
      sum_m += (a[ib].scales[j] >> 4) * b[ib].bsums[j];
    }
    s += b[ib].d * (fp16_to_fp32(a[ib].d) * static_cast<float>(sum_q) -
                    fp16_to_fp32(a[ib].dmin) * static_cast<float>(sum_m));
  }
  return s;
}

float vec_dot_q3_k(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const BlockQ3_K*>(w);
  const auto* b = static_cast<const BlockQ8_K*>(x);
  float s = 0.0f;
  for (int64_t ib = 0; ib < n / kQKK; ++ib) {
    int q[kQKK];  // low 2 bits as Q2_K; high bit e/32 of hmask[e % 32] clear means -4
    for (int e = 0; e < kQKK; ++e) {
      const int low = (a[ib].qs[32 * (e / 128) + e % 32] >> (2 * ((e / 32) % 4))) & 3;
      const int high = (a[ib].hmask[e % 32] >> (e / 32)) & 1;
      q[e] = low - (high ? 0 : 4);
    }
    int sum = 0;
    for (int j = 0; j < 16; ++j) {
      int isum = 0;
      for (int i = 16 * j; i < 16 * j + 16; ++i) isum += q[i] * b[ib].qs[i];
      sum += (scale_q3_k(a[ib].scales, j) - 32) * isum;
    }
    s += b[ib].d * fp16_to_fp32(a[ib].d) * static_cast<float>(sum);
  }
  return s;
}

float vec_dot_q4_k(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const BlockQ4_K*>(w);
  const auto* b = static_cast<const BlockQ8_K*>(x);
  float s = 0.0f;
  for (int64_t ib = 0; ib < n / kQKK; ++ib) {
    int sum_q = 0, sum_m = 0;
    for (int j = 0; j < 8; ++j) {  // sub-block j = nibble j%2 of qs[32*(j/2) + l]
      int sc, m;
      unpack_scale_min_k4(a[ib].scales, j, &sc, &m);
      int isum = 0;
      for (int l = 0; l < 32; ++l) isum += ((a[ib].qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 0x0f) * b[ib].qs[32 * j + l];
      sum_q += sc * isum;
      sum_m += m * bsum(b[ib], j, 32);
    }
    s += b[ib].d * (fp16_to_fp32(a[ib].d) * static_cast<float>(sum_q) -
                    fp16_to_fp32(a[ib].dmin) * static_cast<float>(sum_m));
  }
  return s;
}

float vec_dot_q5_k(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const BlockQ5_K*>(w);
  const auto* b = static_cast<const BlockQ8_K*>(x);
  float s = 0.0f;
  for (int64_t ib = 0; ib < n / kQKK; ++ib) {
    int sum_q = 0, sum_m = 0;
    for (int j = 0; j < 8; ++j) {  // as Q4_K, plus bit j of qh[l] as bit 4
      int sc, m;
      unpack_scale_min_k4(a[ib].scales, j, &sc, &m);
      int isum = 0;
      for (int l = 0; l < 32; ++l) {
        const int q = ((a[ib].qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 0x0f) | (((a[ib].qh[l] >> j) & 1) << 4);
        isum += q * b[ib].qs[32 * j + l];
      }
      sum_q += sc * isum;
      sum_m += m * bsum(b[ib], j, 32);
    }
    s += b[ib].d * (fp16_to_fp32(a[ib].d) * static_cast<float>(sum_q) -
                    fp16_to_fp32(a[ib].dmin) * static_cast<float>(sum_m));
  }
  return s;
}

float vec_dot_q6_k(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const BlockQ6_K*>(w);
  const auto* b = static_cast<const BlockQ8_K*>(x);
  float s = 0.0f;
  for (int64_t ib = 0; ib < n / kQKK; ++ib) {
    int q[kQKK];  // element 128h + r: nibble r/64 of ql[64h + r%64] | bits 2(r/32).. of qh[32h + r%32] << 4
    for (int e = 0; e < kQKK; ++e) {
      const int h = e / 128, r = e % 128;
      const int low = (a[ib].ql[64 * h + r % 64] >> (4 * (r / 64))) & 0x0f;
      const int high = (a[ib].qh[32 * h + r % 32] >> (2 * (r / 32))) & 3;
      q[e] = (low | (high << 4)) - 32;
    }
    int sum = 0;
    for (int j = 0; j < 16; ++j) {
      int isum = 0;
      for (int i = 16 * j; i < 16 * j + 16; ++i) isum += q[i] * b[ib].qs[i];
      sum += a[ib].scales[j] * isum;
    }
    s += b[ib].d * fp16_to_fp32(a[ib].d) * static_cast<float>(sum);
  }
  return s;
}

float vec_dot_iq4_xs(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const BlockIQ4_XS*>(w);
  const auto* b = static_cast<const BlockQ8_K*>(x);
  float s = 0.0f;
  for (int64_t ib = 0; ib < n / kQKK; ++ib) {
    int sum = 0;
    for (int j = 0; j < 8; ++j) {  // sub-block j: an IQ4_NL-ordered block in qs[16j ..]
      const int ls = (((a[ib].scales_l[j / 2] >> (4 * (j % 2))) & 0x0f) | (((a[ib].scales_h >> (2 * j)) & 3) << 4)) - 32;
      const uint8_t* qs = a[ib].qs + 16 * j;
      const int8_t* y = b[ib].qs + 32 * j;
      int isum = 0;
      for (int i = 0; i < 16; ++i) isum += kIq4nlValues[qs[i] & 0x0f] * y[i] + kIq4nlValues[qs[i] >> 4] * y[i + 16];
      sum += ls * isum;
    }
    s += b[ib].d * fp16_to_fp32(a[ib].d) * static_cast<float>(sum);
  }
  return s;
}

}  // namespace minfer::cpu::ref
