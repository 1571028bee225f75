// Causal grouped-query attention over the KV cache, with an online softmax.
//
//   q     [hd, n_head, n_tokens] f32 (roped)
//   K, V  [n_head_kv * hd, n_ctx] f16, f32, q8_0 or q4_0 (hd of whole blocks); cache row p holds position p, laid out
//         [kv_head][hd], so element (p, kv_head, i) is at p * n_head_kv * hd + kv_head * hd + i
//   pos   [n_tokens] I32: query t sees cache rows 0 .. pos[t] (causality comes from the data)
// or, with several sequences, ranges [3, n_tokens] (first row, positions, query rows); a ring
// cache (sliding-window layers, params.attn_ring = R) holds position p of a sequence at row
// first + p mod R, so a query's window may wrap round to the ring's first row.
//   out   [hd_v * n_head, n_tokens] f32
// Query head h reads KV head h / (n_head / n_head_kv).
//
// Two arithmetics, chosen by batch size as llama.cpp's CPU flash attention chooses them, so
// that both engines round the same way (docs/design-cpu-numerics.md):
//  - fewer than kWideBatch query rows (decode, short prompts): q is rounded to the cache type,
//    scores are W64-order dot products (kernels.h), the V sum of an f16 cache is kept in f16
//    (y = f16(fma(v, p, y))), the softmax sum as S = S * ms + p (two roundings); with a q8_0 / q4_0 cache
//    q is quantized to q8_0, scores are the K type's integer dot products and the V sum is f32
//    (attn_rows_narrow_quant: llama.cpp's arithmetic, which it keeps at every batch size; here
//    wide batches with a window or a ring keep it too);
//  - kWideBatch rows or more (long prompts, perplexity): q stays f32, cache values are widened
//    to f32, scores and the V sum accumulate in f32 (k.attn_wide: keys in blocks of 8 shared by
//    the query heads of a KV head, exp_poly); without a window or a ring, tiles of up to 64
//    query rows (k.attn_tile, a quantized cache's rows widened by k.row_to_f32 and its q
//    rounded through q8_0).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "backends/cpu/attn-online.h"
#include "backends/cpu/ops.h"
#include "backends/cpu/prefetch.h"
#include "core/fp16.h"
#include "core/status.h"

