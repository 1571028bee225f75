// Matrix multiplication of a weight (any supported type) with f32 activations:
//   W [n_in, n_out] (memory [n_out][n_in]), x [n_in, n_rows] f32 -> y [n_out, n_rows] f32
//   y[t][o] = dot(W row o, x row t)
// The activations are first converted to the weight type's activation type (kernels.h). A
// weight repacked for a GEMM kernel (repack.h) goes through it 16 rows at a time for all
// activation rows (its last n_out % 16 rows through vec_dot); any other weight does one vec_dot
// per (weight row, activation row) pair. Both give the same bits (the kernels share the float
// order), so results never depend on the batch. F16 / BF16 are the exception: their GEMM takes
// the rounded activations as f32 rows (kernels.h) and sums in one chain per (row, token), so it
// agrees with the row kernels within float rounding, and is itself batch-independent. Work is
// split over weight rows, so each thread streams its own slice of the weight and reuses it for
// every activation row.
//
// Work buffer: [n_rows] activation rows of the activation type | F16 / BF16 with a repacked
// layout: (64-byte aligned) [n_rows][n_in] f32 of the same rounded values | Q8_0 GEMM:
// [n_rows][n_blocks] int32 block sums.
#include <algorithm>

#include "backends/cpu/ops.h"
#include "core/fp16.h"
#include "core/status.h"
#include "quant/blocks.h"

