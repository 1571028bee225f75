#include "cli/notice.h"

#include <atomic>
#include <cstdio>

namespace minfer::cli {
namespace {
std::atomic<bool> g_quiet{false};
}  // namespace

void set_quiet(bool q) { g_quiet = q; }
bool quiet() { return g_quiet; }

void info(const std::string& line) {
  if (!g_quiet) std::fprintf(stderr, "%s\n", line.c_str());
}

void warning(const std::string& line) { std::fprintf(stderr, "minfer: warning: %s\n", line.c_str()); }

}  // namespace minfer::cli
