// The token loop shared by the GEMM kernels (kernels.h, GemmArgs): for each group of 16 rows in
// [g0, g1), the tokens in register tiles of kTiles[0] while enough are left, then kTiles[1],
// and so on (the last size should be 1). `tile` is a templated callable:
//   gemm_tiles<8, 4, 1>(a, [&]<int T>(int64_t g, int64_t t0) { tile_q2_k<T>(a, g, t0); });
// and prefetch_ahead<T>(block, bytes) at the start of each weight block (decode streams), or
// for the large K-quant blocks prefetch_part<T, bytes, parts>(block, i) in each of its parts.
// Plain C++ (no intrinsics), so every ISA's kernel file includes it: an ISA header, compiled
// into the including region's namespace (isa-begin.h).
#pragma once
#ifndef MINFER_ISA_REGION
#error "gemm-tiles.h: include it inside an ISA region (isa-begin.h), after every other header"
#endif

#include <cstddef>
#include <cstdint>

#include "backends/cpu/kernels.h"
#include "backends/cpu/prefetch.h"

namespace minfer::cpu::MINFER_ISA {

// How far ahead of the block being read a decode step asks for the weights (bytes): 2 KiB
// for the 32-element types (288-544 bytes a block: of 1, 2, 3 and 4 KiB, 2 was fastest on
// Qwen2.5-0.5B Q4_0 and Q4_K_M), 1 KiB for the K-quants' super-blocks of 1 KiB and more (Qwen2.5-
// 1.5B Q4_K_M tg64 24.7-24.9 t/s at 1 KiB, 23.4-24.1 at 2, 22.8-22.9 at 3; Qwen3-0.6B Q4_K_M 57
// vs 55).
constexpr size_t kPrefetchBytes = 2048;
constexpr size_t kPrefetchBytesLarge = 1024;
constexpr size_t prefetch_distance(size_t block_bytes) {
  return block_bytes >= 1024 ? kPrefetchBytesLarge : kPrefetchBytes;
}

// A GEMM tile of T tokens at the start of one weight block of `bytes` bytes. Decode (one
// token) reads each weight byte once, and the hardware prefetchers alone keep too few lines in
// flight: Qwen2.5-0.5B tg64 Q4_0 60 -> 80-82 t/s, Q4_K_M 60 -> 69-70 with the lines of the
// block 2 KiB on requested here. Small batches (parallel sequences, a draft being verified)
// are still bound by the weights' latency: with the hint on tiles of up to 8 tokens a step of
// 4 tokens costs 25-29% less (Qwen2.5-0.5B shape, user CPU per step at -t 1, medians: AVX-512
// Q4_0 33.5 -> 23.9 ms, Q4_K_M 37.0 -> 28.5, Q8_0 47.5 -> 35.9; AVX2 Q4_0 52.3 -> 37.4;
// 8 tokens Q4_0 43.6 -> 32.0), and a 256-token prefill the same (790 vs 773 ms).
constexpr int kPrefetchTokens = 8;
template <int T>
[[gnu::always_inline]] inline void prefetch_ahead(const uint8_t* blk, size_t bytes) {
  if constexpr (T <= kPrefetchTokens) {
    prefetch_lines(blk + prefetch_distance(bytes), bytes);
  }
}

// The same request spread over a large block's compute: part `part` of kParts (the lines
// starting in that part of the block's span, each line once). A super-block of 2-3 KiB asked
// for at once stalled its tile on the fill buffers before any of its work (Q6_K decode: 62% of
// the tile's time on the loop of 53 prefetches); a few lines per sub-block overlap with it.
template <int T, size_t kBytes, int kParts>
[[gnu::always_inline]] inline void prefetch_part(const uint8_t* blk, int part) {
  if constexpr (T <= kPrefetchTokens) {
    const uintptr_t base = reinterpret_cast<uintptr_t>(blk) + prefetch_distance(kBytes);
    const uintptr_t lo = (base + static_cast<size_t>(part) * kBytes / kParts + 63) & ~uintptr_t{63};
    const uintptr_t hi = base + static_cast<size_t>(part + 1) * kBytes / kParts;
    // A part holds at least kSure line starts (its span is at least kBytes / kParts bytes) and
    // at most two more: no loop (its branch and counter cost the ARM decode tiles 15% of the
    // Q4_K tile in llvm-mca's M1 model, bench/arm-mca.py).
    constexpr size_t kSure = kBytes / kParts / 64;
    #pragma GCC unroll 16
    for (size_t i = 0; i < kSure; ++i) __builtin_prefetch(reinterpret_cast<const void*>(lo + 64 * i), 0, 3);
    #pragma GCC unroll 2
    for (size_t i = kSure; i < kSure + 2; ++i)
      if (lo + 64 * i < hi) __builtin_prefetch(reinterpret_cast<const void*>(lo + 64 * i), 0, 3);
  }
}

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

}  // namespace minfer::cpu::MINFER_ISA
