// ARMv8.0 Advanced SIMD tiled attention (kernels.h, AttnTileFn; the algorithm: attn-tile-impl.h):
// up to 32 query rows in 8 vectors of 4 lanes. The register blocking follows the rows: with
// NV row vectors, K keys x NV vectors of scores (and K dimensions x NV vectors of V sums) plus
// the NV q vectors fit the 32 registers with K = 8 for up to 2 row vectors, 4 for up to 4 and
// 2 for up to 8, so even a decode's few rows keep 8 fma chains going. The table takes tiles of
// kAttnTileMaxRows rows, as the reference's: one of 33 to 64 rows goes in parts of up to 32
// (whole tokens, or a token's heads in two), each lane's float steps unchanged. A NEON region
// (isa-begin.h); kernels-neon.cpp hands the table out.
#include <arm_neon.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "backends/cpu/kernels-neon.h"
#include "backends/cpu/kernels-ref.h"

#define MINFER_ISA neon
#include "backends/cpu/isa-begin.h"
#include "backends/cpu/attn-tile-impl.h"
#include "backends/cpu/neon-float.h"

namespace minfer::cpu::neon {
namespace {

template <int K>
struct Vec4 {
  using F = float32x4_t;
  using I = int32x4_t;
  static constexpr int kLanes = 4, kKeys = K, kDims = K;
  static F load(const float* p) { return vld1q_f32(p); }
  static I load_i(const int32_t* p) { return vld1q_s32(p); }
  static void store(float* p, F v) { vst1q_f32(p, v); }
  static F zero() { return vdupq_n_f32(0.0f); }
  static F set1(float x) { return vdupq_n_f32(x); }
  static F fmadd(F a, F b, F c) { return vfmaq_f32(c, a, b); }  // fma(a, b, c)
  static F mul(F a, F b) { return vmulq_f32(a, b); }
  static F add(F a, F b) { return vaddq_f32(a, b); }
  static F sub(F a, F b) { return vsubq_f32(a, b); }
  static F max(F a, F b) { return vmaxq_f32(a, b); }
  // Lanes whose row sees key j (j < n_kv), as an all-ones mask.
  static uint32x4_t visible(I n_kv, int32_t j) { return vcgtq_s32(n_kv, vdupq_n_s32(j)); }
  static F keep_max(uint32x4_t vis, F m, F x) { return vbslq_f32(vis, vmaxq_f32(m, x), m); }
  static F keep(uint32x4_t vis, F x) { return vreinterpretq_f32_u32(vandq_u32(vis, vreinterpretq_u32_f32(x))); }
  static F exp_clamped(F x) { return exp_poly4_nonpositive(vminq_f32(vmaxq_f32(x, vdupq_n_f32(-87.0f)), vdupq_n_f32(0.0f))); }
  static void widen(const uint8_t* row, int64_t n, bool f16, float* out) { widen_row4(row, n, f16, out); }
};

// R <= 32 rows, hd and hd_v multiples of 4.
void tile32(const AttnTileArgs& a) {
  const int64_t nv = (a.T * a.G + 3) / 4;
  const bool dims8 = a.hd_v % 8 == 0;
  switch (nv) {
    case 1: return dims8 ? tile::lanes<Vec4<8>, 1>(a) : tile::lanes<Vec4<4>, 1>(a);
    case 2: return dims8 ? tile::lanes<Vec4<8>, 2>(a) : tile::lanes<Vec4<4>, 2>(a);
    case 3: return tile::lanes<Vec4<4>, 3>(a);
    case 4: return tile::lanes<Vec4<4>, 4>(a);
    case 5: return tile::lanes<Vec4<2>, 5>(a);
    case 6: return tile::lanes<Vec4<2>, 6>(a);
    case 7: return tile::lanes<Vec4<2>, 7>(a);
    default: return tile::lanes<Vec4<2>, 8>(a);
  }
}

}  // namespace

void attn_tile(const AttnTileArgs& a) {
  const int64_t R = a.T * a.G;
  if (a.hd % 4 != 0 || a.hd_v % 4 != 0 || R < 1 || R > kAttnTileMaxRows) return ref::attn_tile(a);
  if (R <= 32) return tile32(a);
  AttnTileArgs h = a;
  if (a.G <= 32) {  // whole tokens: 32 / G of them per part
    const int64_t per = 32 / a.G;
    for (int64_t t0 = 0; t0 < a.T; t0 += per) {
      h.T = std::min(per, a.T - t0);
      h.q = a.q + t0 * a.q_tok;
      h.n_kv = a.n_kv + t0;
      h.y = a.y + t0 * a.y_tok;
      tile32(h);
    }
  } else {  // one token (R <= 64), its heads in two parts
    const int64_t g1 = a.G / 2;
    h.G = g1;
    tile32(h);
    h.G = a.G - g1;
    h.q = a.q + g1 * a.hd;
    h.y = a.y + g1 * a.hd_v;
    tile32(h);
  }
}

}  // namespace minfer::cpu::neon

#include "backends/cpu/isa-end.h"
