// Matrix multiplication of a weight (any supported type) with f32 activations:
//   W [n_in, n_out] (memory [n_out][n_in]), x [n_in, n_rows] f32 -> y [n_out, n_rows] f32
//   y[t][o] = dot(W row o, x row t)
// and the fused FFN form matmul_swiglu(Wg, Wu, x): y[t][o] = silu(Wg x)[t][o] * (Wu x)[t][o],
// the same arithmetic as matmul, matmul, swiglu (same bits), with one conversion of x, one
// parallel region, and the gate and up values of a few row groups at a time in per-thread
// buffers instead of two [n_out, n_rows] tensors written out and read back.
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
// [n_rows][n_blocks] int32 block sums, then (64-byte aligned) the block scales as f32 in token
// tiles (GemmArgs::xd_tiles). It outlives the op: the next matmul of the same tensor in the same
// form reads it as it is (WorkActivations, ops.h).
#include <algorithm>
#include <span>
#include <vector>

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

// Rows [r0, r1) of the Q8_0 activations' block scales as f32, in the GEMM's token tiles
// (GemmArgs::xd_tiles): xd[(r / 16) * n_blocks * 16 + b * 16 + r % 16]; rows past the last whole
// tile have none (the kernels' token tails read the blocks).
void block_scales(const uint8_t* xq, size_t x_row, int64_t n_blocks, int64_t n_rows, int64_t r0, int64_t r1, float* xd) {
  constexpr int64_t T = kGemmScaleTokens;
  for (int64_t r = r0; r < std::min(r1, n_rows / T * T); ++r) {
    const auto* b = reinterpret_cast<const BlockQ8_0*>(xq + static_cast<size_t>(r) * x_row);
    float* d = xd + (r / T) * n_blocks * T + r % T;
    for (int64_t i = 0; i < n_blocks; ++i) d[i * T] = f16_lookup(b[i].d);
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

// One weight as the matmul sees it: the GGUF rows, and the repacked copy when there is one.
struct Weight {
  const uint8_t* data = nullptr;
  DType type = DType::F32;
  int64_t n_in = 0, n_out = 0;
  size_t row = 0;                      // bytes per GGUF row
  const RepackedWeight* rw = nullptr;  // null: the row kernels
};

Weight weight_of(const OpContext& c, const TensorArg& t) {
  const Node& n = *t.node;
  Weight w{static_cast<const uint8_t*>(t.data), n.type, n.ne[0], n.ne[1], row_bytes(n.type, n.ne[0]), nullptr};
  if (c.k.gemm[type_slot(n.type)] && c.repacked) {
    auto it = c.repacked->find(t.data);
    if (it != c.repacked->end() && it->second->n_in == w.n_in && it->second->n_out == w.n_out) w.rw = it->second.get();
  }
  return w;
}

// The activations, converted once (into the work buffer) for the weights of one type.
struct Activations {
  int64_t n_rows = 0, n_in = 0;
  const uint8_t* xq = nullptr;  // [n_rows] rows of the activation type
  size_t x_row = 0;
  const int32_t* xsum = nullptr;  // Q8_0 GEMM: [n_rows][n_blocks] block sums
  const float* xd_tiles = nullptr;  // Q8_0 GEMM: block scales in token tiles (GemmArgs::xd_tiles)
  const uint8_t* gx = nullptr;    // what a GEMM reads: xq, or (F16 / BF16) the rounded f32 rows
  size_t gx_row = 0;
};

Activations convert(const OpContext& c, const Weight& w, const TensorArg& xa) {
  const Node& x = *xa.node;
  Activations r;
  r.n_rows = x.n_rows();
  r.n_in = w.n_in;
  const DType act = activation_type(w.type);
  MINFER_ASSERT(c.k.vec_dot[type_slot(w.type)] && c.k.quantize[type_slot(act)] && x.ne[0] == w.n_in);
  r.x_row = row_bytes(act, w.n_in);
  r.xq = static_cast<const uint8_t*>(xa.data);
  const int64_t n_rows = r.n_rows, n_in = r.n_in, n_blocks = w.rw ? w.rw->n_blocks : 0;
  // Already in the work buffer in this form (the previous matmul of the same tensor)?
  const bool gemm = w.rw && act == DType::Q8_0, f32_rows = w.rw && float_gemm_type(w.type);
  WorkActivations* held = c.work_acts;
  const bool reuse = held && held->valid && held->src == &x && held->data == xa.data && held->act == act &&
                     held->gemm == gemm && held->f32_rows == f32_rows && act != DType::F32;
  if (reuse) ++held->reuses;
  if (held && !reuse && act != DType::F32) {
    held->valid = true;
    held->src = &x;
    held->data = xa.data;
    held->act = act;
    held->gemm = gemm;
    held->f32_rows = f32_rows;
  }
  int32_t* xsum = nullptr;
  float* xd = nullptr;    // Q8_0 GEMM: the block scales in token tiles
  float* xf32 = nullptr;  // F16 / BF16 GEMM: the rounded activations as f32 rows
  if (w.rw && float_gemm_type(w.type)) {
    const size_t at = align64(r.x_row * static_cast<size_t>(n_rows));
    MINFER_ASSERT(c.work_size >= at + static_cast<size_t>(n_rows * n_in) * sizeof(float));
    xf32 = reinterpret_cast<float*>(c.work + at);
  }
  if (act != DType::F32) {
    MINFER_ASSERT(c.work_size >= r.x_row * static_cast<size_t>(n_rows));
    if (w.rw && act == DType::Q8_0) {
      const size_t offset = align64(r.x_row * static_cast<size_t>(n_rows));
      xsum = reinterpret_cast<int32_t*>(c.work + offset);
      const size_t xd_at = align64(offset + static_cast<size_t>(n_rows * n_blocks) * 4);
      xd = reinterpret_cast<float*>(c.work + xd_at);
      MINFER_ASSERT(c.work_size >= xd_at + static_cast<size_t>(n_rows * n_blocks) * 4);
    }
    // Activations to the activation type; for a GEMM over Q8_0 also each block's sum, in the
    // same pass over the rows.
    const QuantizeFn quantize = c.k.quantize[type_slot(act)];
    const float* xf = xa.f32();
    const size_t x_row = r.x_row;
    if (!reuse) c.pool.parallel_for(n_rows, [&](int64_t r0, int64_t r1) {
      for (int64_t i = r0; i < r1; ++i) quantize(xf + i * n_in, c.work + static_cast<size_t>(i) * x_row, n_in);
      if (xsum) block_sums(c.work, x_row, n_blocks, r0, r1, xsum);
      if (xd) block_scales(c.work, x_row, n_blocks, n_rows, r0, r1, xd);
      if (xf32) widen_rows(act, c.work, x_row, n_in, r0, r1, xf32);
    }, 4);
    r.xq = c.work;
  }
  r.xsum = xsum;
  r.xd_tiles = xd;
  r.gx = xf32 ? reinterpret_cast<const uint8_t*>(xf32) : r.xq;
  r.gx_row = xf32 ? static_cast<size_t>(n_in) * sizeof(float) : r.x_row;
  return r;
}

// Token rows per GEMM call: the kernel's block of activations (~192 KiB; AMX: 1 MiB), so a
// block stays in L2 while the chunk's weight groups stream past it; whole 16-token tiles.
int64_t token_block(const OpContext& c, const Activations& x) {
  return std::max<int64_t>(16, c.k.gemm_x_block_bytes / static_cast<int64_t>(x.gx_row) / 16 * 16);
}

// Rows [16 g0, 16 g1) of W x for the token rows [t0, t1), through the GEMM:
//   y[(t - t0) * y_stride + o - 16 g0]
void gemm_groups(const OpContext& c, const Weight& w, const Activations& x, int64_t g0, int64_t g1, int64_t t0,
                 int64_t t1, float* y, int64_t y_stride) {
  const RepackedWeight& rw = *w.rw;
  GemmArgs g;
  g.w = rw.group(g0);  // the kernel's group 0
  g.block_bytes = rw.block_bytes;
  g.n_blocks = rw.n_blocks;
  g.g0 = 0;
  g.g1 = g1 - g0;
  g.x = x.gx + static_cast<size_t>(t0) * x.gx_row;
  g.x_row = x.gx_row;
  g.xsum = x.xsum ? x.xsum + t0 * rw.n_blocks : nullptr;
  MINFER_ASSERT(t0 % kGemmScaleTokens == 0);
  g.xd_tiles = x.xd_tiles ? x.xd_tiles + t0 * rw.n_blocks : nullptr;
  g.n_tok = t1 - t0;
  g.y = y;
  g.y_stride = y_stride;
  c.k.gemm[type_slot(w.type)](g);
}

// Rows [o0, o1) of W x for every token row, through the row kernels: y[t * y_stride + o - o0].
void dot_rows(const OpContext& c, const Weight& w, const Activations& x, int64_t o0, int64_t o1, float* y,
              int64_t y_stride) {
  const VecDotFn dot = c.k.vec_dot[type_slot(w.type)];
  for (int64_t o = o0; o < o1; ++o) {
    const uint8_t* wr = w.data + static_cast<size_t>(o) * w.row;
    for (int64_t t = 0; t < x.n_rows; ++t) y[t * y_stride + o - o0] = dot(w.n_in, wr, x.xq + static_cast<size_t>(t) * x.x_row);
  }
}

// Runs fn(g0, g1) over n_groups row groups of n_in weights each in parallel: a few activation
// rows (decode) are bound by the weight bytes, so each thread streams one contiguous range of
// groups (parallel_streams; Qwen3-0.6B Q4_0 tg64: 58-59 t/s vs 54 with 8 chunks of a shared
// counter, and 55-56 with pieces of 4 groups claimed one at a time); more rows take chunks of
// at least ~64 K weight elements x rows.
template <class F>
void over_groups(const OpContext& c, int64_t n_groups, int64_t n_in, int64_t n_rows, F&& fn) {
  if (n_rows < kStreamRows)
    c.pool.parallel_streams(n_groups, std::max<int64_t>(1, 65536 / (n_in * kRepackRows)), fn);
  else
    c.pool.parallel_for(n_groups, fn, std::max<int64_t>(1, 65536 / std::max<int64_t>(1, n_in * n_rows * kRepackRows)));
}

// At least ~64 K weight elements per task of the row kernels, so small matrices do not pay
// for a wake-up.
int64_t min_dot_rows(const Weight& w, int64_t n_rows) { return std::max<int64_t>(1, 65536 / std::max<int64_t>(1, w.n_in * n_rows)); }

}  // namespace

size_t op_work_size(const Node& n, const Node* src0, const Node* src1) {
  if (n.op == Op::kMatmulId && src0 && src1) return matmul_id_work_size(n, *src0, *src1);
  if ((n.op != Op::kMatmul && n.op != Op::kMatmulSwiglu) || !src0 || !src1) return 0;
  const DType act = activation_type(src0->type);
  if (act == DType::F32) return 0;
  const auto n_rows = static_cast<size_t>(src1->n_rows());
  size_t bytes = row_bytes(act, src1->ne[0]) * n_rows;
  if (act == DType::Q8_0)  // xsum, then xd_tiles
    bytes = align64(align64(bytes) + n_rows * static_cast<size_t>(src1->ne[0] / 32) * sizeof(int32_t)) +
            n_rows * static_cast<size_t>(src1->ne[0] / 32) * sizeof(float);
  if (float_gemm_type(src0->type)) bytes = align64(bytes) + n_rows * static_cast<size_t>(src1->ne[0]) * sizeof(float);
  return bytes;
}

void op_matmul(const OpContext& c, const OpArgs& a) {
  const Weight w = weight_of(c, a.src[0]);
  const Activations x = convert(c, w, a.src[1]);
  const int64_t n_out = w.n_out, n_rows = x.n_rows;
  float* y = a.dst.f32();
  if (w.rw) {
    const int64_t tb = token_block(c, x);
    over_groups(c, w.rw->n_groups, w.n_in, n_rows, [&](int64_t g0, int64_t g1) {
      for (int64_t t0 = 0; t0 < n_rows; t0 += tb)
        gemm_groups(c, w, x, g0, g1, t0, std::min(n_rows, t0 + tb), y + t0 * n_out + g0 * kRepackRows, n_out);
    });
    const int64_t done = w.rw->n_groups * kRepackRows;  // the rows past the last group
    dot_rows(c, w, x, done, n_out, y + done, n_out);
    return;
  }
  c.pool.parallel_for(n_out, [&](int64_t o0, int64_t o1) { dot_rows(c, w, x, o0, o1, y + o0, n_out); },
                      min_dot_rows(w, n_rows));
}

bool can_join_matmuls(const OpContext& c, std::span<const OpArgs> ops) {
  if (ops.size() < 2) return false;
  const Node* x = ops[0].src[1].node;
  // Decode only: with 512 rows the joint job measured no faster than one job per weight.
  if (x->n_rows() >= kStreamRows) return false;
  const Weight w0 = weight_of(c, ops[0].src[0]);
  // Disjoint bytes: a matmul whose output nobody reads may share its buffer with the next one's
  // (the allocator frees it at once); run in turn that is harmless, run together it is not.
  auto apart = [](const TensorArg& a, const TensorArg& b) {
    const auto* pa = static_cast<const uint8_t*>(a.data);
    const auto* pb = static_cast<const uint8_t*>(b.data);
    return pa + a.node->n_bytes() <= pb || pb + b.node->n_bytes() <= pa;
  };
  for (size_t i = 0; i < ops.size(); ++i) {
    const OpArgs& a = ops[i];
    const Weight w = weight_of(c, a.src[0]);
    if (!w.rw || a.src[1].node != x || a.src[1].data != ops[0].src[1].data ||
        activation_type(w.type) != activation_type(w0.type) || float_gemm_type(w.type) != float_gemm_type(w0.type) ||
        !apart(a.dst, a.src[1]))
      return false;
    for (size_t j = 0; j < i; ++j)
      if (!apart(a.dst, ops[j].dst)) return false;
  }
  return true;
}

void op_matmuls_joint(const OpContext& c, std::span<const OpArgs> ops) {
  MINFER_ASSERT(can_join_matmuls(c, ops) && ops.size() <= 8);
  Weight w[8];
  int64_t first[9] = {0};  // [ops + 1] each weight's first group in the joint range
  for (size_t i = 0; i < ops.size(); ++i) {
    w[i] = weight_of(c, ops[i].src[0]);
    first[i + 1] = first[i] + w[i].rw->n_groups;
  }
  // One form for all (can_join_matmuls): the first conversion serves every weight.
  const Activations x = convert(c, w[0], ops[0].src[1]);
  const int64_t n_rows = x.n_rows;
  const int64_t tb = token_block(c, x);
  auto part = [&](size_t i, int64_t g0, int64_t g1) {  // groups [g0, g1) of weight i, every token
    const int64_t n_out = w[i].n_out;
    float* y = ops[i].dst.f32();
    for (int64_t t0 = 0; t0 < n_rows; t0 += tb)
      gemm_groups(c, w[i], x, g0, g1, t0, std::min(n_rows, t0 + tb), y + t0 * n_out + g0 * kRepackRows, n_out);
  };
  // The joint range of groups, as over_groups splits one weight's.
  over_groups(c, first[ops.size()], w[0].n_in, n_rows, [&](int64_t g0, int64_t g1) {
    for (size_t i = 0; i < ops.size(); ++i) {
      const int64_t lo = std::max(g0, first[i]), hi = std::min(g1, first[i + 1]);
      if (lo < hi) part(i, lo - first[i], hi - first[i]);
    }
  });
  for (size_t i = 0; i < ops.size(); ++i) {
    const int64_t done = w[i].rw->n_groups * kRepackRows, n_out = w[i].n_out;
    float* y = ops[i].dst.f32();
    dot_rows(c, w[i], x, done, n_out, y + done, n_out);
  }
}

namespace {

// Row groups whose gate and up values a thread holds at a time (matmul_swiglu), and the most
// token rows per GEMM call there: 2 x 128 x 528 floats = 528 KiB of per-thread buffers. Many
// groups per call: a GEMM call has a cost per token and block (the AMX kernels' activation
// scales) that its groups share. The buffer rows are padded by 64 bytes, so that the rows of
// a tile do not alias modulo 4 KiB.
constexpr int64_t kSwigluGroups = 32;
constexpr int64_t kSwigluTokens = 128;
constexpr int64_t kSwigluStride = kSwigluGroups * kRepackRows + 16;

// y[t * y_stride + i] = silu(g[t * stride + i]) * u[t * stride + i] for i < n, t < n_tok: what
// swiglu computes (ops-elementwise.cpp), in the same steps. silu_row computes a row's last
// n % 16 values another way (kernels.h), so a piece must start at a multiple of 16 and end at
// one or at the row's end: then each value takes the path it takes in the whole row.
void swiglu_block(const OpContext& c, const float* g, const float* u, int64_t n, int64_t stride, int64_t n_tok,
                  float* y, int64_t y_stride) {
  for (int64_t t = 0; t < n_tok; ++t) swiglu_row(c.k, n, y + t * y_stride, g + t * stride, u + t * stride);
}

// Per-thread gate and up buffers, grown on demand.
float* swiglu_scratch(size_t floats) {
  thread_local std::vector<float> buf;
  if (buf.size() < floats) buf.resize(floats);
  return buf.data();
}

}  // namespace

void op_matmul_swiglu(const OpContext& c, const OpArgs& a) {
  const Weight wg = weight_of(c, a.src[0]);
  const Weight wu = weight_of(c, a.src[1]);
  MINFER_ASSERT(wg.type == wu.type && wg.n_in == wu.n_in && wg.n_out == wu.n_out);
  const Activations x = convert(c, wg, a.src[2]);
  const int64_t n_out = wg.n_out, n_rows = x.n_rows;
  float* y = a.dst.f32();
  if (wg.rw && wu.rw && wg.rw->n_groups == wu.rw->n_groups) {
    const int64_t tb = std::min(kSwigluTokens, token_block(c, x));
    over_groups(c, wg.rw->n_groups, wg.n_in, n_rows, [&](int64_t g0, int64_t g1) {
      float* bg = swiglu_scratch(static_cast<size_t>(2 * std::min(tb, n_rows) * kSwigluStride));
      float* bu = bg + std::min(tb, n_rows) * kSwigluStride;
      for (int64_t t0 = 0; t0 < n_rows; t0 += tb) {
        const int64_t t1 = std::min(n_rows, t0 + tb);
        for (int64_t s0 = g0; s0 < g1; s0 += kSwigluGroups) {
          const int64_t s1 = std::min(g1, s0 + kSwigluGroups), n = (s1 - s0) * kRepackRows;
          gemm_groups(c, wg, x, s0, s1, t0, t1, bg, kSwigluStride);
          gemm_groups(c, wu, x, s0, s1, t0, t1, bu, kSwigluStride);
          swiglu_block(c, bg, bu, n, kSwigluStride, t1 - t0, y + t0 * n_out + s0 * kRepackRows, n_out);
        }
      }
    });
    const int64_t done = wg.rw->n_groups * kRepackRows;  // the rows past the last group
    if (done < n_out) {
      float* bg = swiglu_scratch(static_cast<size_t>(2 * (n_out - done) * n_rows));
      float* bu = bg + (n_out - done) * n_rows;
      dot_rows(c, wg, x, done, n_out, bg, n_out - done);
      dot_rows(c, wu, x, done, n_out, bu, n_out - done);
      swiglu_block(c, bg, bu, n_out - done, n_out - done, n_rows, y + done, n_out);
    }
    return;
  }
  // Units of 16 rows, so that every piece starts at a multiple of 16 (swiglu_block).
  const int64_t n_units = (n_out + kRepackRows - 1) / kRepackRows;
  c.pool.parallel_for(n_units, [&](int64_t u0, int64_t u1) {
    constexpr int64_t kRows = 4 * kRepackRows;
    float* bg = swiglu_scratch(static_cast<size_t>(2 * kRows * n_rows));
    float* bu = bg + kRows * n_rows;
    for (int64_t p0 = u0 * kRepackRows; p0 < std::min(n_out, u1 * kRepackRows); p0 += kRows) {
      const int64_t p1 = std::min({n_out, u1 * kRepackRows, p0 + kRows});
      dot_rows(c, wg, x, p0, p1, bg, p1 - p0);
      dot_rows(c, wu, x, p0, p1, bu, p1 - p0);
      swiglu_block(c, bg, bu, p1 - p0, p1 - p0, n_rows, y + p0, n_out);
    }
  }, std::max<int64_t>(1, min_dot_rows(wg, n_rows) / kRepackRows));
}

}  // namespace minfer::cpu
