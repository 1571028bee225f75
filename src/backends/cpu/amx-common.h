// Helpers shared by the AMX kernel files: an ISA header, included inside their region
// (isa-begin.h). Internal.
//
//   amx::configure({{16, 64}, {16, 64}, {}, {}, {16, 32}, ...});  // tmm0..7: rows, bytes per row
//   ... _tile_loadd / _tile_dpbssd / _tile_stored ...
//   _tile_release();
//   amx::gemm_tail(a, done, avx512::gemm_q4_0);          // the tokens past the last tile
#pragma once
#ifndef MINFER_ISA_REGION
#error "amx-common.h: include it inside an ISA region (isa-begin.h), after every other header"
#endif

#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "backends/cpu/kernels.h"
#include "backends/cpu/repack.h"
#include "core/fp16.h"
#include "quant/blocks.h"

namespace minfer::cpu::MINFER_ISA {

struct TileShape {
  uint8_t rows = 0;
  uint16_t colsb = 0;  // bytes per row
};

// Palette 1 with the shapes of tmm0..tmm7 (unused tiles: {}), for this thread until released.
inline void configure(const TileShape (&shapes)[8]) {
  struct alignas(64) TileConfig {
    uint8_t palette = 1;
    uint8_t start_row = 0;
    uint8_t reserved[14] = {};
    uint16_t colsb[16] = {};
    uint8_t rows[16] = {};
  } c;
  for (int t = 0; t < 8; ++t) c.rows[t] = shapes[t].rows, c.colsb[t] = shapes[t].colsb;
  // Not _tile_loadconfig: GCC 12's tells the compiler that only the first 8 bytes are read,
  // so the stores of the rest may be dropped.
  __asm__ volatile("ldtilecfg %0" : : "m"(c));
}

// All eight tiles 16 rows x 64 bytes (the K-quant kernels).
inline void configure_all_64() {
  configure({{16, 64}, {16, 64}, {16, 64}, {16, 64}, {16, 64}, {16, 64}, {16, 64}, {16, 64}});
}

// A buffer of n bytes, 64-byte aligned, grown on demand and kept for the next call.
struct AlignedScratch {
  AlignedScratch() = default;
  AlignedScratch(const AlignedScratch&) = delete;
  AlignedScratch& operator=(const AlignedScratch&) = delete;
  uint8_t* get(size_t n) {
    if (size_ < n) {
      delete[] raw_;
      raw_ = new uint8_t[n + 64];
      size_ = n;
    }
    return reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(raw_) + 63) & ~uintptr_t{63});
  }
  ~AlignedScratch() { delete[] raw_; }

 private:
  uint8_t* raw_ = nullptr;
  size_t size_ = 0;
};

constexpr int kTileTokens = 16;  // tokens per tile (rows of A and C)

// Output tiles go around the caches (non-temporal stores) when the call's output rows span at
// least kStreamBytes (twice a core's L2 here): such a store misses, waits in the store buffer
// for its line, and the loads behind it that alias it modulo 4 KiB wait with it. Qwen2.5-0.5B
// ffn_up (512 tokens x 4864 rows), one core: 41 ns per block with plain stores, 25 streamed,
// as fast as with no output at all; pp512 1138 t/s against 1085 streaming every output (the
// next op then reads small ones from memory) and ~1000 never. Needs 64-byte aligned rows.
constexpr size_t kStreamBytes = size_t{4} << 20;
inline bool stream_output(const GemmArgs& a) {
  const auto bytes = static_cast<size_t>(a.n_tok * a.y_stride) * sizeof(float);
  return bytes >= kStreamBytes && a.y_stride % 16 == 0 && reinterpret_cast<uintptr_t>(a.y) % 64 == 0;
}

// The 16 token rows of one output tile (16 floats each), rows `stride` floats apart.
inline void store_tile(float* y, int64_t stride, const __m512 (&acc)[kTileTokens], bool stream) {
  if (stream) {
    #pragma GCC unroll 16
    for (int t = 0; t < kTileTokens; ++t) _mm512_stream_ps(y + t * stride, acc[t]);
  } else {
    #pragma GCC unroll 16
    for (int t = 0; t < kTileTokens; ++t) _mm512_storeu_ps(y + t * stride, acc[t]);
  }
}

