// AVX2 tiled attention (kernels.h, AttnTileFn; the algorithm: attn-tile-impl.h): up to 32 query
// rows in 4 vectors of 8 lanes, 2 keys x 4 row vectors of scores and 2 dimensions x 4 row
// vectors of V sums in the 16 registers. An AVX2 region (isa-begin.h).
#include <immintrin.h>

#include "backends/cpu/kernels-avx2.h"
#include "backends/cpu/kernels-ref.h"

#define MINFER_ISA avx2
#include "backends/cpu/isa-begin.h"
#include "backends/cpu/attn-tile-impl.h"
#include "backends/cpu/avx2-common.h"

namespace minfer::cpu::avx2 {
namespace {

struct Vec8 {
  using F = __m256;
  using I = __m256i;
  static constexpr int kLanes = 8, kKeys = 2, kDims = 2;
  static F load(const float* p) { return _mm256_load_ps(p); }
  static I load_i(const int32_t* p) { return _mm256_load_si256(reinterpret_cast<const __m256i*>(p)); }
  static void store(float* p, F v) { _mm256_store_ps(p, v); }
  static F zero() { return _mm256_setzero_ps(); }
  static F set1(float x) { return _mm256_set1_ps(x); }
  static F fmadd(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
  static F mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F add(F a, F b) { return _mm256_add_ps(a, b); }
  static F sub(F a, F b) { return _mm256_sub_ps(a, b); }
  static F max(F a, F b) { return _mm256_max_ps(a, b); }
  // Lanes whose row sees key j (j < n_kv), as an all-ones mask.
  static F visible(I n_kv, int32_t j) { return _mm256_castsi256_ps(_mm256_cmpgt_epi32(n_kv, _mm256_set1_epi32(j))); }
  static F keep_max(F vis, F m, F x) { return _mm256_blendv_ps(m, _mm256_max_ps(m, x), vis); }
  static F keep(F vis, F x) { return _mm256_and_ps(vis, x); }
  static F exp_clamped(F x) {
    return exp_poly8(_mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.0f)), _mm256_setzero_ps()));
  }
  static void widen(const uint8_t* row, int64_t n, bool f16, float* out) { widen_row8(row, n, f16, out); }
};

}  // namespace

void attn_tile(const AttnTileArgs& a) { tile::run<Vec8>(a, ref::attn_tile); }

}  // namespace minfer::cpu::avx2

#include "backends/cpu/isa-end.h"
