// The program scripts/check-macos-arm64.sh links for aarch64-macos (zig c++): it keeps the
// Apple path building (sysctlbyname feature detection, the NEON regions under clang, the thread
// pool's spin hint) without a Mac. Run on a Mac, it prints each table's name and checks each
// table's Q8_0 quantizer and dot product against the reference, bit for bit.
#include <cstdio>
#include <cstring>
#include <vector>

#include "backends/cpu/kernels.h"
#include "core/thread-pool.h"
#include "quant/blocks.h"

int main() {
  using namespace minfer;
  using namespace minfer::cpu;
  constexpr int64_t n = 256;
  std::vector<float> x(n), w(n);
  for (int64_t i = 0; i < n; ++i) {
    x[i] = static_cast<float>((i * 37) % 101) / 13.0f - 3.5f;
    w[i] = static_cast<float>((i * 53) % 97) / 11.0f - 4.0f;
  }
  const CpuKernels& r = cpu_kernels_ref();
  const int q = type_slot(DType::Q8_0);
  std::vector<BlockQ8_0> xr(n / kQK), wr(n / kQK), xt(n / kQK);
  r.quantize[q](x.data(), xr.data(), n);
  r.quantize[q](w.data(), wr.data(), n);
  const float want = r.vec_dot[q](n, wr.data(), xr.data());
  const CpuKernels* tables[8];
  const int nt = cpu_kernel_variants(tables, 8);
  int bad = 0;
  for (int t = 0; t < nt; ++t) {
    tables[t]->quantize[q](x.data(), xt.data(), n);
    const float got = tables[t]->vec_dot[q](n, wr.data(), xt.data());
    const bool ok = std::memcmp(xt.data(), xr.data(), sizeof(BlockQ8_0) * xt.size()) == 0 &&
                    std::memcmp(&got, &want, sizeof got) == 0;
    std::printf("%.*s: %s\n", static_cast<int>(tables[t]->isa.size()), tables[t]->isa.data(), ok ? "ok" : "MISMATCH");
    bad += !ok;
  }
  ThreadPool pool(2);
  std::vector<int> hit(64);
  pool.parallel_for(64, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) hit[i] = 1;
  });
  for (int h : hit) bad += h != 1;
  std::printf("selected: %.*s, %d threads\n", static_cast<int>(cpu_kernels().isa.size()), cpu_kernels().isa.data(),
              pool.n_threads());
  return bad ? 1 : 0;
}
