// Opens an ISA region: the kernels of one table, compiled for that table's instruction set and
// nothing else. Every ISA kernel file is written this way (docs/recipes.md, "A CPU kernel"):
//
//   #include <immintrin.h>                   // every header of another library first: what
//   #include "quant/blocks.h"                // is declared outside the region stays baseline
//   #define MINFER_ISA avx2                  // the table: avx2, avx512, amx (x86-64) or
//                                            // neon, dotprod, i8mm (AArch64; <arm_neon.h>)
//   #include "backends/cpu/isa-begin.h"
//   #include "backends/cpu/avx2-common.h"    // ISA headers only (namespace minfer::cpu::MINFER_ISA)
//   namespace minfer::cpu::avx2 { ... }      // all the file's code
//   #include "backends/cpu/isa-end.h"
//
// Why a region and not a file compiled with -mavx2: a file compiled with an ISA's flags also
// compiles the std templates and other libraries' inline functions it uses with them, and
// emits them as weak copies (std::vector<unsigned>::resize, say) that the linker may keep for
// the whole program, so the tokenizer ran AVX-512 code on AVX2-only CPUs (a SIGILL in the ASan
// build). Inside a region, only functions defined in it get the ISA (GCC's `#pragma GCC
// target`, clang's `#pragma clang attribute`): std templates and other headers' inline
// functions keep the baseline definition they were parsed with, and are inlined into the
// kernels where the optimizer wants them (a baseline callee inlines into a wider caller). The
// region's own functions are all in minfer::cpu::<isa> or have internal linkage, so no other
// code can link to them: tests/isa/isa_scan.py checks every binary for ISA instructions outside
// those namespaces, and tests/isa/isa_regions.py that no region includes anything but ISA
// headers.
//
// Everything an ISA header may include is included here, before the region opens, so the
// ISA headers' own #include lines are no-ops and no std header is first parsed inside.
#ifdef MINFER_ISA_REGION
#error "isa-begin.h: an ISA region is already open (close it with isa-end.h)"
#endif
#ifndef MINFER_ISA
#error "isa-begin.h: #define MINFER_ISA (avx2, avx512, amx, neon, dotprod or i8mm) before including it"
#endif

#if defined(__x86_64__)
#include <immintrin.h>
#elif defined(__aarch64__)
#include <arm_neon.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "backends/cpu/kernels.h"
#include "backends/cpu/prefetch.h"
#include "backends/cpu/repack.h"
#include "core/fp16.h"
#include "quant/blocks.h"

#define MINFER_ISA_ID_avx2 1
#define MINFER_ISA_ID_avx512 2
#define MINFER_ISA_ID_amx 3
#define MINFER_ISA_ID_neon 11
#define MINFER_ISA_ID_dotprod 12
#define MINFER_ISA_ID_i8mm 13
#define MINFER_ISA_ID_CAT(isa) MINFER_ISA_ID_##isa
#define MINFER_ISA_ID(isa) MINFER_ISA_ID_CAT(isa)

// The instruction sets of each table: what kernels-<isa>.cpp checks (cpuid; getauxval or
// sysctlbyname on ARM, kernels-neon.cpp) before it hands the table out. ARM: GCC takes an
// architecture plus extensions (GCC 12 refuses a bare "+dotprod+i8mm" for vdotq_s32, and
// FEAT_DotProd / FEAT_I8MM are ARMv8.2 options, so a CPU with them has ARMv8.2's base too);
// clang takes feature names.
#if MINFER_ISA_ID(MINFER_ISA) == 1
#define MINFER_ISA_TARGET "avx2,fma,f16c"
#elif MINFER_ISA_ID(MINFER_ISA) == 2
#define MINFER_ISA_TARGET "avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c"
#elif MINFER_ISA_ID(MINFER_ISA) == 3
#define MINFER_ISA_TARGET "amx-tile,amx-int8,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c"
#elif MINFER_ISA_ID(MINFER_ISA) == 11 && defined(__clang__)
#define MINFER_ISA_TARGET "neon"
#elif MINFER_ISA_ID(MINFER_ISA) == 11
#define MINFER_ISA_TARGET "arch=armv8-a+simd"
#elif MINFER_ISA_ID(MINFER_ISA) == 12 && defined(__clang__)
#define MINFER_ISA_TARGET "neon,dotprod"
#elif MINFER_ISA_ID(MINFER_ISA) == 12
#define MINFER_ISA_TARGET "arch=armv8.2-a+dotprod"
#elif MINFER_ISA_ID(MINFER_ISA) == 13 && defined(__clang__)
#define MINFER_ISA_TARGET "neon,dotprod,i8mm"
#elif MINFER_ISA_ID(MINFER_ISA) == 13
#define MINFER_ISA_TARGET "arch=armv8.2-a+dotprod+i8mm"
#else
#error "isa-begin.h: MINFER_ISA must be avx2, avx512, amx, neon, dotprod or i8mm"
#endif
#if MINFER_ISA_ID(MINFER_ISA) < 10 && !defined(__x86_64__)
#error "isa-begin.h: an x86 region in a build for another architecture (CMakeLists.txt lists the x86 files)"
#elif MINFER_ISA_ID(MINFER_ISA) > 10 && !defined(__aarch64__)
#error "isa-begin.h: an ARM region in a build for another architecture (CMakeLists.txt lists the ARM files)"
#endif

#define MINFER_ISA_PRAGMA(x) _Pragma(#x)
#if defined(__clang__)
#define MINFER_ISA_PUSH(t) MINFER_ISA_PRAGMA(clang attribute push(__attribute__((target(t))), apply_to = function))
MINFER_ISA_PUSH(MINFER_ISA_TARGET)
#elif defined(__GNUC__)
#define MINFER_ISA_PUSH(t) MINFER_ISA_PRAGMA(GCC target(t))
#pragma GCC push_options
MINFER_ISA_PUSH(MINFER_ISA_TARGET)
#else
#error "isa-begin.h: ISA regions need GCC or clang"
#endif

#define MINFER_ISA_REGION 1
