// Dequantization of the K-quants (Q2_K ... Q6_K, super-blocks of 256 weights) and the Q8_K
// activation type, plus Q8_K's quantizer. Layouts and bit diagrams: docs/formats.md.
//
// Every value is computed with the same float operations in the same order as gguf-py (and
// ggml): the sub-block scale product first (d * scale, dmin * min) in fp32, then
// y = (d * scale) * q - (dmin * min). Changing the order changes the low bits.
#include <cmath>
#include <cstring>

#include "core/fp16.h"
#include "quant/blocks.h"
#include "quant/internal.h"

namespace minfer::quant_detail {
namespace {

// Q3_K: 16 6-bit scales in 12 bytes. Bits 0-3 of scale j: low nibble of byte j (j < 8) or
// high nibble of byte j-8 (j >= 8). Bits 4-5: bits 2*(j/4) .. 2*(j/4)+1 of byte 8 + j%4.
int unpack_scale_q3_k(const uint8_t* s, int j) {
  const int low = j < 8 ? (s[j] & 0x0f) : (s[j - 8] >> 4);
  const int high = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
  return low | (high << 4);
}

// Round to nearest, ties to even (ggml's nearest_int); non-finite input gives 0, as ggml's
// float-bit trick does for the overflowing scale of an (almost) all-subnormal block.
int nearest_int(float v) {
  if (!std::isfinite(v)) return 0;
  return static_cast<int>(std::nearbyint(v));
}

}  // namespace

// ---- Q2_K -------------------------------------------------------------------------------
// Element e = 128*h + 32*s + l (h < 2, s < 4, l < 32) is bits 2s..2s+1 of qs[32*h + l].
void dequantize_q2_k(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ2_K*>(src);
  for (int64_t ib = 0; ib < n / kQKK; ++ib, dst += kQKK) {
    const float d = fp16_to_fp32(b[ib].d);
    const float dmin = fp16_to_fp32(b[ib].dmin);
    for (int e = 0; e < kQKK; ++e) {
      const int h = e / 128, s = (e / 32) % 4, l = e % 32;
      const int q = (b[ib].qs[32 * h + l] >> (2 * s)) & 3;
      const uint8_t sc = b[ib].scales[e / 16];
      const float dl = d * static_cast<float>(sc & 0x0f);
      const float ml = dmin * static_cast<float>(sc >> 4);
      dst[e] = dl * static_cast<float>(q) - ml;
    }
  }
}

// ---- Q3_K -------------------------------------------------------------------------------
// Element e = 128*h + 32*s + l: low 2 bits are bits 2s..2s+1 of qs[32*h + l], the high bit is
// bit e/32 of hmask[l]; q = low - (high ? 0 : 4), in [-4, 3].
void dequantize_q3_k(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ3_K*>(src);
  for (int64_t ib = 0; ib < n / kQKK; ++ib, dst += kQKK) {
    const float d = fp16_to_fp32(b[ib].d);
    for (int e = 0; e < kQKK; ++e) {
      const int h = e / 128, s = (e / 32) % 4, l = e % 32;
      const int low = (b[ib].qs[32 * h + l] >> (2 * s)) & 3;
      const int high = (b[ib].hmask[l] >> (e / 32)) & 1;
      const int q = low - (high ? 0 : 4);
      const float dl = d * static_cast<float>(unpack_scale_q3_k(b[ib].scales, e / 16) - 32);
      dst[e] = dl * static_cast<float>(q);
    }
  }
}

// ---- Q4_K -------------------------------------------------------------------------------
// Element e = 64*c + 32*k + l (c < 4, k < 2, l < 32) is nibble k of qs[32*c + l]; its
// sub-block is e/32 = 2c + k.
void dequantize_q4_k(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ4_K*>(src);
  for (int64_t ib = 0; ib < n / kQKK; ++ib, dst += kQKK) {
    const float d = fp16_to_fp32(b[ib].d);
    const float dmin = fp16_to_fp32(b[ib].dmin);
    for (int j = 0; j < 8; ++j) {
      int sc, m;
      unpack_scale_min_k4(b[ib].scales, j, &sc, &m);
      const float dl = d * static_cast<float>(sc);
      const float ml = dmin * static_cast<float>(m);
      const int c = j / 2, k = j % 2;
      for (int l = 0; l < 32; ++l) {
        const int q = (b[ib].qs[32 * c + l] >> (4 * k)) & 0x0f;
        dst[32 * j + l] = dl * static_cast<float>(q) - ml;
      }
    }
  }
}

// ---- Q5_K -------------------------------------------------------------------------------
// As Q4_K, plus bit 4 of element e = 32*j + l is bit j of qh[l].
void dequantize_q5_k(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ5_K*>(src);
  for (int64_t ib = 0; ib < n / kQKK; ++ib, dst += kQKK) {
    const float d = fp16_to_fp32(b[ib].d);
    const float dmin = fp16_to_fp32(b[ib].dmin);
    for (int j = 0; j < 8; ++j) {
      int sc, m;
      unpack_scale_min_k4(b[ib].scales, j, &sc, &m);
      const float dl = d * static_cast<float>(sc);
      const float ml = dmin * static_cast<float>(m);
      const int c = j / 2, k = j % 2;
      for (int l = 0; l < 32; ++l) {
        const int low = (b[ib].qs[32 * c + l] >> (4 * k)) & 0x0f;
        const int high = (b[ib].qh[l] >> j) & 1;
        dst[32 * j + l] = dl * static_cast<float>(low | (high << 4)) - ml;
      }
    }
  }
}

// ---- Q6_K -------------------------------------------------------------------------------
// Element e = 128*h + r (h < 2, r < 128): low 4 bits are nibble r/64 of ql[64*h + r%64],
// high 2 bits are bits 2*(r/32)..+1 of qh[32*h + r%32]; q = (low | high << 4) - 32.
void dequantize_q6_k(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ6_K*>(src);
  for (int64_t ib = 0; ib < n / kQKK; ++ib, dst += kQKK) {
    const float d = fp16_to_fp32(b[ib].d);
    for (int e = 0; e < kQKK; ++e) {
      const int h = e / 128, r = e % 128;
      const int low = (b[ib].ql[64 * h + r % 64] >> (4 * (r / 64))) & 0x0f;
      const int high = (b[ib].qh[32 * h + r % 32] >> (2 * (r / 32))) & 3;
      const float dl = d * static_cast<float>(b[ib].scales[e / 16]);
      dst[e] = dl * static_cast<float>((low | (high << 4)) - 32);
    }
  }
}

// ---- Q8_K -------------------------------------------------------------------------------

void dequantize_q8_k(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ8_K*>(src);
  for (int64_t ib = 0; ib < n / kQKK; ++ib, dst += kQKK) {
    float d;
    std::memcpy(&d, &b[ib].d, sizeof d);
    for (int i = 0; i < kQKK; ++i) dst[i] = d * static_cast<float>(b[ib].qs[i]);
  }
}

// ggml's reference: the element of largest magnitude (first on ties) maps to -127, so
// iscale = -127 / max and q = min(127, nearest_even(iscale * x)); d = 1 / iscale. A block of
// zeros stores d = 0, q = 0 and zero sums (ggml leaves its bsums unwritten; we zero them).
void quantize_q8_k(const float* src, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ8_K*>(dst);
  for (int64_t ib = 0; ib < n / kQKK; ++ib, src += kQKK) {
    float max = 0.0f, amax = 0.0f;
    for (int i = 0; i < kQKK; ++i) {
      const float a = std::fabs(src[i]);
      if (a > amax) {
        amax = a;
        max = src[i];
      }
    }
    BlockQ8_K& y = b[ib];
    if (amax == 0.0f) {
      std::memset(&y, 0, sizeof y);
      continue;
    }
    const float iscale = -127.0f / max;
    for (int i = 0; i < kQKK; ++i) {
      const int v = nearest_int(iscale * src[i]);
      y.qs[i] = static_cast<int8_t>(v < 127 ? v : 127);
    }
    for (int j = 0; j < kQKK / 16; ++j) {
      int sum = 0;
      for (int i = 0; i < 16; ++i) sum += y.qs[16 * j + i];
      y.bsums[j] = static_cast<int16_t>(sum);
    }
    y.d = 1.0f / iscale;
  }
}

}  // namespace minfer::quant_detail
