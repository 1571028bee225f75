// Causal grouped-query attention over the KV cache, with an online softmax.
//
//   q     [hd, n_head, n_tokens] f32 (roped)
//   K, V  [n_head_kv * hd, n_ctx] f16 or f32; cache row p holds position p, laid out
//         [kv_head][hd], so element (p, kv_head, i) is at p * n_head_kv * hd + kv_head * hd + i
//   pos   [n_tokens] I32: query t sees cache rows 0 .. pos[t] (causality comes from the data)
//   out   [hd_v * n_head, n_tokens] f32
// Query head h reads KV head h / (n_head / n_head_kv).
//
// Precision: q stays f32, cache values are widened to f32, scores and the p-weighted V sum
// accumulate in f32. This is llama.cpp's batched (tiled) CPU path; its small-batch path rounds
// q to f16 and accumulates V in f16, so logits differ from it by ~1e-3 there (measured, see
// docs/design-cpu-numerics.md), and ours are the closer ones to a float64 evaluation.
#include <cmath>

#include "backends/cpu/ops.h"
#include "core/status.h"

namespace minfer::cpu {

void op_attn(const OpContext& c, const OpArgs& a) {
  const Node& qn = *a.src[0].node;
  const Node& kn = *a.src[1].node;
  const Node& vn = *a.src[2].node;
  const Node& out = *a.dst.node;
  const int64_t hd = qn.ne[0], n_head = qn.ne[1], n_tokens = qn.ne[2];
  const int64_t n_head_kv = out.params.n_head_kv;
  const int64_t hd_v = vn.ne[0] / n_head_kv;
  const int64_t group = n_head / n_head_kv;
  const float scale = out.params.attn_scale;
  const bool k_f16 = kn.type == DType::F16;
  const bool v_f16 = vn.type == DType::F16;
  const KqDotFn kq_dot = k_f16 ? c.k.kq_dot_f16 : c.k.kq_dot_f32;
  const VAxpyFn v_axpy = v_f16 ? c.k.v_axpy_f16 : c.k.v_axpy_f32;
  const size_t k_row = row_bytes(kn.type, kn.ne[0]), k_head = row_bytes(kn.type, hd);
  const size_t v_row = row_bytes(vn.type, vn.ne[0]), v_head = row_bytes(vn.type, hd_v);
  const auto* kc = static_cast<const uint8_t*>(a.src[1].data);
  const auto* vc = static_cast<const uint8_t*>(a.src[2].data);
  const float* q = a.src[0].f32();
  const int32_t* pos = a.src[3].i32();
  float* y = a.dst.f32();
  MINFER_ASSERT(hd <= kMaxHeadDim && hd_v <= kMaxHeadDim && kq_dot && v_axpy);

  c.pool.parallel_for(n_tokens * n_head, [&](int64_t i0, int64_t i1) {
    float acc[kMaxHeadDim];  // [hd_v] running sum of p_j * v_j, scaled to the current max
    for (int64_t item = i0; item < i1; ++item) {
      const int64_t t = item / n_head, h = item % n_head, kvh = h / group;
      const float* qr = q + (t * n_head + h) * hd;
      for (int64_t i = 0; i < hd_v; ++i) acc[i] = 0.0f;
      float m = -INFINITY, l = 0.0f;  // running max and sum of exp(s - m)
      const int64_t n_kv = static_cast<int64_t>(pos[t]) + 1;
      MINFER_ASSERT(n_kv >= 1 && n_kv <= kn.ne[1]);
      for (int64_t j = 0; j < n_kv; ++j) {
        const float s = kq_dot(hd, kc + static_cast<size_t>(j) * k_row + static_cast<size_t>(kvh) * k_head, qr) * scale;
        if (s > m) {
          const float corr = std::exp(m - s);  // 0 on the first row (m = -inf)
          l *= corr;
          for (int64_t i = 0; i < hd_v; ++i) acc[i] *= corr;
          m = s;
        }
        const float p = std::exp(s - m);
        l += p;
        v_axpy(hd_v, acc, p, vc + static_cast<size_t>(j) * v_row + static_cast<size_t>(kvh) * v_head);
      }
      float* yr = y + t * n_head * hd_v + h * hd_v;
      const float inv = 1.0f / l;
      for (int64_t i = 0; i < hd_v; ++i) yr[i] = acc[i] * inv;
    }
  }, 1);
}

}  // namespace minfer::cpu
