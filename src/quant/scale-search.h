// Scale searches shared by the K-quant and IQ4 reference quantizers. Internal to the quant
// library. Two families of super-block layouts are covered:
//
//   symmetric   x[i] ~= d * sc[j] * v[q[i]]          (Q3_K, Q6_K, IQ4_XS; IQ4_NL with sc == 1)
//   asymmetric  x[i] ~= d * sc[j] * q[i] - dmin * m[j]  (Q2_K, Q4_K, Q5_K)
//
// where j = i / sub_len is the sub-block, v a sorted table of levels, sc/m small integers and
// d/dmin fp16. Both solvers minimise the weighted squared error sum(w * (x - y)^2) of the
// values y that the stored bytes decode to, in three stages: the best float scale (and min) of
// each sub-block on its own; integer sub-block scales picked by trying a neighbourhood of each
// rounded value against the super-block scale, re-rounding the elements every time; and a
// least-squares refit of d (and dmin) given all integers, repeated while the error drops.
// Everything is deterministic float/double arithmetic with no dependence on threads or ISA.
//
//   const SymSpec q6{16, 16, Levels::uniform(-32, 31), -128, 127, 1};   // Q6_K
//   element_weights(x, w, 256);
//   SymFit fit = fit_symmetric(q6, x, w);   // fit.d, fit.sc[16], fit.q[256] = value + 32
#pragma once

#include <cstdint>

namespace minfer::quant_detail {

constexpr int kMaxSuperBlock = 256;  // elements of the largest super-block handled here
constexpr int kMaxSubBlocks = 16;
constexpr int kMaxLevels = 64;

// Reconstruction levels in units of the scale, ascending. `zero` is the level nearest 0,
// which every element of an all-zero block takes.
struct Levels {
  float v[kMaxLevels];
  float mid[kMaxLevels];  // mid[k] = (v[k] + v[k+1]) / 2, decision boundaries
  int n = 0;
  int zero = 0;
  bool consecutive = false;  // v[k] = v[0] + k, so nearest() is a rounding
  // Other tables: bins of width 1 / lut_scale from v[0], narrower than any gap between
  // boundaries; lut[b] is the level nearest the start of bin b, at most one below the answer.
  float lut_scale = 0.0f;
  int lut_n = 0;
  uint8_t lut[256];

  static Levels uniform(int lo, int hi);              // lo, lo+1, ..., hi
  static Levels table(const int8_t* values, int n);   // ascending values
  // Index of the level nearest y (ties to the upper level); a valid index even for NaN.
  int nearest(float y) const;
};

// Best scale s of one sub-block for x[i] ~= s * v[q[i]], q[i] the level nearest x[i] / s,
// over both signs of s. Exact within the scanned range: every assignment change of 1/s there
// is visited and the least-squares scale of each assignment evaluated. Returns 0 for x == 0.
float best_symmetric_scale(const float* x, const float* w, int n, const Levels& lv);

struct SymSpec {
  int n_sub;     // sub-blocks per super-block
  int sub_len;   // elements per sub-block
  Levels levels;
  int sc_min, sc_max;  // range of the integer sub-block scales ([1, 1] for a single scale)
  int radius;          // integer scales tried on either side of the rounded one
};
struct SymFit {
  float d;                    // exactly representable in fp16
  int sc[kMaxSubBlocks];      // in [sc_min, sc_max]
  uint8_t q[kMaxSuperBlock];  // level indices
};
SymFit fit_symmetric(const SymSpec& spec, const float* x, const float* w);

// A good (s, m), s >= 0, m >= 0, of one sub-block for x[i] ~= s * q[i] - m, q in [0, q_max]:
// the best of several starting spacings, each refined by alternating assignment and
// least-squares refits (not exhaustive: the error has many local minima in (s, m)).
void best_range(const float* x, const float* w, int n, int q_max, float* s, float* m);

struct AsymSpec {
  int n_sub;
  int sub_len;
  int q_max;   // elements take 0 .. q_max
  int sc_max;  // sub-block scales and mins take 0 .. sc_max
  int radius;  // integers tried on either side of the rounded scale and min
};
struct AsymFit {
  float d, dmin;  // exactly representable in fp16, both >= 0
  uint8_t sc[kMaxSubBlocks];
  uint8_t m[kMaxSubBlocks];
  uint8_t q[kMaxSuperBlock];
};
AsymFit fit_asymmetric(const AsymSpec& spec, const float* x, const float* w);

// Weights of the error the quantizers minimise, w[i] for element x[i]. Without an importance
// matrix every element counts the same: the target is the plain squared error of the tensor.
void element_weights(const float* x, float* w, int n);

// The float nearest f that fp16 represents (finite: clamped to +-65504).
float round_to_fp16(float f);

}  // namespace minfer::quant_detail
