#include "core/process-memory.h"

#include <cstdio>
#include <cstring>

namespace minfer {

ProcessMemory process_memory() {
  ProcessMemory m;
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return m;
  char line[256];
  while (std::fgets(line, sizeof line, f)) {
    unsigned long long kb = 0;
    if (std::sscanf(line, "VmRSS: %llu kB", &kb) == 1) m.rss = static_cast<size_t>(kb) * 1024;
    if (std::sscanf(line, "VmHWM: %llu kB", &kb) == 1) m.peak_rss = static_cast<size_t>(kb) * 1024;
  }
  std::fclose(f);
  return m;
}

}  // namespace minfer