namespace minfer::cpu {
namespace {

constexpr int64_t kWideBatch = 64;
// From this many keys on, llama.cpp splits a decode's keys between its threads (its order of
// additions then follows its thread count, so no fixed order can match it); there the tiles'
// f32 arithmetic takes every batch size, one pass over the keys for all the heads of a KV head.
constexpr int64_t kTileFromKeys = 512;
// ... except a quantized cache's decode with fewer query heads per KV head than this: its few
// lanes of rows lose to the integer dot products (Qwen3-0.6B, 2 heads per KV head, q8_0, tg32
// at depth 4096: 8.3 tok/s tiled, 9.9 narrow; Qwen2.5-0.5B's 7: 46.2 tiled, 35.8 narrow).
constexpr int64_t kQuantTileMinGroup = 4;


struct AttnShape {
  int64_t hd, n_head, n_tokens, n_head_kv, hd_v, group;
  size_t k_row, k_head, v_row, v_head;  // bytes
  float scale;    // divided by softcap when capping (llama.cpp's order: c * tanh(s * (scale / c)))
  float softcap;  // 0: off
  int64_t window; // 0: off
  int64_t ring;   // rows per sequence of a ring cache (0: position p is row first + p)
};

// Whether a token that sees n_kv keys takes the tiles because of its long context alone.
bool long_context_tiles(const AttnShape& sh, bool quant, int64_t n_kv) {
  return n_kv >= kTileFromKeys && (!quant || sh.group >= kQuantTileMinGroup);
}

// The cache rows a query reads: n keys in position order, from row0; from the n_first-th on
// they continue at wrap_row (a ring cache wrapping round).
struct KeyRows {
  int64_t row0, n, n_first, wrap_row;
};

// Of positions 0 .. n_kv - 1 of the sequence whose rows start at `first`, the window's (the
// last `window`, when set) and where they are.
KeyRows key_rows(const AttnShape& sh, int64_t first, int64_t n_kv, int64_t cache_rows) {
  MINFER_ASSERT(first >= 0 && n_kv >= 1);
  int64_t lo = 0, n = n_kv;
  if (sh.window > 0 && n > sh.window) {
    lo = n - sh.window;
    n = sh.window;
  }
  if (sh.ring == 0) {
    MINFER_ASSERT(first + n_kv <= cache_rows);
    return {first + lo, n, n, first};
  }
  MINFER_ASSERT(n <= sh.ring && first + sh.ring <= cache_rows);
  const int64_t o = lo % sh.ring;
  return {first + o, n, std::min(n, sh.ring - o), first};
}

// How many keys ahead of the one being read the narrow loops ask for the cache rows. A KV
// head's rows lie a whole cache row apart (n_head_kv heads), a stride the hardware prefetchers
// do not follow, and the weights streamed between two layers' attention have evicted them:
// without the hint each key waits for memory.
constexpr int64_t kKvPrefetchKeys = 8;

// Key and value rows of one KV head as a query reads them (KeyRows resolved to pointers).
struct KvView {
  const uint8_t *k, *v, *k_wrap, *v_wrap;
  size_t k_row, v_row;
  size_t k_bytes, v_bytes;  // of one head's row
  int64_t n, n_first;
  // Requests key j + kKvPrefetchKeys's K and V rows (and, from key 0, the first ones).
  [[gnu::always_inline]] void prefetch(int64_t j) const {
    const int64_t e = std::min(n, j + kKvPrefetchKeys + 1);
    for (int64_t i = j == 0 ? 0 : j + kKvPrefetchKeys; i < e; ++i) {
      prefetch_lines_l2(k_at(i), k_bytes);
      prefetch_lines_l2(v_at(i), v_bytes);
    }
  }
  const uint8_t* k_at(int64_t j) const {
    return j < n_first ? k + static_cast<size_t>(j) * k_row : k_wrap + static_cast<size_t>(j - n_first) * k_row;
  }
  const uint8_t* v_at(int64_t j) const {
    return j < n_first ? v + static_cast<size_t>(j) * v_row : v_wrap + static_cast<size_t>(j - n_first) * v_row;
  }
};

KvView kv_view(const AttnShape& sh, const uint8_t* kc, const uint8_t* vc, int64_t kvh, const KeyRows& r) {
  const size_t ko = static_cast<size_t>(kvh) * sh.k_head, vo = static_cast<size_t>(kvh) * sh.v_head;
  return {kc + static_cast<size_t>(r.row0) * sh.k_row + ko, vc + static_cast<size_t>(r.row0) * sh.v_row + vo,
          kc + static_cast<size_t>(r.wrap_row) * sh.k_row + ko, vc + static_cast<size_t>(r.wrap_row) * sh.v_row + vo,
          sh.k_row, sh.v_row, sh.k_head, sh.v_head, r.n, r.n_first};
}

inline float score(const AttnShape& sh, float dot) { return narrow_score(dot, sh.scale, sh.softcap); }

// attn_wide's (and attn_rows_f16's) arguments for G query rows (q_stride floats apart) of one
// KV head's keys; y rows hd_v apart.
AttnWideArgs row_args(const AttnShape& sh, const KvView& kv, const float* q, int64_t q_stride, int64_t G, float* y) {
  AttnWideArgs w;
  w.q = q;
  w.q_stride = q_stride;
  w.G = G;
  w.hd = sh.hd;
  w.hd_v = sh.hd_v;
  w.k = kv.k;
  w.v = kv.v;
  w.k_row = kv.k_row;
  w.v_row = kv.v_row;
  w.n_kv = kv.n;
  w.n_first = kv.n_first;
  w.k_wrap = kv.k_wrap;
  w.v_wrap = kv.v_wrap;
  w.scale = sh.scale;
  w.softcap = sh.softcap;
  w.y = y;
  w.y_stride = sh.hd_v;
  return w;
}

// One (token, head) row of the small-batch arithmetic over an f32 cache.
void attn_row_narrow_f32(const CpuKernels& k, const AttnShape& sh, const float* qr, const KvView& kv, float* yr) {
  float acc[kMaxHeadDim];  // [hd_v] V sum, then the output row
  for (int64_t i = 0; i < sh.hd_v; ++i) acc[i] = 0.0f;
  float m = -INFINITY, l = 0.0f;  // running max and sum of exp(s - m)
  for (int64_t j = 0; j < kv.n; ++j) {
    kv.prefetch(j);
    const auto* kr = reinterpret_cast<const float*>(kv.k_at(j));
    const auto* v = reinterpret_cast<const float*>(kv.v_at(j));
    const OnlineStep st = online_step(score(sh, k.dot_w64_f32(sh.hd, kr, qr)), m, l);
    if (st.ms != 1.0f)  // a new maximum: rescale what was summed (ms = 0 on the first row)
      for (int64_t i = 0; i < sh.hd_v; ++i) acc[i] *= st.ms;
    for (int64_t i = 0; i < sh.hd_v; ++i) acc[i] = std::fma(v[i], st.p, acc[i]);
  }
  const float inv = l == 0.0f ? 0.0f : 1.0f / l;
  for (int64_t i = 0; i < sh.hd_v; ++i) yr[i] = acc[i] * inv;
}

// The f16-cache narrow arithmetic for n_rows <= kRowsMax consecutive query rows that read the
// same cache rows: attn_row_narrow_f32's float steps for each row, with q rounded to f16 and
// the V sum kept in f16 (llama.cpp's VKQ16); each K and V cache row is widened once for all
// rows (k.dot_w64_rows_f16, k.mad_rows_f16).
constexpr int64_t kRowsMax = kAttnRowsMax;  // kernels.h: attn_rows_f16 takes as many

void attn_rows_narrow_f16(const CpuKernels& k, const AttnShape& sh, const float* q, int64_t n_rows, const KvView& kv,
                          float* y) {
  MINFER_ASSERT(n_rows >= 1 && n_rows <= kRowsMax);
  float qf[kRowsMax][kMaxHeadDim];         // [n_rows][hd] q rounded to f16, as f32
  uint16_t acc16[kRowsMax][kMaxHeadDim];   // [n_rows][hd_v] f16 V sums
  float m[kRowsMax], l[kRowsMax], s[kRowsMax], p[kRowsMax];  // [n_rows] running max, sum; score, weight
  const QuantizeFn to_f16 = k.quantize[type_slot(DType::F16)];
  for (int64_t r = 0; r < n_rows; ++r)
    for (int64_t i = 0; i < sh.hd; ++i) qf[r][i] = fp16_to_fp32(fp32_to_fp16(q[r * sh.hd + i]));
  if (k.attn_rows_f16 && attn_rows_f16_fits(sh.hd, sh.hd_v)) {  // the same steps as one kernel
    k.attn_rows_f16(row_args(sh, kv, qf[0], kMaxHeadDim, n_rows, y));
    return;
  }
  for (int64_t r = 0; r < n_rows; ++r) {
    for (int64_t i = 0; i < sh.hd_v; ++i) acc16[r][i] = 0;
    m[r] = -INFINITY;
    l[r] = 0.0f;
  }
  for (int64_t j = 0; j < kv.n; ++j) {
    kv.prefetch(j);
    const auto* kr = reinterpret_cast<const uint16_t*>(kv.k_at(j));
    const auto* vr = reinterpret_cast<const uint16_t*>(kv.v_at(j));
    k.dot_w64_rows_f16(sh.hd, kr, qf[0], kMaxHeadDim, n_rows, s);
    for (int64_t r = 0; r < n_rows; ++r) {
      const OnlineStep st = online_step(score(sh, s[r]), m[r], l[r]);
      // A new maximum: f16(f32(acc) * ms), the f16 rounding by the table's vector converter
      // (the same bits as fp32_to_fp16); acc * 1 would change nothing, nor acc (all +0) * 0 on
      // the first key.
      if (st.ms != 1.0f) {
        float t[kMaxHeadDim];
        for (int64_t i = 0; i < sh.hd_v; ++i) t[i] = fp16_to_fp32(acc16[r][i]) * st.ms;
        to_f16(t, acc16[r], sh.hd_v);
      }
      p[r] = st.p;
    }
    k.mad_rows_f16(sh.hd_v, acc16[0], kMaxHeadDim, vr, p, n_rows);
  }
  for (int64_t r = 0; r < n_rows; ++r) {
    const float inv = l[r] == 0.0f ? 0.0f : 1.0f / l[r];
    for (int64_t i = 0; i < sh.hd_v; ++i) y[r * sh.hd_v + i] = fp16_to_fp32(acc16[r][i]) * inv;
  }
}

// The q8_0 / q4_0 cache narrow arithmetic, llama.cpp's for a quantized cache: each q row
// quantized to q8_0 (the K type's dot partner, k.quantize) and scored by the K type's integer
// dot product (k.vec_dot), V rows widened to f32 (k.row_to_f32, once for all rows) and summed
// in f32 with fma, the softmax as in attn_row_narrow_f32; for n_rows <= kRowsMax query rows
// that read the same cache rows.
void attn_rows_narrow_quant(const CpuKernels& k, const AttnShape& sh, DType type, const float* q, int64_t n_rows,
                            const KvView& kv, float* y) {
  MINFER_ASSERT(n_rows >= 1 && n_rows <= kRowsMax && sh.hd % 32 == 0 && sh.hd_v % 32 == 0);
  constexpr size_t kQRow = kMaxHeadDim / 32 * 34;  // bytes of a q8_0 row of kMaxHeadDim
  uint8_t qq[kRowsMax][kQRow];                      // [n_rows] q rows as q8_0 blocks
  alignas(32) float acc[kRowsMax][kMaxHeadDim];     // [n_rows][hd_v] f32 V sums
  alignas(32) float vf[kMaxHeadDim];                // [hd_v] the V row in f32
  float m[kRowsMax], l[kRowsMax], p[kRowsMax];      // [n_rows] running max, sum; weight
  const VecDotFn dot = k.vec_dot[type_slot(type)];
  const RowToF32Fn to_f32 = k.row_to_f32[type_slot(type)];
  MINFER_ASSERT(dot && to_f32);
  for (int64_t r = 0; r < n_rows; ++r) {
    k.quantize[type_slot(DType::Q8_0)](q + r * sh.hd, qq[r], sh.hd);
    for (int64_t i = 0; i < sh.hd_v; ++i) acc[r][i] = 0.0f;
    m[r] = -INFINITY;
    l[r] = 0.0f;
  }
  for (int64_t j = 0; j < kv.n; ++j) {
    kv.prefetch(j);
    const uint8_t* kr = kv.k_at(j);
    for (int64_t r = 0; r < n_rows; ++r) {
      const OnlineStep st = online_step(score(sh, dot(sh.hd, kr, qq[r])), m[r], l[r]);
      if (st.ms != 1.0f)  // a new maximum: rescale what was summed (ms = 0 on the first row)
        for (int64_t i = 0; i < sh.hd_v; ++i) acc[r][i] *= st.ms;
      p[r] = st.p;
    }
    to_f32(sh.hd_v, kv.v_at(j), vf);
    k.mad_rows_f32(sh.hd_v, acc[0], kMaxHeadDim, vf, p, n_rows);
  }
  for (int64_t r = 0; r < n_rows; ++r) {
    const float inv = l[r] == 0.0f ? 0.0f : 1.0f / l[r];
    for (int64_t i = 0; i < sh.hd_v; ++i) y[r * sh.hd_v + i] = acc[r][i] * inv;
  }
}

// The wide batches and the long-context tokens of a layer without a window or a ring: tiles of
// up to attn_tile_rows / group consecutive tokens of one sequence (same first cache row), each
// with every query head of one KV head, through k.attn_tile; a token of a short batch that sees
// fewer than kTileFromKeys keys (ranges: its sequence's rows) takes the narrow arithmetic alone. A quantized
// cache's rows are widened by k.row_to_f32 and its q rounded through q8_0 first, as the narrow
// arithmetic and llama.cpp score it (the sums then differ from theirs in order only).
template <class Narrow>
void attn_tiles(const OpContext& c, const AttnShape& sh, DType type, const float* q, const uint8_t* kc, const uint8_t* vc,
                const int32_t* pos, const int32_t* ranges, int64_t cache_rows, float* y, const Narrow& narrow_rows) {
  const bool quant = type == DType::Q8_0 || type == DType::Q4_0;
  const int64_t per_tile = std::max<int64_t>(1, c.k.attn_tile_rows / sh.group);
  struct Span {
    int64_t t0, n;  // tokens t0 .. t0 + n - 1
    bool tile;
  };
  std::vector<Span> spans;
  auto first_of = [&](int64_t t) { return ranges ? int64_t{ranges[3 * t]} : 0; };
  std::vector<int32_t> n_kv(static_cast<size_t>(sh.n_tokens));  // [n_tokens] keys each token sees
  for (int64_t t = 0; t < sh.n_tokens; ++t) {
    n_kv[static_cast<size_t>(t)] = ranges ? ranges[3 * t + 1] : pos[t] + 1;
    MINFER_ASSERT(n_kv[static_cast<size_t>(t)] >= 1 && first_of(t) + n_kv[static_cast<size_t>(t)] <= cache_rows);
    const bool wide = (ranges ? ranges[3 * t + 2] : sh.n_tokens) >= kWideBatch ||
                      long_context_tiles(sh, quant, n_kv[static_cast<size_t>(t)]);
    Span* last = spans.empty() ? nullptr : &spans.back();
    if (wide && last && last->tile && last->n < per_tile && first_of(last->t0) == first_of(t))
      ++last->n;
    else
      spans.push_back({t, 1, wide});
  }
  const size_t scratch_floats = static_cast<size_t>(attn_tile_scratch(sh.hd, sh.hd_v)) + 16;
  c.pool.parallel_for(static_cast<int64_t>(spans.size()) * sh.n_head_kv, [&](int64_t i0, int64_t i1) {
    thread_local std::vector<float> scratch;  // attn_tile's, 64-byte aligned below
    thread_local std::vector<float> q_rounded;  // [T * G][hd] a quantized cache's q rows, through q8_0
    thread_local std::vector<uint8_t> q_blocks;  // [hd / 32] q8_0 blocks of one row
    if (scratch.size() < scratch_floats) scratch.resize(scratch_floats);
    float* aligned = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(scratch.data()) + 63) & ~uintptr_t{63});
    for (int64_t item = i0; item < i1; ++item) {
      const Span& sp = spans[static_cast<size_t>(item / sh.n_head_kv)];
      const int64_t kvh = item % sh.n_head_kv, first = first_of(sp.t0);
      const float* qg = q + (sp.t0 * sh.n_head + kvh * sh.group) * sh.hd;
      float* yg = y + sp.t0 * sh.n_head * sh.hd_v + kvh * sh.group * sh.hd_v;
      if (!sp.tile) {
        const KvView kv = kv_view(sh, kc, vc, kvh, key_rows(sh, first, n_kv[static_cast<size_t>(sp.t0)], cache_rows));
        for (int64_t h0 = 0; h0 < sh.group; h0 += kRowsMax)
          narrow_rows(qg + h0 * sh.hd, std::min(kRowsMax, sh.group - h0), kv, yg + h0 * sh.hd_v);
        continue;
      }
      AttnTileArgs w;
      w.q = qg;
      w.q_tok = sh.n_head * sh.hd;
      if (quant) {
        q_rounded.resize(static_cast<size_t>(sp.n * sh.group * sh.hd));
        q_blocks.resize(row_bytes(DType::Q8_0, sh.hd));
        for (int64_t t = 0; t < sp.n; ++t)
          for (int64_t g = 0; g < sh.group; ++g) {
            c.k.quantize[type_slot(DType::Q8_0)](qg + t * w.q_tok + g * sh.hd, q_blocks.data(), sh.hd);
            c.k.row_to_f32[type_slot(DType::Q8_0)](sh.hd, q_blocks.data(), q_rounded.data() + (t * sh.group + g) * sh.hd);
          }
        w.q = q_rounded.data();
        w.q_tok = sh.group * sh.hd;
        w.to_f32 = c.k.row_to_f32[type_slot(type)];
      }
      w.T = sp.n;
      w.G = sh.group;
      w.hd = sh.hd;
      w.hd_v = sh.hd_v;
      w.n_kv = n_kv.data() + sp.t0;
      w.k = kc + static_cast<size_t>(first) * sh.k_row + static_cast<size_t>(kvh) * sh.k_head;
      w.v = vc + static_cast<size_t>(first) * sh.v_row + static_cast<size_t>(kvh) * sh.v_head;
      w.k_row = sh.k_row;
      w.k_bytes = sh.k_head;
      w.v_bytes = sh.v_head;
      w.v_row = sh.v_row;
      w.f16 = type == DType::F16;
      w.scale = sh.scale;
      w.softcap = sh.softcap;
      w.y = yg;
      w.y_tok = sh.n_head * sh.hd_v;
      w.scratch = aligned;
      c.k.attn_tile(w);
    }
  }, 1);
}

}  // namespace

