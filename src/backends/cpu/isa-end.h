// Closes the ISA region opened by isa-begin.h (see there): the rest of the file is baseline.
#ifndef MINFER_ISA_REGION
#error "isa-end.h: no ISA region is open"
#endif
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#undef MINFER_ISA_REGION
#undef MINFER_ISA_PUSH
#undef MINFER_ISA_TARGET
#undef MINFER_ISA