namespace minfer::cpu {

namespace {

// Q8_0 rows [n_rows][n_blocks] -> xsum [n_rows][n_blocks]: each block's sum of its 32 values.
void block_sums(const uint8_t* xq, size_t x_row, int64_t n_blocks, int64_t r0, int64_t r1, int32_t* xsum) {
  for (int64_t r = r0; r < r1; ++r) {
    const auto* b = reinterpret_cast<const BlockQ8_0*>(xq + static_cast<size_t>(r) * x_row);
    for (int64_t i = 0; i < n_blocks; ++i) {
      int32_t s = 0;
      for (int8_t q : b[i].qs) s += q;
      xsum[r * n_blocks + i] = s;
    }
  }
}

// Fewer activation rows than this stream the weights (ThreadPool::parallel_streams).
constexpr int64_t kStreamRows = 16;

// The F16 / BF16 GEMMs take the rounded activations as f32 rows (kernels.h).
bool float_gemm_type(DType weight) { return (weight == DType::F16 || weight == DType::BF16) && repack_supported(weight); }

// Where a second array starts in the work buffer: rounded up to 64 bytes, so it is as aligned
// as the buffer (Q8_0 rows are 34 bytes per block: their end may not even be 4-byte aligned,
// and an int32_t store there is undefined behaviour).
size_t align64(size_t n) { return (n + 63) / 64 * 64; }

// f32 rows [r0, r1) <- the rounded F16 / BF16 rows.
void widen_rows(DType act, const uint8_t* xq, size_t x_row, int64_t n_in, int64_t r0, int64_t r1, float* xf) {
  for (int64_t r = r0; r < r1; ++r) {
    const auto* h = reinterpret_cast<const uint16_t*>(xq + static_cast<size_t>(r) * x_row);
    float* o = xf + r * n_in;
    if (act == DType::F16)
      for (int64_t i = 0; i < n_in; ++i) o[i] = f16_lookup(h[i]);
    else
      for (int64_t i = 0; i < n_in; ++i) o[i] = bf16_to_fp32(h[i]);
  }
}

}  // namespace

size_t op_work_size(const Node& n, const Node* src0, const Node* src1) {
  if (n.op == Op::kMatmulId && src0 && src1) return matmul_id_work_size(n, *src0, *src1);
  if (n.op != Op::kMatmul || !src0 || !src1) return 0;
  const DType act = activation_type(src0->type);
  if (act == DType::F32) return 0;
  const auto n_rows = static_cast<size_t>(src1->n_rows());
  size_t bytes = row_bytes(act, src1->ne[0]) * n_rows;
  if (act == DType::Q8_0) bytes = align64(bytes) + n_rows * static_cast<size_t>(src1->ne[0] / 32) * sizeof(int32_t);  // xsum
  if (float_gemm_type(src0->type)) bytes = align64(bytes) + n_rows * static_cast<size_t>(src1->ne[0]) * sizeof(float);
  return bytes;
}

void op_matmul(const OpContext& c, const OpArgs& a) {
  const Node& w = *a.src[0].node;
  const Node& x = *a.src[1].node;
  const int64_t n_in = w.ne[0], n_out = w.ne[1], n_rows = x.n_rows();
  const DType act = activation_type(w.type);
  const VecDotFn dot = c.k.vec_dot[type_slot(w.type)];
  const QuantizeFn quantize = c.k.quantize[type_slot(act)];
  MINFER_ASSERT(dot && quantize && x.ne[0] == n_in);

  const GemmFn gemm = c.k.gemm[type_slot(w.type)];
  const RepackedWeight* rw = nullptr;
  if (gemm && c.repacked) {
    auto it = c.repacked->find(a.src[0].data);
    if (it != c.repacked->end() && it->second->n_in == n_in && it->second->n_out == n_out) rw = it->second.get();
  }

  // Activations to the activation type; for a GEMM over Q8_0 also each block's sum, in the
  // same pass over the rows.
  const size_t x_row = row_bytes(act, n_in);
  const uint8_t* xq = static_cast<const uint8_t*>(a.src[1].data);
  const int64_t n_blocks = rw ? rw->n_blocks : 0;
  int32_t* xsum = nullptr;
  float* xf32 = nullptr;  // F16 / BF16 GEMM: the rounded activations as f32 rows
  if (rw && float_gemm_type(w.type)) {
    const size_t at = align64(x_row * static_cast<size_t>(n_rows));
    MINFER_ASSERT(c.work_size >= at + static_cast<size_t>(n_rows * n_in) * sizeof(float));
    xf32 = reinterpret_cast<float*>(c.work + at);
  }
  if (act != DType::F32) {
    MINFER_ASSERT(c.work_size >= x_row * static_cast<size_t>(n_rows));
    if (rw && act == DType::Q8_0) {
      const size_t offset = align64(x_row * static_cast<size_t>(n_rows));
      xsum = reinterpret_cast<int32_t*>(c.work + offset);
      MINFER_ASSERT(c.work_size >= offset + static_cast<size_t>(n_rows * n_blocks) * 4);
    }
    const float* xf = a.src[1].f32();
    c.pool.parallel_for(n_rows, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) quantize(xf + r * n_in, c.work + static_cast<size_t>(r) * x_row, n_in);
      if (xsum) block_sums(c.work, x_row, n_blocks, r0, r1, xsum);
      if (xf32) widen_rows(act, c.work, x_row, n_in, r0, r1, xf32);
    }, 4);
    xq = c.work;
  }

  const size_t w_row = row_bytes(w.type, n_in);
  const auto* wd = static_cast<const uint8_t*>(a.src[0].data);
  float* y = a.dst.f32();

  if (rw) {
    const uint8_t* gx = xf32 ? reinterpret_cast<const uint8_t*>(xf32) : xq;
    const size_t gx_row = xf32 ? static_cast<size_t>(n_in) * sizeof(float) : x_row;
    GemmArgs g;
    g.w = rw->data;
    g.block_bytes = rw->block_bytes;
    g.n_blocks = n_blocks;
    g.x = gx;
    g.x_row = gx_row;
    g.xsum = xsum;
    g.n_tok = n_rows;
    g.y = y;
    g.y_stride = n_out;
    // ~64 K weight elements x rows per task at least.
    const int64_t min_groups = std::max<int64_t>(1, 65536 / std::max<int64_t>(1, n_in * n_rows * kRepackRows));
    // Token blocks of the kernel's size (~192 KiB of activations; AMX: 1 MiB), so a block
    // stays in L2 while the chunk's weight groups stream past it; whole 16-token tiles.
    const int64_t tb = std::max<int64_t>(16, c.k.gemm_x_block_bytes / static_cast<int64_t>(gx_row) / 16 * 16);
    auto run_groups = [&](int64_t g0, int64_t g1) {
      for (int64_t t0 = 0; t0 < n_rows; t0 += tb) {
        GemmArgs part = g;
        part.g0 = g0;
        part.g1 = g1;
        part.x = gx + static_cast<size_t>(t0) * gx_row;
        part.xsum = xsum ? xsum + t0 * n_blocks : nullptr;
        part.n_tok = std::min(tb, n_rows - t0);
        part.y = y + t0 * n_out;
        gemm(part);
      }
    };
    // A few rows (decode) are bound by the weight bytes: each thread streams one contiguous
    // range of groups (parallel_streams). Qwen3-0.6B Q4_0 tg64: 58-59 t/s vs 54 with 8 chunks
    // of a shared counter, and 55-56 with pieces of 4 groups claimed one at a time.
    if (n_rows < kStreamRows)
      c.pool.parallel_streams(rw->n_groups, std::max<int64_t>(1, 65536 / (n_in * kRepackRows)), run_groups);
    else
      c.pool.parallel_for(rw->n_groups, run_groups, min_groups);
    for (int64_t o = rw->n_groups * kRepackRows; o < n_out; ++o) {  // the rows past the last group
      const uint8_t* wr = wd + static_cast<size_t>(o) * w_row;
      for (int64_t t = 0; t < n_rows; ++t) y[t * n_out + o] = dot(n_in, wr, xq + static_cast<size_t>(t) * x_row);
    }
    return;
  }
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
