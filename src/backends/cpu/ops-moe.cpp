// Mixture-of-experts ops (graph/ops.h): expert selection, routing weights, the per-expert
// matmul and the weighted sum.
//
//   top_k        x [n, T] f32 -> I32 [k, T]: indices of the k largest, largest first (ties: the
//                lower index first)
//   moe_weights  logits [n_expert, T], ids [k, T] -> [k, T]: p = softmax(logits row) (max
//                subtracted, sum in double), p[ids]; with moe_norm divided by max(sum, 2^-14)
//   matmul_id    W [n_in, n_out, n_expert], x [n_in, 1 or k, T], ids [k, T] -> [n_out, k, T]
//   moe_sum      e [n, k, T], w [k, T] -> [n, T]: e_0 w_0 + e_1 w_1 + ... added in order
//
// matmul_id groups the slots routed to each expert (a counting sort of ids), quantizes each
// distinct activation row once, and walks the experts that have slots: every row of an expert's
// weight is read once and dotted with all of its slots' rows (prefill reads each expert once per
// batch; decode touches only the selected experts). The dot products are the weight type's
// vec_dot, the same bits as op_matmul's row path.
//
// Work buffer (matmul_id): [n_x_rows] activation rows of the activation type | 64-aligned
// [n_expert + 1] int32 slot offsets | [k T] int32 slots sorted by expert.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "backends/cpu/ops.h"
#include "core/status.h"

namespace minfer::cpu {

namespace {
size_t align64(size_t n) { return (n + 63) / 64 * 64; }
}  // namespace

size_t matmul_id_work_size(const Node& n, const Node& w, const Node& x) {
  const DType act = activation_type(w.type);
  const auto n_rows = static_cast<size_t>(x.n_rows());
  const size_t rows = act == DType::F32 ? 0 : align64(row_bytes(act, x.ne[0]) * n_rows);
  const auto n_expert = static_cast<size_t>(w.ne[2]);
  const auto n_slots = static_cast<size_t>(n.ne[1] * n.ne[2]);
  return rows + align64((n_expert + 1) * sizeof(int32_t)) + n_slots * sizeof(int32_t);
}

void op_top_k(const OpContext& c, const OpArgs& a) {
  const Node& x = *a.src[0].node;
  const int64_t n = x.ne[0], k = a.dst.node->ne[0];
  const float* xs = a.src[0].f32();
  auto* out = static_cast<int32_t*>(a.dst.data);
  c.pool.parallel_for(x.n_rows(), [&](int64_t r0, int64_t r1) {
    std::vector<int32_t> idx(static_cast<size_t>(n));
    for (int64_t r = r0; r < r1; ++r) {
      const float* row = xs + r * n;
      std::iota(idx.begin(), idx.end(), 0);
      std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int32_t i, int32_t j) {
        return row[i] > row[j] || (row[i] == row[j] && i < j);
      });
      std::copy(idx.begin(), idx.begin() + k, out + r * k);
    }
  }, 16);
}

void op_moe_weights(const OpContext& c, const OpArgs& a) {
  const Node& l = *a.src[0].node;
  const int64_t n = l.ne[0], k = a.dst.node->ne[0];
  const float* logits = a.src[0].f32();
  const int32_t* ids = a.src[1].i32();
  float* y = a.dst.f32();
  const bool norm = a.dst.node->params.moe_norm;
  c.pool.parallel_for(l.n_rows(), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* row = logits + r * n;
      const float mx = *std::max_element(row, row + n);
      double sum = 0.0;
      for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(std::exp(row[i] - mx));
      const float inv = static_cast<float>(1.0 / sum);
      float sel = 0.0f;
      for (int64_t j = 0; j < k; ++j) {
        const int32_t e = ids[r * k + j];
        MINFER_ASSERT(e >= 0 && e < n);
        y[r * k + j] = std::exp(row[e] - mx) * inv;
        sel += y[r * k + j];
      }
      if (norm) {
        const float d = std::max(sel, 6.103515625e-5f);
        for (int64_t j = 0; j < k; ++j) y[r * k + j] /= d;
      }
    }
  }, 16);
}

