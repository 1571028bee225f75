// Row-wise and element-wise f32 ops. The fused forms (rms_norm_mul, swiglu) evaluate exactly
// the expressions of the unfused pair, through the same helpers, so fusion never changes a bit.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backends/cpu/ops.h"
#include "core/fp16.h"
#include "core/status.h"

namespace minfer::cpu {
namespace {

// A row's 1 / sqrt(mean(x^2) + eps): the f32 squares summed in double in element order (as
// llama.cpp does, so the scale agrees with it to the last bit and long rows lose nothing to
// summation order); rms_scales below computes it for several rows at once.
constexpr int64_t kNormBatch = 32;  // rows whose scales a task computes before writing them

// rms_scale of R rows at once (row r at x + r * stride): each row's own sequential sum, the R
// chains interleaved so that their additions overlap instead of waiting on one another (one
// chain is bound by the latency of a double add: ~2 us for a row of 1024).
template <int R>
void rms_scales(const float* x, int64_t stride, int64_t n, float eps, float* s) {
  double sum[R];
  for (int r = 0; r < R; ++r) sum[r] = 0.0;
  for (int64_t i = 0; i < n; ++i)
    for (int r = 0; r < R; ++r) sum[r] += static_cast<double>(x[r * stride + i] * x[r * stride + i]);
  for (int r = 0; r < R; ++r) {
    const float mean = static_cast<float>(sum[r] / static_cast<double>(n));
    s[r] = 1.0f / std::sqrt(mean + eps);
  }
}

// s[r - r0] = rms_scale of row r of x ([rows][n]) for r in [r0, r1): 8, 4, 2 or 1 at a time.
void rms_scales(const float* x, int64_t n, int64_t r0, int64_t r1, float eps, float* s) {
  for (int64_t r = r0; r < r1;) {
    const float* xr = x + r * n;
    float* sr = s + (r - r0);
    if (r1 - r >= 8) {
      rms_scales<8>(xr, n, n, eps, sr);
      r += 8;
    } else if (r1 - r >= 4) {
      rms_scales<4>(xr, n, n, eps, sr);
      r += 4;
    } else if (r1 - r >= 2) {
      rms_scales<2>(xr, n, n, eps, sr);
      r += 2;
    } else {
      rms_scales<1>(xr, n, n, eps, sr);
      r += 1;
    }
  }
}

// row(r, scale of row r) for r in [r0, r1) of x ([rows][n]), the scales kNormBatch rows at a time.
template <class Row>
void scaled_rows(const float* x, int64_t n, int64_t r0, int64_t r1, float eps, Row&& row) {
  for (int64_t b0 = r0; b0 < r1; b0 += kNormBatch) {
    const int64_t b1 = std::min(r1, b0 + kNormBatch);
    float s[kNormBatch];  // [b1 - b0] the rows' scales
    rms_scales(x, n, b0, b1, eps, s);
    for (int64_t r = b0; r < b1; ++r) row(r, s[r - b0]);
  }
}

// Rows per task: enough work per chunk that waking a thread pays.
int64_t min_rows(int64_t row_len) { return std::max<int64_t>(1, 16384 / std::max<int64_t>(1, row_len)); }

// src1 row for dst row r: the same row, or row 0 when src1 is a single broadcast row.
inline const float* bcast_row(const TensorArg& b, int64_t r, int64_t ne0) {
  return b.f32() + (b.node->n_rows() == 1 ? 0 : r * ne0);
}

// GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) x (1 + 0.044715 x^2))). Evaluated as
// llama.cpp's CPU backend evaluates it (docs/design-cpu-numerics.md): x rounded to f16, the
// result looked up in a table of the f32 formula rounded to f16; 0 below -10, x above 10.
float gelu_f32(float x) {
  constexpr float kA = 0.044715f, kSqrt2OverPi = 0.79788456080286535587989211986876f;
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + kA * x * x)));
}

const uint16_t* gelu_table() {  // [65536] f16 input bits -> f16 gelu
  static const std::vector<uint16_t> t = [] {
    std::vector<uint16_t> v(65536);
    for (uint32_t i = 0; i < 65536; ++i) v[i] = fp32_to_fp16(gelu_f32(fp16_to_fp32(static_cast<uint16_t>(i))));
    return v;
  }();
  return t.data();
}

inline float gelu(const uint16_t* table, float x) {
  if (x <= -10.0f) return 0.0f;
  if (x >= 10.0f) return x;
  return fp16_to_fp32(table[fp32_to_fp16(x)]);
}

}  // namespace

void op_rms_norm(const OpContext& c, const OpArgs& a) {
  const int64_t ne0 = a.dst.node->ne[0];
  const float eps = a.dst.node->params.eps;
  const float* x = a.src[0].f32();
  float* y = a.dst.f32();
  c.pool.parallel_for(a.dst.node->n_rows(), [&](int64_t r0, int64_t r1) {
    scaled_rows(x, ne0, r0, r1, eps, [&](int64_t r, float s) {
      const float* xr = x + r * ne0;
      float* yr = y + r * ne0;
      for (int64_t i = 0; i < ne0; ++i) yr[i] = xr[i] * s;
    });
  }, min_rows(ne0));
}

