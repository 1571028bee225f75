// The "amx" table: the AVX-512 table with AMX-INT8 GEMMs for the weight types whose
// activations are Q8_0 (gemm-amx.cpp), and for Q4_K and Q6_K (gemm-amx-q4k.cpp,
// gemm-amx-q6k.cpp: their scales folded into the weights in byte-sized parts). Usable when cpuid reports AMX-TILE and AMX-INT8, the
// OS saves the tile state (XCR0 bits 17 and 18), and Linux grants this process the tile data
// (arch_prctl ARCH_REQ_XCOMP_PERM, asked once here, before any kernel runs).
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "backends/cpu/kernels.h"

namespace minfer::cpu {
namespace amx {
void gemm_q4_0(const GemmArgs& a);  // gemm-amx.cpp
void gemm_q5_0(const GemmArgs& a);
void gemm_q8_0(const GemmArgs& a);
void gemm_iq4_nl(const GemmArgs& a);
void gemm_q4_k(const GemmArgs& a);  // gemm-amx-q4k.cpp
void gemm_q6_k(const GemmArgs& a);  // gemm-amx-q6k.cpp
}  // namespace amx

namespace {

bool cpu_has_amx() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  const bool tile = d & (1u << 24), int8 = d & (1u << 25);
  if (!tile || !int8) return false;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) return false;  // OSXSAVE
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  if ((lo & (3u << 17)) != (3u << 17)) return false;  // XTILECFG, XTILEDATA
#if defined(__linux__) && defined(SYS_arch_prctl)
  constexpr long kReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kReqXcompPerm, kXfeatureXtiledata) == 0;
#else
  return false;
#endif
}

CpuKernels make_amx(const CpuKernels& base) {
  CpuKernels k = base;
  k.isa = "amx";
  k.gemm[type_slot(DType::Q4_0)] = amx::gemm_q4_0;
  k.gemm[type_slot(DType::Q5_0)] = amx::gemm_q5_0;
  k.gemm[type_slot(DType::Q8_0)] = amx::gemm_q8_0;
  k.gemm[type_slot(DType::IQ4_NL)] = amx::gemm_iq4_nl;
  k.gemm[type_slot(DType::Q4_K)] = amx::gemm_q4_k;
  k.gemm[type_slot(DType::Q6_K)] = amx::gemm_q6_k;
  // Each call unpacks a group's weights once for all its token tiles: longer calls amortize it.
  k.gemm_x_block_bytes = 1 << 20;
  return k;
}

}  // namespace

const CpuKernels* cpu_kernels_amx() {
  static const bool ok = cpu_kernels_avx512() && cpu_has_amx();
  if (!ok) return nullptr;
  static const CpuKernels k = make_amx(*cpu_kernels_avx512());
  return &k;
}

}  // namespace minfer::cpu
