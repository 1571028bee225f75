// Mixture-of-experts ops (graph/ops.h): expert selection, routing weights, the per-expert
// matmul and the weighted sum.
//
//   top_k        x [n, T] f32 -> I32 [k, T]: indices of the k largest, largest first (ties: the
//                lower index first; NaN ranks below everything)
//   moe_weights  logits [n_expert, T], ids [k, T] -> [k, T]: p = softmax(logits row) (max
//                subtracted, sum in double), p[ids]; with moe_norm divided by max(sum, 2^-14)
//   matmul_id    W [n_in, n_out, n_expert], x [n_in, 1 or k, T], ids [k, T] -> [n_out, k, T]
//   moe_sum      e [n, k, T], w [k, T] -> [n, T]: e_0 w_0 + e_1 w_1 + ... added in order
//
// matmul_id groups the slots routed to each expert (a counting sort of ids), quantizes each
// distinct activation row once, gathers each expert's rows next to each other, and walks the
// experts that have slots: every row of an expert's weight is read once for all of its slots
// (prefill reads each expert once per batch; decode touches only the selected experts). An
// expert whose weight the backend repacked (CpuBackend::prepare repacks each expert's slice
// like a 2-D weight) goes through the type's GEMM 16 rows at a time, the rest (and the rows
// past the last group of 16) through vec_dot: the same bits either way, as in op_matmul.
// Results land in expert order and are then scattered to their slots.
//
// Work buffer (matmul_id): [n_x_rows] activation rows of the activation type | [n_expert + 1]
// int32 slot offsets | [k T] int32 slots sorted by expert | [k T] gathered activation rows |
// Q8_0 activations: [k T][n_in / 32] int32 block sums | [k T][n_out] f32 results in expert
// order (each part 64-byte aligned).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "backends/cpu/ops.h"
#include "core/status.h"
#include "quant/blocks.h"

