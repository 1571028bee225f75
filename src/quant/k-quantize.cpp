// Reference quantizers of the K-quants: Q2_K, Q3_K, Q4_K, Q5_K, Q6_K. The scale search is in
// scale-search.cpp; this file maps each layout onto it and packs the bits exactly as ggml
// does (blocks.h, docs/formats.md). Element i of a super-block, with c = i / 128 and
// r = i % 128 for the 2-bit arrays:
//
//   Q2_K / Q3_K qs     byte c*32 + r%32, bits 2*(r/32) .. +1        (low 2 bits of q)
//   Q3_K hmask         byte i%32, bit i/32                           (set: q >= 4)
//   Q4_K / Q5_K qs     byte (i/64)*32 + i%32, low nibble if i%64 < 32 else high nibble
//   Q5_K qh            byte i%32, bit i/32
//   Q6_K ql            byte c*64 + r%32 + 32*((r/32)&1), low nibble if r < 64 else high
//   Q6_K qh            byte c*32 + r%32, bits 2*(r/32) .. +1
#include <cassert>
#include <cstring>

#include "core/fp16.h"
#include "quant/blocks.h"
#include "quant/internal.h"
#include "quant/scale-search.h"

namespace minfer::quant_detail {

namespace {

void pack_2bit(const uint8_t* q, uint8_t* qs) {  // Q2_K / Q3_K qs, 64 bytes
  std::memset(qs, 0, kQKK / 4);
  for (int i = 0; i < kQKK; ++i) {
    const int r = i % 128;
    qs[(i / 128) * 32 + r % 32] |= static_cast<uint8_t>((q[i] & 3) << (2 * (r / 32)));
  }
}

void pack_4bit(const uint8_t* q, uint8_t* qs) {  // Q4_K / Q5_K qs, 128 bytes
  std::memset(qs, 0, kQKK / 2);
  for (int i = 0; i < kQKK; ++i) {
    const int shift = (i % 64) < 32 ? 0 : 4;
    qs[(i / 64) * 32 + i % 32] |= static_cast<uint8_t>((q[i] & 15) << shift);
  }
}

// Q4_K / Q5_K: 8 six-bit scales and mins in 12 bytes. Bytes 0-3 hold scales 0-3, bytes 4-7
// mins 0-3 (low 6 bits each); bytes 8-11 hold scale j (low nibble) and min j (high nibble) of
// j = 4-7, whose top 2 bits go to the top of bytes j-4 (scale) and j (min).
void pack_scales_k4(const uint8_t* sc, const uint8_t* m, uint8_t* out) {
  std::memset(out, 0, kKScaleBytes);
  for (int j = 0; j < 8; ++j) {
    assert(sc[j] < 64 && m[j] < 64);
    if (j < 4) {
      out[j] |= sc[j];
      out[j + 4] |= m[j];
    } else {
      out[j + 4] = static_cast<uint8_t>((sc[j] & 15) | ((m[j] & 15) << 4));
      out[j - 4] |= static_cast<uint8_t>((sc[j] >> 4) << 6);
      out[j] |= static_cast<uint8_t>((m[j] >> 4) << 6);
    }
  }
}

// Q3_K: 16 six-bit scales (stored +32) in 12 bytes. Low nibble of scale j in byte j%8 (low
// nibble for j < 8, high for j >= 8); its top 2 bits in byte 8 + j%4 at bit 2*(j/4).
void pack_scales_q3(const int* sc, uint8_t* out) {
  std::memset(out, 0, 12);
  for (int j = 0; j < 16; ++j) {
    const int l = sc[j] + 32;
    assert(l >= 0 && l < 64);
    out[j % 8] |= static_cast<uint8_t>((l & 15) << (j < 8 ? 0 : 4));
    out[8 + j % 4] |= static_cast<uint8_t>((l >> 4) << (2 * (j / 4)));
  }
}

// Radius: integer scales (and mins) tried on either side of the rounded ones, per sub-block.
// The asymmetric types gain from 2 (the landscape in (scale, min) is rugged): Q2_K 0.2%,
// Q4_K 0.3%, Q5_K 1% on gaussian data and 16% on weights that came from Q4_1 (whose exact
// grid it then finds). Q3_K and Q6_K gain < 0.05% from 2, so they stay at 1.
const AsymSpec kQ2Spec{16, 16, 3, 15, 2};
const AsymSpec kQ4Spec{8, 32, 15, 63, 2};
const AsymSpec kQ5Spec{8, 32, 31, 63, 2};

const SymSpec& q3_spec() {
  static const SymSpec s{16, 16, Levels::uniform(-4, 3), -32, 31, 1};
  return s;
}
const SymSpec& q6_spec() {
  static const SymSpec s{16, 16, Levels::uniform(-32, 31), -128, 127, 1};
  return s;
}

}  // namespace

void quantize_q2_k(const float* src, void* dst, int64_t n) {
  assert(n % kQKK == 0);
  auto* blocks = static_cast<BlockQ2_K*>(dst);
  float w[kQKK];
  for (int64_t ib = 0; ib < n / kQKK; ++ib) {
    const float* x = src + ib * kQKK;
    BlockQ2_K& b = blocks[ib];
    element_weights(x, w, kQKK);
    const AsymFit f = fit_asymmetric(kQ2Spec, x, w);
    for (int j = 0; j < 16; ++j) b.scales[j] = static_cast<uint8_t>(f.sc[j] | (f.m[j] << 4));
    pack_2bit(f.q, b.qs);
    b.d = fp32_to_fp16(f.d);
    b.dmin = fp32_to_fp16(f.dmin);
  }
}

void quantize_q3_k(const float* src, void* dst, int64_t n) {
  assert(n % kQKK == 0);
  auto* blocks = static_cast<BlockQ3_K*>(dst);
  float w[kQKK];
  for (int64_t ib = 0; ib < n / kQKK; ++ib) {
    const float* x = src + ib * kQKK;
    BlockQ3_K& b = blocks[ib];
    element_weights(x, w, kQKK);
    const SymFit f = fit_symmetric(q3_spec(), x, w);  // q = level index = value + 4
    pack_scales_q3(f.sc, b.scales);
    pack_2bit(f.q, b.qs);
    std::memset(b.hmask, 0, sizeof(b.hmask));
    for (int i = 0; i < kQKK; ++i) {
      b.hmask[i % 32] |= static_cast<uint8_t>((f.q[i] >> 2) << (i / 32));
    }
    b.d = fp32_to_fp16(f.d);
  }
}

void quantize_q4_k(const float* src, void* dst, int64_t n) {
  assert(n % kQKK == 0);
  auto* blocks = static_cast<BlockQ4_K*>(dst);
  float w[kQKK];
  for (int64_t ib = 0; ib < n / kQKK; ++ib) {
    const float* x = src + ib * kQKK;
    BlockQ4_K& b = blocks[ib];
    element_weights(x, w, kQKK);
    const AsymFit f = fit_asymmetric(kQ4Spec, x, w);
    pack_scales_k4(f.sc, f.m, b.scales);
    pack_4bit(f.q, b.qs);
    b.d = fp32_to_fp16(f.d);
    b.dmin = fp32_to_fp16(f.dmin);
  }
}

void quantize_q5_k(const float* src, void* dst, int64_t n) {
  assert(n % kQKK == 0);
  auto* blocks = static_cast<BlockQ5_K*>(dst);
  float w[kQKK];
  for (int64_t ib = 0; ib < n / kQKK; ++ib) {
    const float* x = src + ib * kQKK;
    BlockQ5_K& b = blocks[ib];
    element_weights(x, w, kQKK);
    const AsymFit f = fit_asymmetric(kQ5Spec, x, w);
    pack_scales_k4(f.sc, f.m, b.scales);
    pack_4bit(f.q, b.qs);
    std::memset(b.qh, 0, sizeof(b.qh));
    for (int i = 0; i < kQKK; ++i) b.qh[i % 32] |= static_cast<uint8_t>((f.q[i] >> 4) << (i / 32));
    b.d = fp32_to_fp16(f.d);
    b.dmin = fp32_to_fp16(f.dmin);
  }
}

void quantize_q6_k(const float* src, void* dst, int64_t n) {
  assert(n % kQKK == 0);
  auto* blocks = static_cast<BlockQ6_K*>(dst);
  float w[kQKK];
  for (int64_t ib = 0; ib < n / kQKK; ++ib) {
    const float* x = src + ib * kQKK;
    BlockQ6_K& b = blocks[ib];
    element_weights(x, w, kQKK);
    const SymFit f = fit_symmetric(q6_spec(), x, w);  // q = level index = value + 32
    for (int j = 0; j < 16; ++j) b.scales[j] = static_cast<int8_t>(f.sc[j]);
    std::memset(b.ql, 0, sizeof(b.ql));
    std::memset(b.qh, 0, sizeof(b.qh));
    for (int i = 0; i < kQKK; ++i) {
      const int c = i / 128, r = i % 128, g = r / 32, l = r % 32;
      b.ql[c * 64 + l + 32 * (g & 1)] |= static_cast<uint8_t>((f.q[i] & 15) << (4 * (g >> 1)));
      b.qh[c * 32 + l] |= static_cast<uint8_t>((f.q[i] >> 4) << (2 * g));
    }
    b.d = fp32_to_fp16(f.d);
  }
}

}  // namespace minfer::quant_detail