void op_attn(const OpContext& c, const OpArgs& a) {
  const Node& qn = *a.src[0].node;
  const Node& kn = *a.src[1].node;
  const Node& vn = *a.src[2].node;
  const Node& out = *a.dst.node;
  AttnShape sh;
  sh.hd = qn.ne[0];
  sh.n_head = qn.ne[1];
  sh.n_tokens = qn.ne[2];
  sh.n_head_kv = out.params.n_head_kv;
  sh.hd_v = vn.ne[0] / sh.n_head_kv;
  sh.group = sh.n_head / sh.n_head_kv;
  sh.softcap = out.params.attn_softcap;
  sh.scale = sh.softcap > 0.0f ? out.params.attn_scale / sh.softcap : out.params.attn_scale;
  sh.window = out.params.attn_window;
  sh.ring = out.params.attn_ring;
  sh.k_row = row_bytes(kn.type, kn.ne[0]);
  sh.k_head = row_bytes(kn.type, sh.hd);
  sh.v_row = row_bytes(vn.type, vn.ne[0]);
  sh.v_head = row_bytes(vn.type, sh.hd_v);
  MINFER_ASSERT(kn.type == vn.type);  // one cache type (ContextParams::kv_type)
  const DType type = kn.type;
  const bool k_f16 = type == DType::F16;
  const bool quant = type == DType::Q8_0 || type == DType::Q4_0;
  // The narrow arithmetic of n_rows <= kRowsMax query rows of one KV head (f32: row by row).
  auto narrow_rows = [&](const float* qr, int64_t n_rows, const KvView& kv, float* yr) {
    if (k_f16)
      attn_rows_narrow_f16(c.k, sh, qr, n_rows, kv, yr);
    else if (quant)
      attn_rows_narrow_quant(c.k, sh, type, qr, n_rows, kv, yr);
    else
      for (int64_t r = 0; r < n_rows; ++r) attn_row_narrow_f32(c.k, sh, qr + r * sh.hd, kv, yr + r * sh.hd_v);
  };
  const auto* kc = static_cast<const uint8_t*>(a.src[1].data);
  const auto* vc = static_cast<const uint8_t*>(a.src[2].data);
  const float* q = a.src[0].f32();
  const int32_t* pos = a.src[3].i32();
  // Several sequences (out.params.attn_ranges): src3 is [3, n_tokens] = (first row, rows, query
  // rows of the sequence in this batch); the arithmetic follows the sequence's own row count, so
  // a decode token batched beside another sequence's long prompt still takes the narrow path.
  const int32_t* ranges = out.params.attn_ranges ? a.src[3].i32() : nullptr;
  float* y = a.dst.f32();
  MINFER_ASSERT(sh.hd <= kMaxHeadDim && sh.hd_v <= kMaxHeadDim && sh.group <= 64);

  // A quantized cache's wide batches tile when they can; with a window or a ring they keep the
  // narrow arithmetic (attn_wide reads float caches only).
  const bool tiles = sh.window == 0 && sh.ring == 0 && c.k.attn_tile && sh.group <= c.k.attn_tile_rows;
  const bool narrow_only = quant && !tiles;
  bool all_narrow = narrow_only || sh.n_tokens < kWideBatch;
  if (ranges && !narrow_only)
    for (int64_t t = 0; t < sh.n_tokens && all_narrow; ++t) all_narrow = ranges[3 * t + 2] < kWideBatch;
  bool long_keys = false;  // a token that tiles for its long context alone
  for (int64_t t = 0; t < sh.n_tokens && !long_keys; ++t)
    long_keys = long_context_tiles(sh, quant, ranges ? int64_t{ranges[3 * t + 1]} : int64_t{pos[t]} + 1);
  if (tiles && (long_keys || !all_narrow)) {
    attn_tiles(c, sh, type, q, kc, vc, pos, ranges, kn.ne[1], y, narrow_rows);
    return;
  }
  if (all_narrow && (k_f16 || quant)) {
    // decode, short prompts: one item per chunk of the query heads of a token that read one KV
    // head; chunks of the whole group unless that leaves fewer than 2 items per thread.
    int64_t chunk = std::min(sh.group, kRowsMax);
    while (chunk > 1 && sh.n_tokens * sh.n_head_kv * ((sh.group + chunk - 1) / chunk) < 2 * c.pool.n_threads())
      chunk = (chunk + 1) / 2;
    const int64_t per_kv = (sh.group + chunk - 1) / chunk;  // items per (token, KV head)
    c.pool.parallel_for(sh.n_tokens * sh.n_head_kv * per_kv, [&](int64_t i0, int64_t i1) {
      for (int64_t item = i0; item < i1; ++item) {
        const int64_t t = item / (sh.n_head_kv * per_kv), kvh = item / per_kv % sh.n_head_kv;
        const int64_t h0 = kvh * sh.group + item % per_kv * chunk;
        const int64_t n_rows = std::min(chunk, (kvh + 1) * sh.group - h0);
        const KeyRows r = key_rows(sh, ranges ? ranges[3 * t] : 0,
                                   ranges ? ranges[3 * t + 1] : static_cast<int64_t>(pos[t]) + 1, kn.ne[1]);
        narrow_rows(q + (t * sh.n_head + h0) * sh.hd, n_rows, kv_view(sh, kc, vc, kvh, r),
                    y + t * sh.n_head * sh.hd_v + h0 * sh.hd_v);
      }
    }, 1);
    return;
  }
  if (all_narrow) {  // f32 cache: one item per query head
    c.pool.parallel_for(sh.n_tokens * sh.n_head, [&](int64_t i0, int64_t i1) {
      for (int64_t item = i0; item < i1; ++item) {
        const int64_t t = item / sh.n_head, h = item % sh.n_head, kvh = h / sh.group;
        const KeyRows r = key_rows(sh, ranges ? ranges[3 * t] : 0,
                                   ranges ? ranges[3 * t + 1] : static_cast<int64_t>(pos[t]) + 1, kn.ne[1]);
        attn_row_narrow_f32(c.k, sh, q + (t * sh.n_head + h) * sh.hd, kv_view(sh, kc, vc, kvh, r),
                            y + t * sh.n_head * sh.hd_v + h * sh.hd_v);
      }
    }, 1);
    return;
  }

  // One item = the `group` query heads of one token that read the same KV head.
  c.pool.parallel_for(sh.n_tokens * sh.n_head_kv, [&](int64_t i0, int64_t i1) {
    thread_local std::vector<float> scratch;  // attn_wide's: [group][hd_v] + 8 K and V rows
    scratch.resize(static_cast<size_t>(sh.group * sh.hd_v + 8 * (sh.hd + sh.hd_v)));
    for (int64_t item = i0; item < i1; ++item) {
      const int64_t t = item / sh.n_head_kv, kvh = item % sh.n_head_kv;
      int64_t first = 0, n_kv = 0, rows = sh.n_tokens;
      if (ranges) {
        first = ranges[3 * t];
        n_kv = ranges[3 * t + 1];
        rows = ranges[3 * t + 2];
      } else {
        n_kv = static_cast<int64_t>(pos[t]) + 1;
      }
      const KvView kv = kv_view(sh, kc, vc, kvh, key_rows(sh, first, n_kv, kn.ne[1]));
      const float* qg = q + (t * sh.n_head + kvh * sh.group) * sh.hd;
      float* yg = y + t * sh.n_head * sh.hd_v + kvh * sh.group * sh.hd_v;
      if (rows < kWideBatch) {
        for (int64_t h0 = 0; h0 < sh.group; h0 += kRowsMax) {
          narrow_rows(qg + h0 * sh.hd, std::min(kRowsMax, sh.group - h0), kv, yg + h0 * sh.hd_v);
        }
        continue;
      }
      AttnWideArgs w = row_args(sh, kv, qg, sh.hd, sh.group, yg);
      w.f16 = k_f16;
      w.scratch = scratch.data();
      c.k.attn_wide(w);
    }
  }, 1);
}

}  // namespace minfer::cpu
