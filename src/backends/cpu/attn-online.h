// The narrow attention's per-key float steps for one query row, shared by ops-attn.cpp's
// composed loops and the fused kernels (attn-rows-avx512.cpp), so that every ISA takes one
// sequence of float operations (llama.cpp's CPU flash attention for small batches):
//   float s = narrow_score(dot, scale, softcap);
//   const OnlineStep st = online_step(s, m, l);   // m, l: the row's running max and sum
//   acc = acc * st.ms (when st.ms != 1), then acc = fma(v, st.p, acc)
#pragma once

#include <cmath>

namespace minfer::cpu {

// Both are static, and the kernels include this header before their ISA region (isa-begin.h):
// baseline code, inlined into ops-attn.cpp and attn-rows-avx512.cpp alike, never a shared
// out-of-line copy compiled for an ISA.

// The scaled score; with a soft-cap, softcap * tanh(s) (scale already divided by softcap).
static inline float narrow_score(float dot, float scale, float softcap) {
  const float s = dot * scale;
  return softcap > 0.0f ? softcap * std::tanh(s) : s;
}

struct OnlineStep {
  float ms;  // factor of what was summed so far (1: unchanged; 0 on the first key)
  float p;   // this key's weight
};

// s > m (a new maximum): ms = e^(m - s), m = s, p = 1; else ms = 1, p = e^(s - m); then
// l = l * ms + p. e^x is libm's expf, as llama.cpp's.
static inline OnlineStep online_step(float s, float& m, float& l) {
  OnlineStep st{1.0f, 1.0f};
  if (s > m) {
    st.ms = std::exp(m - s);
    m = s;
  } else {
    st.p = std::exp(s - m);
  }
  l = l * st.ms + st.p;
  return st;
}

}  // namespace minfer::cpu
