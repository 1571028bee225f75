// AVX-512 tiled attention (kernels.h, AttnTileFn; the algorithm: attn-tile-impl.h): up to 64
// query rows in 4 vectors of 16 lanes, 4 keys x 4 row vectors of scores and 4 dimensions x 4
// row vectors of V sums in registers. Compiled alone with the AVX-512 flags.
#include <immintrin.h>

#include "backends/cpu/attn-tile-impl.h"
#include "backends/cpu/avx512-common.h"
#include "backends/cpu/kernels-ref.h"

namespace minfer::cpu::avx512 {
namespace {

struct Vec16 {
  using F = __m512;
  using I = __m512i;
  static constexpr int kLanes = 16, kKeys = 4, kDims = 4;
  static F load(const float* p) { return _mm512_load_ps(p); }
  static I load_i(const int32_t* p) { return _mm512_load_si512(p); }
  static void store(float* p, F v) { _mm512_store_ps(p, v); }
  static F zero() { return _mm512_setzero_ps(); }
  static F set1(float x) { return _mm512_set1_ps(x); }
  static F fmadd(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F add(F a, F b) { return _mm512_add_ps(a, b); }
  static F sub(F a, F b) { return _mm512_sub_ps(a, b); }
  static F max(F a, F b) { return _mm512_max_ps(a, b); }
  // Lanes whose row sees key j (j < n_kv), as a mask register.
  static __mmask16 visible(I n_kv, int32_t j) { return _mm512_cmpgt_epi32_mask(n_kv, _mm512_set1_epi32(j)); }
  static F keep_max(__mmask16 vis, F m, F x) { return _mm512_mask_max_ps(m, vis, m, x); }
  static F keep(__mmask16 vis, F x) { return _mm512_maskz_mov_ps(vis, x); }
  static F exp_clamped(F x) {
    return exp_poly16_nonpositive(_mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.0f)), _mm512_setzero_ps()));
  }
  static void widen(const uint8_t* row, int64_t n, bool f16, float* out) { widen_row(row, n, f16, out); }
};

}  // namespace

void attn_tile(const AttnTileArgs& a) { tile::run<Vec16>(a, ref::attn_tile); }

}  // namespace minfer::cpu::avx512
