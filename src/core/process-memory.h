// This process's resident memory, from /proc/self/status (Linux; zeros elsewhere).
//
//   ProcessMemory m = process_memory();
//   fmt::print("{} MiB now, {} MiB at most\n", m.rss >> 20, m.peak_rss >> 20);
#pragma once

#include <cstddef>

namespace minfer {

struct ProcessMemory {
  size_t rss = 0;       // bytes resident now (VmRSS: anonymous + file-backed + shared)
  size_t peak_rss = 0;  // the most bytes resident so far (VmHWM)
};

ProcessMemory process_memory();

}  // namespace minfer
