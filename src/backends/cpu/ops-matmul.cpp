// Matrix multiplication of a weight (any supported type) with f32 activations:
//   W [n_in, n_out] (memory [n_out][n_in]), x [n_in, n_rows] f32 -> y [n_out, n_rows] f32
//   y[t][o] = dot(W row o, x row t)
// The activations are first converted to the weight type's activation type (kernels.h), then
// every (weight row, activation row) pair is one vec_dot. Work is split over weight rows, so
// each thread streams its own slice of the weight once and reuses it for every activation row.
#include <algorithm>

#include "backends/cpu/ops.h"
#include "core/status.h"

namespace minfer::cpu {

size_t op_work_size(const Node& n, const Node* src0, const Node* src1) {
  if (n.op != Op::kMatmul || !src0 || !src1) return 0;
  const DType act = activation_type(src0->type);
  if (act == DType::F32) return 0;
  return row_bytes(act, src1->ne[0]) * static_cast<size_t>(src1->n_rows());
}

void op_matmul(const OpContext& c, const OpArgs& a) {
  const Node& w = *a.src[0].node;
  const Node& x = *a.src[1].node;
  const int64_t n_in = w.ne[0], n_out = w.ne[1], n_rows = x.n_rows();
  const DType act = activation_type(w.type);
  const VecDotFn dot = c.k.vec_dot[type_slot(w.type)];
  const QuantizeFn quantize = c.k.quantize[type_slot(act)];
  MINFER_ASSERT(dot && quantize && x.ne[0] == n_in);

  const size_t x_row = row_bytes(act, n_in);
  const uint8_t* xq = static_cast<const uint8_t*>(a.src[1].data);
  if (act != DType::F32) {
    MINFER_ASSERT(c.work_size >= x_row * static_cast<size_t>(n_rows));
    const float* xf = a.src[1].f32();
    c.pool.parallel_for(n_rows, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) quantize(xf + r * n_in, c.work + static_cast<size_t>(r) * x_row, n_in);
    }, 4);
    xq = c.work;
  }

  const size_t w_row = row_bytes(w.type, n_in);
  const auto* wd = static_cast<const uint8_t*>(a.src[0].data);
  float* y = a.dst.f32();
  // At least ~64 K weight elements per task, so small matrices do not pay for a wake-up.
  const int64_t min_chunk = std::max<int64_t>(1, 65536 / std::max<int64_t>(1, n_in * n_rows));
  c.pool.parallel_for(n_out, [&](int64_t o0, int64_t o1) {
    for (int64_t o = o0; o < o1; ++o) {
      const uint8_t* wr = wd + static_cast<size_t>(o) * w_row;
      for (int64_t t = 0; t < n_rows; ++t) y[t * n_out + o] = dot(n_in, wr, xq + static_cast<size_t>(t) * x_row);
    }
  }, min_chunk);
}

}  // namespace minfer::cpu
