// Software prefetch of a span of bytes, one request per 64-byte line, into every cache level
// (prefetch_lines) or into L2 (prefetch_lines_l2):
//   prefetch_lines(blk + 2048, block_bytes);                   // decode weights, 2 KiB ahead
//   prefetch_lines_l2(kv.k_at(j + kKvPrefetchKeys), k_bytes);  // a KV row a few keys ahead
// Always inlined, and called directly rather than from a lambda: GCC's IPA pure-const pass
// judges a non-inlined function whose only effect is a prefetch side-effect free and deletes
// the call (it silently did so to a lambda in the narrow attention loop, whose first
// measurement then said "prefetch does not help").
#pragma once

#include <cstddef>

namespace minfer::cpu {

// Locality 3: every level (prefetcht0); 2: L2 and below (prefetcht1).
template <int kLocality>
[[gnu::always_inline]] inline void prefetch_span(const void* p, size_t bytes) {
  const auto* c = static_cast<const char*>(p);
  for (size_t o = 0; o < bytes; o += 64) __builtin_prefetch(c + o, 0, kLocality);
}

[[gnu::always_inline]] inline void prefetch_lines(const void* p, size_t bytes) { prefetch_span<3>(p, bytes); }

// The same into L2 only (prefetcht1): for scattered rows read a little later, where requests
// into L1 pile up and stall the loop that issues them (the KV cache rows of the attention,
// where the issuing prefetcht0 had become the hottest instruction: Qwen3-0.6B tg128 attention
// ~245 -> ~230 ms; tg32 at depth 4096, the tiles asking for a block of 32 keys at once, 14.5 ->
// 15.8 tok/s).
[[gnu::always_inline]] inline void prefetch_lines_l2(const void* p, size_t bytes) { prefetch_span<2>(p, bytes); }

}  // namespace minfer::cpu
