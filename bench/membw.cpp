// minfer-membw: the machine's read-bandwidth ceiling, the denominator of bench/compare.py's
// "fraction of bandwidth" column. T threads each sum their share of a buffer (default 1 GiB,
// far above the caches) with 256-bit loads; prints {"threads":T,"bytes":B,"gbps":[...],
// "best_gbps":x} (GB/s = 1e9 bytes/s; best of R passes after a warm-up pass). The buffer is
// marked for transparent huge pages, as minfer's repacked weights are (without THP it reads
// through 4 KiB pages, a TLB miss each, and reports less than a weight stream can get).
//
//   minfer-membw [-t 2] [-m 1024] [-r 5]
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

// 256-bit loads where the CPU has AVX2 (the clone the ifunc resolver picks at load time), the
// same loop in SSE halves elsewhere: the ceiling runs on every x86-64 CPU. GCC vector types,
// not intrinsics, so that one body compiles for both.
using F8 = float __attribute__((vector_size(32)));
#if defined(__x86_64__)
#define MINFER_MEMBW_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define MINFER_MEMBW_CLONES  // ARM: NEON halves of the same loop
#endif

MINFER_MEMBW_CLONES double sum_range(const float* p, size_t n) {
  F8 a0 = {}, a1 = {}, a2 = {}, a3 = {};
  const F8* v = reinterpret_cast<const F8*>(p);  // p: 32-byte aligned (posix_memalign below)
  size_t i = 0;
  for (; i + 32 <= n; i += 32, v += 4) {
    a0 += v[0];
    a1 += v[1];
    a2 += v[2];
    a3 += v[3];
  }
  const F8 t = (a0 + a1) + (a2 + a3);
  double s = 0;
  for (int k = 0; k < 8; ++k) s += t[k];
  return s;
}

int arg(int argc, char** argv, const char* flag, int def) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], flag) == 0) return std::atoi(argv[i + 1]);
  return def;
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = std::max(1, arg(argc, argv, "-t", static_cast<int>(std::thread::hardware_concurrency())));
  const size_t mib = static_cast<size_t>(std::max(64, arg(argc, argv, "-m", 1024)));
  const int reps = std::max(1, arg(argc, argv, "-r", 5));
  const size_t n = mib * 1024 * 1024 / sizeof(float);  // [n] f32
  void* mem = nullptr;
  if (posix_memalign(&mem, size_t{2} << 20, n * sizeof(float)) == 0) madvise(mem, n * sizeof(float), MADV_HUGEPAGE);
  float* buf = static_cast<float*>(mem);
  if (!buf) {
    std::fprintf(stderr, "minfer-membw: cannot allocate %zu MiB\n", mib);
    return 1;
  }
  std::vector<std::thread> pool;
  const size_t per = n / static_cast<size_t>(threads) / 32 * 32;
  for (int t = 0; t < threads; ++t)  // first touch by the reading thread
    pool.emplace_back([&, t] { std::memset(buf + static_cast<size_t>(t) * per, 1, per * sizeof(float)); });
  for (auto& th : pool) th.join();
  std::vector<double> gbps;
  volatile double sink = 0;
  for (int r = 0; r <= reps; ++r) {
    std::vector<double> part(static_cast<size_t>(threads));
    pool.clear();
    const auto t0 = std::chrono::steady_clock::now();
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] { part[static_cast<size_t>(t)] = sum_range(buf + static_cast<size_t>(t) * per, per); });
    for (auto& th : pool) th.join();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (double x : part) sink = sink + x;
    if (r > 0) gbps.push_back(static_cast<double>(per * static_cast<size_t>(threads) * sizeof(float)) / s / 1e9);
  }
  std::string list;
  for (double g : gbps) {
    if (!list.empty()) list += ',';
    list += std::to_string(g);
  }
  std::printf("{\"threads\":%d,\"bytes\":%zu,\"gbps\":[%s],\"best_gbps\":%.3f}\n", threads,
              per * static_cast<size_t>(threads) * sizeof(float), list.c_str(), *std::max_element(gbps.begin(), gbps.end()));
  std::free(buf);
  return 0;
}
