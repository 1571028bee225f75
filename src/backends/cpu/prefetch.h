// Software prefetch of a span of bytes, one request per 64-byte line, into every cache level:
//   prefetch_lines(kv.k_at(j + kKvPrefetchKeys), k_bytes);  // a cache row a few keys ahead
// Always inlined, and called directly rather than from a lambda: GCC's IPA pure-const pass
// judges a non-inlined function whose only effect is a prefetch side-effect free and deletes
// the call (it silently did so to a lambda in the narrow attention loop, whose first
// measurement then said "prefetch does not help").
#pragma once

#include <cstddef>

namespace minfer::cpu {

[[gnu::always_inline]] inline void prefetch_lines(const void* p, size_t bytes) {
  const auto* c = static_cast<const char*>(p);
  for (size_t o = 0; o < bytes; o += 64) __builtin_prefetch(c + o, 0, 3);
}

}  // namespace minfer::cpu