namespace minfer::cpu {

namespace {
size_t align64(size_t n) { return (n + 63) / 64 * 64; }
}  // namespace

namespace {

// The parts of the work buffer (offsets in bytes).
struct MatmulIdWork {
  size_t rows = 0, offsets = 0, slots = 0, gathered = 0, xsum = 0, results = 0, total = 0;
};

MatmulIdWork matmul_id_layout(const Node& n, const Node& w, const Node& x) {
  const DType act = activation_type(w.type);
  const auto n_rows = static_cast<size_t>(x.n_rows());
  const auto n_expert = static_cast<size_t>(w.ne[2]);
  const auto n_slots = static_cast<size_t>(n.ne[1] * n.ne[2]);
  const size_t x_row = row_bytes(act, x.ne[0]);
  MatmulIdWork l;
  l.offsets = act == DType::F32 ? 0 : align64(x_row * n_rows);
  l.slots = l.offsets + align64((n_expert + 1) * sizeof(int32_t));
  l.gathered = l.slots + align64(n_slots * sizeof(int32_t));
  l.xsum = l.gathered + align64(x_row * n_slots);
  l.results = l.xsum + (act == DType::Q8_0 ? align64(n_slots * static_cast<size_t>(x.ne[0] / 32) * sizeof(int32_t)) : 0);
  l.total = l.results + n_slots * static_cast<size_t>(w.ne[1]) * sizeof(float);
  return l;
}

}  // namespace

size_t matmul_id_work_size(const Node& n, const Node& w, const Node& x) { return matmul_id_layout(n, w, x).total; }

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
      auto val = [&](int32_t i) { return std::isnan(row[i]) ? -INFINITY : row[i]; };  // NaN ranks last
      std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int32_t i, int32_t j) {
        return val(i) > val(j) || (val(i) == val(j) && i < j);
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
  const int64_t k = out.ne[1], n_x = x.ne[1], n_slots = k * out.ne[2];
  const DType act = activation_type(w.type);
  const VecDotFn dot = c.k.vec_dot[type_slot(w.type)];
  const QuantizeFn quantize = c.k.quantize[type_slot(act)];
  const MatmulIdWork lay = matmul_id_layout(out, w, x);
  MINFER_ASSERT(dot && quantize && x.ne[0] == n_in && c.work_size >= lay.total);
  const int32_t* ids = a.src[2].i32();

  // Activation rows in the activation type.
  const size_t x_row = row_bytes(act, n_in);
  const int64_t n_x_rows = x.n_rows();
  const uint8_t* xq = static_cast<const uint8_t*>(a.src[1].data);
  if (act != DType::F32) {
    const float* xf = a.src[1].f32();
    c.pool.parallel_for(n_x_rows, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) quantize(xf + r * n_in, c.work + static_cast<size_t>(r) * x_row, n_in);
    }, 4);
    xq = c.work;
  }
  // Slots grouped by expert: offsets [n_expert + 1], slots [n_slots] (slot = t * k + j).
  auto* offsets = reinterpret_cast<int32_t*>(c.work + lay.offsets);
  auto* slots = reinterpret_cast<int32_t*>(c.work + lay.slots);
  std::fill(offsets, offsets + n_expert + 1, 0);
  for (int64_t s = 0; s < n_slots; ++s) {
    MINFER_ASSERT(ids[s] >= 0 && ids[s] < n_expert);
    ++offsets[ids[s] + 1];
  }
  for (int64_t e = 0; e < n_expert; ++e) offsets[e + 1] += offsets[e];
  std::vector<int32_t> fill(offsets, offsets + n_expert);
  for (int64_t s = 0; s < n_slots; ++s) slots[fill[static_cast<size_t>(ids[s])]++] = static_cast<int32_t>(s);

  const size_t w_row = row_bytes(w.type, n_in);
  const auto* wd = static_cast<const uint8_t*>(a.src[0].data);
  auto expert_weight = [&](int64_t e) { return wd + static_cast<size_t>(e) * static_cast<size_t>(n_out) * w_row; };
  auto x_of = [&](int64_t s) {  // the activation row of slot s
    const int64_t t = s / k, j = s % k;
    return xq + static_cast<size_t>(t * n_x + (n_x == 1 ? 0 : j)) * x_row;
  };

  // Per active expert: its repacked weight (if any) and its share of the work, in items of 16
  // weight rows (the rows past the last group: one more item of vec_dots).
  const GemmFn gemm = c.k.gemm[type_slot(w.type)];
  const bool float_act = act == DType::F16 || act == DType::BF16 || act == DType::F32;  // their GEMMs take f32 rows
  struct Active {
    int32_t e;
    const RepackedWeight* rw;
    int64_t first_item, n_items;
  };
  std::vector<Active> active;
  int64_t n_items = 0;
  for (int64_t e = 0; e < n_expert; ++e) {
    if (offsets[e + 1] == offsets[e]) continue;
    const RepackedWeight* rw = nullptr;
    if (gemm && c.repacked && !float_act) {
      auto it = c.repacked->find(expert_weight(e));
      if (it != c.repacked->end() && it->second->n_in == n_in && it->second->n_out == n_out) rw = it->second.get();
    }
    const int64_t groups = rw ? rw->n_groups : 0;
    const int64_t tail_rows = n_out - groups * kRepackRows;
    const int64_t items = groups + (tail_rows > 0 ? (tail_rows + kRepackRows - 1) / kRepackRows : 0);
    active.push_back({static_cast<int32_t>(e), rw, n_items, items});
    n_items += items;
  }
  const bool any_gemm = std::any_of(active.begin(), active.end(), [](const Active& v) { return v.rw != nullptr; });

  // Gathered activation rows (and Q8_0 block sums) in expert order, for the GEMMs.
  uint8_t* gathered = c.work + lay.gathered;
  auto* xsum = reinterpret_cast<int32_t*>(c.work + lay.xsum);
  const int64_t n_blocks32 = n_in / 32;
  if (any_gemm) {
    c.pool.parallel_for(n_slots, [&](int64_t p0, int64_t p1) {
      for (int64_t p = p0; p < p1; ++p) {
        std::memcpy(gathered + static_cast<size_t>(p) * x_row, x_of(slots[p]), x_row);
        if (act == DType::Q8_0) {
          const auto* b = reinterpret_cast<const BlockQ8_0*>(gathered + static_cast<size_t>(p) * x_row);
          for (int64_t i = 0; i < n_blocks32; ++i) {
            int32_t sum = 0;
            for (int8_t q : b[i].qs) sum += q;
            xsum[p * n_blocks32 + i] = sum;
          }
        }
      }
    }, 16);
  }

  float* res = reinterpret_cast<float*>(c.work + lay.results);  // [n_slots][n_out] in expert order
  const int64_t per_expert = std::max<int64_t>(1, n_slots / std::max<int64_t>(1, static_cast<int64_t>(active.size())));
  const int64_t min_chunk = std::max<int64_t>(1, 65536 / std::max<int64_t>(1, n_in * kRepackRows * per_expert));
  c.pool.parallel_for(n_items, [&](int64_t i0, int64_t i1) {
    // The active expert holding item i0 (items are in expert order).
    size_t ai = static_cast<size_t>(std::upper_bound(active.begin(), active.end(), i0, [](int64_t v, const Active& act_e) {
                                      return v < act_e.first_item;
                                    }) - active.begin()) - 1;
    for (int64_t item = i0; item < i1;) {
      while (item >= active[ai].first_item + active[ai].n_items) ++ai;
      const Active& ax = active[ai];
      const int64_t end = std::min(i1, ax.first_item + ax.n_items);
      const int32_t p0 = offsets[ax.e], p1 = offsets[ax.e + 1];
      const int64_t groups = ax.rw ? ax.rw->n_groups : 0;
      const int64_t g0 = item - ax.first_item, g1 = end - ax.first_item;
      if (ax.rw && g0 < groups) {
        GemmArgs g;
        g.w = ax.rw->data;
        g.block_bytes = ax.rw->block_bytes;
        g.n_blocks = ax.rw->n_blocks;
        g.g0 = g0;
        g.g1 = std::min(g1, groups);
        g.x = gathered + static_cast<size_t>(p0) * x_row;
        g.x_row = x_row;
        g.xsum = act == DType::Q8_0 ? xsum + static_cast<int64_t>(p0) * n_blocks32 : nullptr;
        g.n_tok = p1 - p0;
        g.y = res + static_cast<int64_t>(p0) * n_out;
        g.y_stride = n_out;
        gemm(g);
      }
      // Rows without a GEMM: [max(g0, groups) * 16 + ..., up to g1's rows), by vec_dot.
      const int64_t o_begin = groups * kRepackRows + std::max<int64_t>(0, g0 - groups) * kRepackRows;
      const int64_t o_end = std::min(n_out, groups * kRepackRows + std::max<int64_t>(0, g1 - groups) * kRepackRows);
      const uint8_t* we = expert_weight(ax.e);
      for (int64_t o = o_begin; o < o_end; ++o) {
        const uint8_t* wr = we + static_cast<size_t>(o) * w_row;
        for (int32_t p = p0; p < p1; ++p) res[static_cast<int64_t>(p) * n_out + o] = dot(n_in, wr, x_of(slots[p]));
      }
      item = end;
    }
  }, min_chunk);

  // Scatter to the slots.
  float* y = a.dst.f32();
  c.pool.parallel_for(n_slots, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p)
      std::memcpy(y + static_cast<int64_t>(slots[p]) * n_out, res + p * n_out, static_cast<size_t>(n_out) * sizeof(float));
  }, 16);
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
