// Dequantization of IQ4_NL (blocks of 32) and IQ4_XS (super-blocks of 256): 4-bit indices
// into the non-linear level table kIq4nlValues. Layouts and bit diagrams: docs/formats.md.
#include "core/fp16.h"
#include "quant/blocks.h"
#include "quant/internal.h"

namespace minfer::quant_detail {

// Element i of a block: low nibble of qs[i] for i < 16, high nibble of qs[i-16] after.
void dequantize_iq4_nl(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockIQ4_NL*>(src);
  for (int64_t ib = 0; ib < n / kQK; ++ib, dst += kQK) {
    const float d = fp16_to_fp32(b[ib].d);
    for (int i = 0; i < kQK / 2; ++i) {
      dst[i] = d * static_cast<float>(kIq4nlValues[b[ib].qs[i] & 0x0f]);
      dst[i + kQK / 2] = d * static_cast<float>(kIq4nlValues[b[ib].qs[i] >> 4]);
    }
  }
}

// Sub-block j (32 elements) has the 6-bit scale ls = nibble j%2 of scales_l[j/2] | bits
// 2j..2j+1 of scales_h << 4, and y = (d * (ls - 32)) * level; its elements are laid out as an
// IQ4_NL block in qs[16*j .. 16*j + 15].
void dequantize_iq4_xs(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockIQ4_XS*>(src);
  for (int64_t ib = 0; ib < n / kQKK; ++ib) {
    const float d = fp16_to_fp32(b[ib].d);
    for (int j = 0; j < kQKK / 32; ++j, dst += 32) {
      const int low = (b[ib].scales_l[j / 2] >> (4 * (j % 2))) & 0x0f;
      const int high = (b[ib].scales_h >> (2 * j)) & 3;
      const float dl = d * static_cast<float>((low | (high << 4)) - 32);
      const uint8_t* qs = b[ib].qs + 16 * j;
      for (int i = 0; i < 16; ++i) {
        dst[i] = dl * static_cast<float>(kIq4nlValues[qs[i] & 0x0f]);
        dst[i + 16] = dl * static_cast<float>(kIq4nlValues[qs[i] >> 4]);
      }
    }
  }
}

}  // namespace minfer::quant_detail