// The end of a call's tiles: the tile state released and, after streamed stores, a fence, so
// the output is visible before the thread pool reports the chunk done.
inline void end_tiles(bool stream) {
  _tile_release();
  if (stream) _mm_sfence();
}

// The tokens past the last whole tile (from `done` on) through `tail` (a VNNI kernel: same bits).
inline void gemm_tail(const GemmArgs& a, int64_t done, GemmFn tail) {
  if (done >= a.n_tok) return;
  GemmArgs rest = a;
  rest.x = a.x + static_cast<size_t>(done) * a.x_row;
  rest.xsum = a.xsum ? a.xsum + done * a.n_blocks : nullptr;
  rest.n_tok = a.n_tok - done;
  rest.y = a.y + done * a.y_stride;
  tail(rest);
}

// The call of a K-quant GEMM over Q8_K activations (gemm-amx-q4k.cpp, gemm-amx-q6k.cpp), the
// kernel K giving:
//   kUnpacked, kPairs            bytes of one unpacked super-block; int16 pairs per token
//   pairs(const BlockQ8_K&, uint32_t* out)   the token's kPairs pairs of block sums
//   configure()                  its tile shapes
//   unpack(blk, out)             one repacked super-block -> kUnpacked bytes
//   tile(a, wg, wq, x, xd, bs, y, stream)  one group against one token tile (stream: store_tile's)
// Per token tile and super-block, d_x and the pairs are gathered once per call; per group, the
// super-blocks are unpacked once for all the token tiles.
template <class K>
void gemm_super_blocks(const GemmArgs& a, GemmFn tail) {
  const int64_t n_tiles = a.n_tok / kTileTokens;
  if (n_tiles > 0) {
    thread_local std::vector<float> xd;     // [n_tiles][n_blocks][16] the activation scales
    thread_local std::vector<uint32_t> bs;  // [n_tiles][n_blocks][16 tokens][kPairs]
    thread_local AlignedScratch w;          // [n_blocks][kUnpacked] the group's super-blocks
    const int64_t nb = a.n_blocks;
    const auto n_tb = static_cast<size_t>(n_tiles * nb * kTileTokens);
    if (xd.size() < n_tb) xd.resize(n_tb);
    if (bs.size() < K::kPairs * n_tb) bs.resize(K::kPairs * n_tb);
    for (int64_t i = 0; i < n_tiles; ++i)
      for (int t = 0; t < kTileTokens; ++t) {
        const auto* xr = reinterpret_cast<const BlockQ8_K*>(a.x + static_cast<size_t>(i * kTileTokens + t) * a.x_row);
        for (int64_t b = 0; b < nb; ++b) {
          const size_t at = static_cast<size_t>((i * nb + b) * kTileTokens + t);
          xd[at] = xr[b].d;
          K::pairs(xr[b], &bs[K::kPairs * at]);
        }
      }
    uint8_t* wq = w.get(static_cast<size_t>(nb) * K::kUnpacked);
    const bool stream = stream_output(a);
    K::configure();
    for (int64_t g = a.g0; g < a.g1; ++g) {
      const uint8_t* wg = a.w + static_cast<size_t>(g * nb) * a.block_bytes;
      for (int64_t b = 0; b < nb; ++b) K::unpack(wg + static_cast<size_t>(b) * a.block_bytes, wq + static_cast<size_t>(b) * K::kUnpacked);
      for (int64_t i = 0; i < n_tiles; ++i)
        K::tile(a, wg, wq, a.x + static_cast<size_t>(i * kTileTokens) * a.x_row, xd.data() + i * nb * kTileTokens,
                bs.data() + i * nb * kTileTokens * K::kPairs, a.y + i * kTileTokens * a.y_stride + g * kRepackRows, stream);
    }
    end_tiles(stream);
  }
  gemm_tail(a, n_tiles * kTileTokens, tail);
}

}  // namespace minfer::cpu::MINFER_ISA