void op_rms_norm_mul(const OpContext& c, const OpArgs& a) {
  const int64_t ne0 = a.dst.node->ne[0];
  const float eps = a.dst.node->params.eps;
  const float* x = a.src[0].f32();
  const float* w = a.src[1].f32();
  float* y = a.dst.f32();
  c.pool.parallel_for(a.dst.node->n_rows(), [&](int64_t r0, int64_t r1) {
    scaled_rows(x, ne0, r0, r1, eps, [&](int64_t r, float s) {
      const float* xr = x + r * ne0;
      float* yr = y + r * ne0;
      for (int64_t i = 0; i < ne0; ++i) {
        const float normed = xr[i] * s;  // = rms_norm's output
        yr[i] = normed * w[i];           // = mul's output
      }
    });
  }, min_rows(ne0));
}

void op_add(const OpContext& c, const OpArgs& a) {
  const int64_t ne0 = a.dst.node->ne[0];
  const float* x = a.src[0].f32();
  float* y = a.dst.f32();
  c.pool.parallel_for(a.dst.node->n_rows(), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* b = bcast_row(a.src[1], r, ne0);
      for (int64_t i = 0; i < ne0; ++i) y[r * ne0 + i] = x[r * ne0 + i] + b[i];
    }
  }, min_rows(ne0));
}

void op_mul(const OpContext& c, const OpArgs& a) {
  const int64_t ne0 = a.dst.node->ne[0];
  const float* x = a.src[0].f32();
  float* y = a.dst.f32();
  c.pool.parallel_for(a.dst.node->n_rows(), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* b = bcast_row(a.src[1], r, ne0);
      for (int64_t i = 0; i < ne0; ++i) y[r * ne0 + i] = x[r * ne0 + i] * b[i];
    }
  }, min_rows(ne0));
}

// silu and swiglu go row by row: the kernel's exp depends on an element's place in its row
// (kernels.h, SiluRowFn).
void op_silu(const OpContext& c, const OpArgs& a) {
  const int64_t ne0 = a.dst.node->ne[0];
  const float* x = a.src[0].f32();
  float* y = a.dst.f32();
  c.pool.parallel_for(a.dst.node->n_rows(), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) c.k.silu_row(ne0, y + r * ne0, x + r * ne0);
  }, min_rows(ne0));
}

void swiglu_row(const CpuKernels& k, int64_t n, float* y, const float* g, const float* u) {
  k.silu_row(n, y, g);                                 // = silu's output
  for (int64_t i = 0; i < n; ++i) y[i] = y[i] * u[i];  // = mul's output
}

void op_swiglu(const OpContext& c, const OpArgs& a) {
  const int64_t ne0 = a.dst.node->ne[0];
  const float* g = a.src[0].f32();
  const float* u = a.src[1].f32();
  float* y = a.dst.f32();
  c.pool.parallel_for(a.dst.node->n_rows(), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) swiglu_row(c.k, ne0, y + r * ne0, g + r * ne0, u + r * ne0);
  }, min_rows(ne0));
}

}  // namespace minfer::cpu

namespace minfer::cpu {

void op_gelu(const OpContext& c, const OpArgs& a) {
  const int64_t n = a.dst.node->n_elements();
  const float* x = a.src[0].f32();
  float* y = a.dst.f32();
  const uint16_t* t = gelu_table();
  c.pool.parallel_for(n, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) y[i] = gelu(t, x[i]);
  }, 16384);
}

void op_geglu(const OpContext& c, const OpArgs& a) {
  const int64_t n = a.dst.node->n_elements();
  const float* g = a.src[0].f32();
  const float* u = a.src[1].f32();
  float* y = a.dst.f32();
  const uint16_t* t = gelu_table();
  c.pool.parallel_for(n, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) y[i] = gelu(t, g[i]) * u[i];  // = gelu's output, then mul's
  }, 16384);
}

void op_scale(const OpContext& c, const OpArgs& a) {
  const int64_t n = a.dst.node->n_elements();
  const float s = a.dst.node->params.scale;
  const float* x = a.src[0].f32();
  float* y = a.dst.f32();
  c.pool.parallel_for(n, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) y[i] = x[i] * s;
  }, 16384);
}

// Runs of n = params.block values times the orthonormal Walsh-Hadamard matrix: each value
// scaled by 1 / sqrtf(n), then the fast transform's log2(n) butterfly passes (u + v, u - v) from
// pairs 1 apart to pairs n / 2 apart. Every step is one rounding in a fixed order, so the result
// is the same on every ISA (llama.cpp's rotation of a quantized cache rounds the same way).
void op_hadamard(const OpContext& c, const OpArgs& a) {
  const int64_t n = a.dst.node->params.block;
  const int64_t runs = a.dst.node->n_elements() / n;
  const float s = 1.0f / std::sqrt(static_cast<float>(n));
  const float* x = a.src[0].f32();
  float* y = a.dst.f32();
  c.pool.parallel_for(runs, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      float* yr = y + r * n;  // [n]
      const float* xr = x + r * n;
      for (int64_t i = 0; i < n; ++i) yr[i] = xr[i] * s;
      for (int64_t len = 1; len < n; len *= 2)
        for (int64_t i = 0; i < n; i += 2 * len)
          for (int64_t j = i; j < i + len; ++j) {
            const float u = yr[j], v = yr[j + len];
            yr[j] = u + v;
            yr[j + len] = u - v;
          }
    }
  }, 64);
}

// c * tanh(x * (1 / c)), the order of llama.cpp's scale, tanh, scale.
void op_softcap(const OpContext& c, const OpArgs& a) {
  const int64_t n = a.dst.node->n_elements();
  const float cap = a.dst.node->params.scale, inv = 1.0f / cap;
  const float* x = a.src[0].f32();
  float* y = a.dst.f32();
  c.pool.parallel_for(n, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) y[i] = std::tanh(x[i] * inv) * cap;
  }, 16384);
}

}  // namespace minfer::cpu