void op_matmul_id(const OpContext& c, const OpArgs& a) {
  const Node& w = *a.src[0].node;
  const Node& x = *a.src[1].node;
  const Node& out = *a.dst.node;
  const int64_t n_in = w.ne[0], n_out = w.ne[1], n_expert = w.ne[2];
  const int64_t k = out.ne[1], n_tok = out.ne[2], n_x = x.ne[1], n_slots = k * n_tok;
  const DType act = activation_type(w.type);
  const VecDotFn dot = c.k.vec_dot[type_slot(w.type)];
  const QuantizeFn quantize = c.k.quantize[type_slot(act)];
  MINFER_ASSERT(dot && quantize && x.ne[0] == n_in && c.work_size >= matmul_id_work_size(out, w, x));
  const int32_t* ids = a.src[2].i32();

  // Activation rows in the activation type.
  const size_t x_row = row_bytes(act, n_in);
  const int64_t n_x_rows = x.n_rows();
  const uint8_t* xq = static_cast<const uint8_t*>(a.src[1].data);
  size_t at = 0;
  if (act != DType::F32) {
    const float* xf = a.src[1].f32();
    c.pool.parallel_for(n_x_rows, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) quantize(xf + r * n_in, c.work + static_cast<size_t>(r) * x_row, n_in);
    }, 4);
    xq = c.work;
    at = align64(x_row * static_cast<size_t>(n_x_rows));
  }
  // Slots grouped by expert: offsets [n_expert + 1], slots [n_slots] (slot = t * k + j).
  auto* offsets = reinterpret_cast<int32_t*>(c.work + at);
  auto* slots = reinterpret_cast<int32_t*>(c.work + at + align64(static_cast<size_t>(n_expert + 1) * sizeof(int32_t)));
  std::fill(offsets, offsets + n_expert + 1, 0);
  for (int64_t s = 0; s < n_slots; ++s) {
    MINFER_ASSERT(ids[s] >= 0 && ids[s] < n_expert);
    ++offsets[ids[s] + 1];
  }
  for (int64_t e = 0; e < n_expert; ++e) offsets[e + 1] += offsets[e];
  std::vector<int32_t> fill(offsets, offsets + n_expert);
  for (int64_t s = 0; s < n_slots; ++s) slots[fill[static_cast<size_t>(ids[s])]++] = static_cast<int32_t>(s);
  std::vector<int32_t> active;  // experts with at least one slot
  for (int64_t e = 0; e < n_expert; ++e)
    if (offsets[e + 1] > offsets[e]) active.push_back(static_cast<int32_t>(e));

  const size_t w_row = row_bytes(w.type, n_in);
  const auto* wd = static_cast<const uint8_t*>(a.src[0].data);
  float* y = a.dst.f32();
  const int64_t n_items = static_cast<int64_t>(active.size()) * n_out;  // (active expert, weight row)
  const int64_t per_row = std::max<int64_t>(1, n_slots / std::max<int64_t>(1, static_cast<int64_t>(active.size())));
  const int64_t min_chunk = std::max<int64_t>(1, 65536 / std::max<int64_t>(1, n_in * per_row));
  c.pool.parallel_for(n_items, [&](int64_t i0, int64_t i1) {
    for (int64_t item = i0; item < i1; ++item) {
      const int32_t e = active[static_cast<size_t>(item / n_out)];
      const int64_t o = item % n_out;
      const uint8_t* wr = wd + (static_cast<size_t>(e) * static_cast<size_t>(n_out) + static_cast<size_t>(o)) * w_row;
      for (int32_t p = offsets[e]; p < offsets[e + 1]; ++p) {
        const int64_t s = slots[p], t = s / k, j = s % k;
        const int64_t xr = t * n_x + (n_x == 1 ? 0 : j);
        y[s * n_out + o] = dot(n_in, wr, xq + static_cast<size_t>(xr) * x_row);
      }
    }
  }, min_chunk);
}

void op_moe_sum(const OpContext& c, const OpArgs& a) {
  const Node& e = *a.src[0].node;
  const int64_t n = e.ne[0], k = e.ne[1], n_tok = e.ne[2];
  const float* ex = a.src[0].f32();
  const float* wt = a.src[1].f32();
  float* y = a.dst.f32();
  c.pool.parallel_for(n_tok, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      float* yr = y + t * n;
      const float* et = ex + t * k * n;
      for (int64_t i = 0; i < n; ++i) yr[i] = et[i] * wt[t * k];
      for (int64_t j = 1; j < k; ++j) {
        const float wj = wt[t * k + j];
        for (int64_t i = 0; i < n; ++i) yr[i] = yr[i] + et[j * n + i] * wj;
      }
    }
  }, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, n * k)));
}

}  // namespace minfer::cpu
