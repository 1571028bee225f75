// The token loop shared by the GEMM kernels (kernels.h, GemmArgs): for each group of 16 rows in
// [g0, g1), the tokens in register tiles of kTiles[0] while enough are left, then kTiles[1],
// and so on (the last size should be 1). `tile` is a templated callable:
//   gemm_tiles<8, 4, 1>(a, [&]<int T>(int64_t g, int64_t t0) { tile_q2_k<T>(a, g, t0); });
// Plain C++ (no intrinsics), so every ISA's kernel file includes it.
#pragma once

#include <cstdint>

#include "backends/cpu/kernels.h"

namespace minfer::cpu {

template <int... kTiles, class Tile>
inline void gemm_tiles(const GemmArgs& a, Tile tile) {
  for (int64_t g = a.g0; g < a.g1; ++g) {
    int64_t t = 0;
    (
        [&] {
          for (; t + kTiles <= a.n_tok; t += kTiles) tile.template operator()<kTiles>(g, t);
        }(),
        ...);
  }
}

}  // namespace minfer::cpu
