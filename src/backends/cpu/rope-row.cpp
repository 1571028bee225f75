// The scalar reference of kernels.h's RopeRowFn: one pair at a time, the two roundings of each
// output spelled out (std::fma, then the product it adds).
#include <cmath>
#include <cstdint>

#include "backends/cpu/kernels-ref.h"

namespace minfer::cpu::ref {

void rope_row(int64_t half, bool neox, const float* cos, const float* sin, const float* x, float* y) {
  for (int64_t i = 0; i < half; ++i) {
    const int64_t i0 = neox ? i : 2 * i, i1 = neox ? i + half : 2 * i + 1;
    const float a = x[i0], b = x[i1];
    y[i0] = std::fma(a, cos[i], -(b * sin[i]));
    y[i1] = std::fma(a, sin[i], b * cos[i]);
  }
}

}  // namespace minfer::cpu::ref
