// Reference quantizers of IQ4_NL and IQ4_XS: 4-bit indices into the non-linear table
// kIq4nlValues. IQ4_NL has one fp16 scale per 32 elements; IQ4_XS has 8 sub-blocks of 32 per
// super-block, each with a 6-bit signed scale (stored +32) relative to one fp16 d. The
// search is fit_symmetric (scale-search.h) over the table's levels. Element i of a block of
// 32 is the low nibble of qs[i] for i < 16 and the high nibble of qs[i - 16] otherwise.
#include <cassert>
#include <cstring>

#include "core/fp16.h"
#include "quant/blocks.h"
#include "quant/internal.h"
#include "quant/scale-search.h"

namespace minfer::quant_detail {

namespace {

const SymSpec& nl_spec() {  // one block, its scale is d itself
  static const SymSpec s{1, kQK, Levels::table(kIq4nlValues, 16), 1, 1, 0};
  return s;
}
const SymSpec& xs_spec() {  // radius 2 instead of 1 gains < 0.01%
  static const SymSpec s{8, kQK, Levels::table(kIq4nlValues, 16), -32, 31, 1};
  return s;
}

void pack_nibbles32(const uint8_t* q, uint8_t* qs) {
  for (int l = 0; l < 16; ++l) qs[l] = static_cast<uint8_t>(q[l] | (q[l + 16] << 4));
}

}  // namespace

void quantize_iq4_nl(const float* src, void* dst, int64_t n) {
  assert(n % kQK == 0);
  auto* blocks = static_cast<BlockIQ4_NL*>(dst);
  float w[kQK];
  for (int64_t ib = 0; ib < n / kQK; ++ib) {
    const float* x = src + ib * kQK;
    element_weights(x, w, kQK);
    const SymFit f = fit_symmetric(nl_spec(), x, w);
    blocks[ib].d = fp32_to_fp16(f.d);
    pack_nibbles32(f.q, blocks[ib].qs);
  }
}

void quantize_iq4_xs(const float* src, void* dst, int64_t n) {
  assert(n % kQKK == 0);
  auto* blocks = static_cast<BlockIQ4_XS*>(dst);
  float w[kQKK];
  for (int64_t ib = 0; ib < n / kQKK; ++ib) {
    const float* x = src + ib * kQKK;
    BlockIQ4_XS& b = blocks[ib];
    element_weights(x, w, kQKK);
    const SymFit f = fit_symmetric(xs_spec(), x, w);
    b.d = fp32_to_fp16(f.d);
    b.scales_h = 0;
    std::memset(b.scales_l, 0, sizeof(b.scales_l));
    for (int j = 0; j < 8; ++j) {
      const int ls = f.sc[j] + 32;
      assert(ls >= 0 && ls < 64);
      b.scales_l[j / 2] |= static_cast<uint8_t>((ls & 15) << (4 * (j % 2)));
      b.scales_h |= static_cast<uint16_t>((ls >> 4) << (2 * j));
      pack_nibbles32(f.q + j * kQK, b.qs + j * 16);
    }
  }
}

}  // namespace minfer::quant_detail
