// The tables of the other architecture: an x86 build has no ARM tables and an ARM build no x86
// ones (CMakeLists.txt builds only this architecture's kernel files), so their getters say
// "not here" and select() / cpu_kernel_variants() skip them. Other architectures have only the
// reference.
#include "backends/cpu/kernels.h"

namespace minfer::cpu {

#if !defined(__x86_64__)
const CpuKernels* cpu_kernels_avx2() { return nullptr; }
const CpuKernels* cpu_kernels_avx512() { return nullptr; }
const CpuKernels* cpu_kernels_amx() { return nullptr; }
#endif

#if !defined(__aarch64__)
const CpuKernels* cpu_kernels_neon() { return nullptr; }
const CpuKernels* cpu_kernels_dotprod() { return nullptr; }
const CpuKernels* cpu_kernels_i8mm() { return nullptr; }
#endif

}  // namespace minfer::cpu
