#include "quant/scale-search.h"

#include <algorithm>
#include <cassert>
#include <cmath>

#include "core/fp16.h"

// Same bytes on every machine: no fused multiply-adds. Both compilers contract a * b + c by
// default for C++ wherever the target has FMA (always on aarch64; x86-64 with -mfma), which
// changes roundings and so the chosen integers.
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

namespace minfer::quant_detail {

namespace {

constexpr int kMaxSub = 32;  // longest sub-block the per-sub-block searches take

// Rounds of "pick integers, refit the super-block scales". Measured on bench/quant-error.py
// data: the error stops moving after 3-4 (8 rounds buy < 0.1% over 4).
constexpr int kRefitRounds = 4;
// Asymmetric sub-block fit: starting grid spacings range / (q_max + k * kStartStep) for
// |k| <= kStartSteps (plus spans of q_max - 2 and q_max - 3 steps), each refined by up to
// kLloydRounds assignment/refit rounds. 21 starts of 0.1 are 0.1-0.2% better than these 9 and
// cost twice the time; without the refinement Q2_K loses 3%.
constexpr int kStartSteps = 4;
constexpr float kStartStep = 0.25f;
constexpr int kLloydRounds = 3;

// The error loops (symmetric_error, range_error) keep kLanes partial sums, added in a fixed
// order at the end: the same result however the compiler schedules them, and a loop body
// that vectorizes (with the error-only evaluation, 2x faster searches).
constexpr int kLanes = 8;

// The searches' inner loops are also compiled for AVX2 (one 8-lane vector instead of two SSE
// halves), chosen at load time where the CPU has it. The same IEEE operations on the same lanes
// in the same order, and no contraction (above): identical bytes on every machine.
// Not under the sanitizers: a ThreadSanitizer binary crashes at start-up in the clones' ifunc
// resolver (it runs before the sanitizer runtime is initialised).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__) && \
    !defined(__SANITIZE_ADDRESS__)
#define MINFER_SEARCH_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define MINFER_SEARCH_CLONES
#endif

float sum_lanes(const float* acc) {
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

int clampi(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }

// Nearest integer of f (halves away from zero) clamped to [lo, hi]; NaN gives lo. Truncating
// casts keep this a few instructions on every ISA (std::nearbyint is a libm call on x86-64
// without SSE4.1).
int round_clamp(float f, int lo, int hi) {
  if (!(f > static_cast<float>(lo))) return lo;
  if (f >= static_cast<float>(hi)) return hi;
  return f >= 0.0f ? static_cast<int>(f + 0.5f) : -static_cast<int>(0.5f - f);
}

}  // namespace

float round_to_fp16(float f) {
  const float r = fp16_to_fp32(fp32_to_fp16(f));
  if (std::isinf(r)) return r > 0 ? 65504.0f : -65504.0f;
  return r;
}

// Uniform: the target is the plain squared error. Weighting by x^2 + c * mean(x^2), which
// favours the large elements as ggml's heuristics do, raised the plain error by 7-17% per type
// (c = 0.5) and was also worse at the logits level of a random-weight llama model (the
// quant_mix oracle's): Q2_K 0.89x llama.cpp's error with c = 2 against 0.78x uniform, Q4_K
// 0.95x against 0.92x, IQ4_XS 0.94x against 0.90x.
void element_weights(const float* x, float* w, int n) {
  (void)x;
  for (int i = 0; i < n; ++i) w[i] = 1.0f;
}

Levels Levels::uniform(int lo, int hi) {
  assert(hi > lo && hi - lo < kMaxLevels);
  Levels l;
  l.n = hi - lo + 1;
  l.consecutive = true;
  for (int k = 0; k < l.n; ++k) l.v[k] = static_cast<float>(lo + k);
  for (int k = 0; k + 1 < l.n; ++k) l.mid[k] = l.v[k] + 0.5f;
  l.zero = l.nearest(0.0f);
  return l;
}

Levels Levels::table(const int8_t* values, int n) {
  assert(n >= 2 && n <= kMaxLevels);
  Levels l;
  l.n = n;
  for (int k = 0; k < n; ++k) l.v[k] = static_cast<float>(values[k]);
  for (int k = 0; k + 1 < n; ++k) {
    assert(l.v[k] < l.v[k + 1]);
    l.mid[k] = 0.5f * (l.v[k] + l.v[k + 1]);
  }
  float gap = l.v[n - 1] - l.v[0];
  for (int k = 0; k + 2 < n; ++k) gap = std::min(gap, l.mid[k + 1] - l.mid[k]);
  const float span = l.v[n - 1] - l.v[0];
  l.lut_scale = std::max(1.0f / gap, 254.0f / span);
  l.lut_n = std::min(256, static_cast<int>(span * l.lut_scale) + 1);
  for (int b = 0; b < l.lut_n; ++b) {
    const float y = l.v[0] + static_cast<float>(b) / l.lut_scale;
    int k = 0;
    while (k + 1 < n && y >= l.mid[k]) ++k;
    l.lut[b] = static_cast<uint8_t>(k);
  }
  l.zero = l.nearest(0.0f);
  return l;
}

int Levels::nearest(float y) const {
  if (consecutive) {
    const float t = y - v[0] + 0.5f;  // level index + 0.5, truncated below
    if (!(t >= 0.0f)) return 0;
    return t >= static_cast<float>(n - 1) ? n - 1 : static_cast<int>(t);
  }
  const float f = (y - v[0]) * lut_scale;
  if (!(f >= 0.0f)) return 0;
  int k = lut[f >= static_cast<float>(lut_n - 1) ? lut_n - 1 : static_cast<int>(f)];
  while (k + 1 < n && y >= mid[k]) ++k;
  return k;
}

// ---------------------------------------------------------------------------------------------
// Symmetric scale of one sub-block: sweep t = 1/s upward. The assignment q(t) only changes when
// some x[i] * t crosses a decision boundary, so sorting those crossings visits every distinct
// assignment in the range; for each, the least-squares scale sum(w x v) / sum(w v^2) gives
// error sum(w x^2) - sum(w x v)^2 / sum(w v^2), minimised below.

namespace {

// Sorts event keys whose t lies in [t_lo, t_hi]: scatter into buckets by t (bucket order is t
// order), then one insertion pass that only has to fix order within buckets. Linear in
// practice; 2x faster than std::sort on these 50-500 keys. NaN t land in bucket 0.
void sort_events(uint64_t* ev, int n_ev, float t_lo, float t_hi) {
  constexpr int kBuckets = 128;
  if (n_ev < 32 || !(t_hi > t_lo)) {
    std::sort(ev, ev + n_ev);
    return;
  }
  uint64_t tmp[kMaxSub * (kMaxLevels - 1)];
  uint8_t bucket[kMaxSub * (kMaxLevels - 1)];
  int start[kBuckets + 1] = {};
  const float scale = static_cast<float>(kBuckets) / (t_hi - t_lo);
  for (int e = 0; e < n_ev; ++e) {
    const float f = (bits_f32(static_cast<uint32_t>(ev[e] >> 32)) - t_lo) * scale;
    const int b = !(f >= 0.0f) ? 0 : (f >= kBuckets - 1 ? kBuckets - 1 : static_cast<int>(f));
    bucket[e] = static_cast<uint8_t>(b);
    ++start[b + 1];
  }
  for (int b = 0; b < kBuckets; ++b) start[b + 1] += start[b];
  for (int e = 0; e < n_ev; ++e) tmp[start[bucket[e]]++] = ev[e];
  for (int e = 0; e < n_ev; ++e) {
    const uint64_t k = tmp[e];
    int j = e;
    while (j > 0 && ev[j - 1] > k) {
      ev[j] = ev[j - 1];
      --j;
    }
    ev[j] = k;
  }
}

}  // namespace

float best_symmetric_scale(const float* x, const float* w, int n, const Levels& lv) {
  assert(n <= kMaxSub);
  // Scanned range of t, relative to tc where the first element reaches an end level. With few
  // levels the optimum can sit far below tc (one outlier on a low level, the rest at zero),
  // so 8-level tables scan from t = 0. The optimum of IQ4's 16 levels was never seen below
  // 0.6 tc nor above 1.3 tc, that of 64 levels never outside 0.77 .. 1.06 tc (gaussian data
  // with 0.5% outliers at 12 sigma); narrowing 64 levels to 0.9 .. 1.05 costs 1.5% error.
  const float lo_frac = lv.n <= 8 ? 0.0f : (lv.n <= 16 ? 0.5f : 0.7f);
  const float hi_frac = lv.n <= 8 ? 2.0f : (lv.n <= 16 ? 1.5f : 1.1f);
  double best_sxv = 0.0, best_svv = 1.0;  // best sum(w y v), sum(w v^2) seen
  int best_sign = 1;
  // Crossing events as sortable keys: bits of t (a positive float orders as its bits) above
  // the element index and its new level. Integer keys give a total order, so the visit order
  // is the same on every standard library.
  uint64_t ev[kMaxSub * (kMaxLevels - 1)];
  float y[kMaxSub];
  uint8_t q[kMaxSub];
  for (int sign = 1; sign >= -1; sign -= 2) {
    float ymax = 0.0f, ymin = 0.0f;
    for (int i = 0; i < n; ++i) {
      y[i] = sign > 0 ? x[i] : -x[i];
      ymax = std::max(ymax, y[i]);
      ymin = std::min(ymin, y[i]);
    }
    float tc = INFINITY;
    if (ymax > 0.0f && lv.v[lv.n - 1] > 0.0f) tc = std::min(tc, lv.v[lv.n - 1] / ymax);
    if (ymin < 0.0f && lv.v[0] < 0.0f) tc = std::min(tc, lv.v[0] / ymin);
    if (!std::isfinite(tc)) continue;
    const float t_lo = tc * lo_frac, t_hi = tc * hi_frac;
    double sxv = 0.0, svv = 0.0;
    int n_ev = 0;
    auto push = [&](float t, int i, int k) {
      ev[n_ev++] = (static_cast<uint64_t>(f32_bits(t)) << 32) | static_cast<uint64_t>(i << 8 | k);
    };
    for (int i = 0; i < n; ++i) {
      q[i] = static_cast<uint8_t>(lv.nearest(y[i] * t_lo));
      if (w[i] == 0.0f || y[i] == 0.0f) continue;
      sxv += static_cast<double>(w[i]) * y[i] * lv.v[q[i]];
      svv += static_cast<double>(w[i]) * lv.v[q[i]] * lv.v[q[i]];
      const float inv = 1.0f / y[i];
      if (y[i] > 0.0f) {
        for (int k = q[i]; k + 1 < lv.n; ++k) {
          const float t = lv.mid[k] * inv;
          if (t > t_hi) break;
          push(t, i, k + 1);
        }
      } else {
        for (int k = q[i]; k > 0; --k) {
          const float t = lv.mid[k - 1] * inv;
          if (t > t_hi) break;
          push(t, i, k - 1);
        }
      }
    }
    sort_events(ev, n_ev, t_lo, t_hi);
    // Keep the assignment maximising sxv^2 / svv (least error), compared without dividing.
    auto consider = [&] {
      if (sxv > 0.0 && sxv * sxv * best_svv > best_sxv * best_sxv * svv) {
        best_sxv = sxv;
        best_svv = svv;
        best_sign = sign;
      }
    };
    consider();
    for (int e = 0; e < n_ev; ++e) {
      const int i = static_cast<int>(ev[e] >> 8) & 0xff, k = static_cast<int>(ev[e] & 0xff);
      const double v_old = lv.v[q[i]], v_new = lv.v[k];
      sxv += w[i] * y[i] * (v_new - v_old);
      svv += w[i] * (v_new * v_new - v_old * v_old);
      q[i] = static_cast<uint8_t>(k);
      consider();
    }
  }
  return best_sxv > 0.0 ? static_cast<float>(best_sign * best_sxv / best_svv) : 0.0f;
}

namespace {

// Error of one sub-block at scale s, without writing the assignment (the search's innermost
// loop; the consecutive-level case is written so that compilers vectorize it).
MINFER_SEARCH_CLONES double symmetric_error(const float* x, const float* w, int n, const Levels& lv, float s) {
  assert(n % kLanes == 0);
  float acc[kLanes] = {};  // float sums: at most 32 terms, only compared with each other
  const float inv = s != 0.0f ? 1.0f / s : 0.0f;
  if (lv.consecutive) {
    const float top = static_cast<float>(lv.n - 1), v0 = lv.v[0];
    for (int i = 0; i < n; i += kLanes) {
      for (int l = 0; l < kLanes; ++l) {
        float f = x[i + l] * inv - v0;
        f = f > 0.0f ? f : 0.0f;  // also maps NaN to 0
        f = f < top ? f : top;
        const float v = v0 + static_cast<float>(static_cast<int>(f + 0.5f));
        const float e = x[i + l] - s * v;
        acc[l] += w[i + l] * e * e;
      }
    }
  } else {
    for (int i = 0; i < n; i += kLanes) {
      for (int l = 0; l < kLanes; ++l) {
        const float e = x[i + l] - s * lv.v[lv.nearest(x[i + l] * inv)];
        acc[l] += w[i + l] * e * e;
      }
    }
  }
  return sum_lanes(acc);
}

// Level indices of one sub-block at scale s (the zero level for s == 0).
void symmetric_assign(const float* x, int n, const Levels& lv, float s, uint8_t* q) {
  const float inv = s != 0.0f ? 1.0f / s : 0.0f;
  for (int i = 0; i < n; ++i) q[i] = static_cast<uint8_t>(lv.nearest(x[i] * inv));
}

}  // namespace

namespace {

// Integer scales for super-block scale d (already fp16): each sub-block tries the rounded
// value and `radius` neighbours on each side. Returns the total error.
double select_symmetric(const SymSpec& sp, const float* x, const float* w, const float* s,
                        float d, SymFit& fit) {
  double total = 0.0;
  for (int j = 0; j < sp.n_sub; ++j) {
    const float* xj = x + j * sp.sub_len;
    const float* wj = w + j * sp.sub_len;
    int lo = clampi(0, sp.sc_min, sp.sc_max), hi = lo;
    if (d != 0.0f) {
      const int r = round_clamp(s[j] / d, sp.sc_min, sp.sc_max);
      lo = std::max(sp.sc_min, r - sp.radius);
      hi = std::min(sp.sc_max, r + sp.radius);
    }
    double best = INFINITY;
    int best_c = lo;
    for (int c = lo; c <= hi; ++c) {
      const double e = symmetric_error(xj, wj, sp.sub_len, sp.levels, d * static_cast<float>(c));
      if (e < best) { best = e; best_c = c; }
    }
    fit.sc[j] = best_c;
    symmetric_assign(xj, sp.sub_len, sp.levels, d * static_cast<float>(best_c), fit.q + j * sp.sub_len);
    total += best;
  }
  fit.d = d;
  return total;
}

}  // namespace

SymFit fit_symmetric(const SymSpec& sp, const float* x, const float* w) {
  assert(sp.n_sub <= kMaxSubBlocks && sp.sub_len <= kMaxSub);
  float s[kMaxSubBlocks] = {};
  float s_big = 0.0f;
  for (int j = 0; j < sp.n_sub; ++j) {
    s[j] = best_symmetric_scale(x + j * sp.sub_len, w + j * sp.sub_len, sp.sub_len, sp.levels);
    if (std::fabs(s[j]) > std::fabs(s_big)) s_big = s[j];
  }
  SymFit best{}, cur{};
  double best_err = select_symmetric(sp, x, w, s, 0.0f, best);
  if (s_big == 0.0f) return best;
  // Start with the largest sub-block scale on either end of the integer range (trying both
  // ends gains 0.1-0.5%), then alternate integer selection and least-squares refits of d
  // while the error drops.
  const int ends[2] = {sp.sc_min, sp.sc_max};
  for (int e = 0; e < 2; ++e) {
    if (ends[e] == 0 || (e == 1 && ends[1] == ends[0])) continue;
    float d = s_big / static_cast<float>(ends[e]);
    double prev = INFINITY;
    for (int it = 0; it < kRefitRounds; ++it) {
      const double err = select_symmetric(sp, x, w, s, round_to_fp16(d), cur);
      if (err < best_err) { best_err = err; best = cur; }
      if (!(err < prev)) break;
      prev = err;
      double num = 0.0, den = 0.0;
      for (int i = 0; i < sp.n_sub * sp.sub_len; ++i) {
        const double a = static_cast<double>(cur.sc[i / sp.sub_len]) * sp.levels.v[cur.q[i]];
        num += w[i] * a * x[i];
        den += w[i] * a * a;
      }
      if (!(den > 0.0)) break;
      d = static_cast<float>(num / den);
    }
  }
  return best;
}

// ---------------------------------------------------------------------------------------------
// Asymmetric sub-block: x ~= s * q + b with b = -m <= 0. Starts from a few grid spacings over
// the block's range, each followed by alternating assignment and least-squares (s, b) refits
// (a Lloyd iteration; the landscape has many local minima, hence the several starts).

namespace {

// Error of one sub-block at (s, m) without writing the assignment: the innermost loop of the
// searches, written so that compilers vectorize it (no narrowing stores).
MINFER_SEARCH_CLONES double range_error(const float* x, const float* w, int n, int q_max, float s, float m) {
  assert(n % kLanes == 0);
  float acc[kLanes] = {};
  const float inv = s > 0.0f ? 1.0f / s : 0.0f, top = static_cast<float>(q_max);
  for (int i = 0; i < n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) {
      float f = (x[i + l] + m) * inv;
      f = f > 0.0f ? f : 0.0f;  // also maps NaN to 0
      f = f < top ? f : top;
      const float qf = static_cast<float>(static_cast<int>(f + 0.5f));
      const float e = x[i + l] - (s * qf - m);
      acc[l] += w[i + l] * e * e;
    }
  }
  return sum_lanes(acc);
}

// The same with the assignment written to q.
double range_error(const float* x, const float* w, int n, int q_max, float s, float m,
                   uint8_t* q) {
  const float inv = s > 0.0f ? 1.0f / s : 0.0f, top = static_cast<float>(q_max);
  for (int i = 0; i < n; ++i) {
    float f = (x[i] + m) * inv;
    f = f > 0.0f ? f : 0.0f;
    f = f < top ? f : top;
    q[i] = static_cast<uint8_t>(f + 0.5f);
  }
  return range_error(x, w, n, q_max, s, m);
}

// Least-squares (s, m) for fixed q under s >= 0, m >= 0.
void refit_range(const float* x, const float* w, int n, const uint8_t* q, float* s, float* m) {
  double sw = 0, sq = 0, sqq = 0, sx = 0, sxq = 0;
  for (int i = 0; i < n; ++i) {
    const double wi = w[i], qi = q[i];
    sw += wi; sq += wi * qi; sqq += wi * qi * qi; sx += wi * x[i]; sxq += wi * x[i] * qi;
  }
  const double det = sw * sqq - sq * sq;
  double ss = 0.0, b = 0.0;
  if (det > 1e-12 * sw * sqq) {
    ss = (sw * sxq - sq * sx) / det;
    b = (sqq * sx - sq * sxq) / det;
  } else {
    ss = sqq > 0.0 ? sxq / sqq : 0.0;
  }
  if (b > 0.0) { b = 0.0; ss = sqq > 0.0 ? sxq / sqq : 0.0; }
  if (ss < 0.0) { ss = 0.0; b = sw > 0.0 ? std::min(0.0, sx / sw) : 0.0; }
  *s = static_cast<float>(ss);
  *m = static_cast<float>(-b);
}

}  // namespace

void best_range(const float* x, const float* w, int n, int q_max, float* s_out, float* m_out) {
  assert(n <= kMaxSub);
  float xmin = 0.0f, xmax = 0.0f;
  for (int i = 0; i < n; ++i) { xmin = std::min(xmin, x[i]); xmax = std::max(xmax, x[i]); }
  *s_out = 0.0f;
  *m_out = -xmin;
  if (!(xmax > xmin)) return;
  const float range = xmax - xmin;
  uint8_t q[kMaxSub];
  double best = INFINITY;
  for (int step = -kStartSteps - 2; step <= kStartSteps; ++step) {
    // Two more starts span q_max - 2 and q_max - 3 steps: data from a grid that used fewer
    // levels (re-quantizing a quantized tensor) is then found exactly.
    const float span = step >= -kStartSteps
        ? static_cast<float>(q_max) + kStartStep * static_cast<float>(step)
        : static_cast<float>(q_max + step + kStartSteps - 1);
    if (!(span >= 1.0f)) continue;
    float s = range / span;
    float m = -xmin;
    double err = range_error(x, w, n, q_max, s, m, q);
    for (int it = 0;; ++it) {
      if (err < best) { best = err; *s_out = s; *m_out = m; }
      if (it == kLloydRounds) break;
      refit_range(x, w, n, q, &s, &m);
      const double e = range_error(x, w, n, q_max, s, m, q);
      if (!(e < err)) break;
      err = e;
    }
  }
}

namespace {

double select_asymmetric(const AsymSpec& sp, const float* x, const float* w, const float* s,
                         const float* m, float d, float dmin, AsymFit& fit) {
  double total = 0.0;
  for (int j = 0; j < sp.n_sub; ++j) {
    const float* xj = x + j * sp.sub_len;
    const float* wj = w + j * sp.sub_len;
    const int rs = d > 0.0f ? round_clamp(s[j] / d, 0, sp.sc_max) : 0;
    const int rm = dmin > 0.0f ? round_clamp(m[j] / dmin, 0, sp.sc_max) : 0;
    const int s_lo = d > 0.0f ? std::max(0, rs - sp.radius) : 0;
    const int s_hi = d > 0.0f ? std::min(sp.sc_max, rs + sp.radius) : 0;
    const int m_lo = dmin > 0.0f ? std::max(0, rm - sp.radius) : 0;
    const int m_hi = dmin > 0.0f ? std::min(sp.sc_max, rm + sp.radius) : 0;
    double best = INFINITY;
    int best_s = s_lo, best_m = m_lo;
    for (int cs = s_lo; cs <= s_hi; ++cs) {
      for (int cm = m_lo; cm <= m_hi; ++cm) {
        const double e = range_error(xj, wj, sp.sub_len, sp.q_max, d * static_cast<float>(cs),
                                     dmin * static_cast<float>(cm));
        if (e < best) { best = e; best_s = cs; best_m = cm; }
      }
    }
    fit.sc[j] = static_cast<uint8_t>(best_s);
    fit.m[j] = static_cast<uint8_t>(best_m);
    range_error(xj, wj, sp.sub_len, sp.q_max, d * static_cast<float>(best_s),
                dmin * static_cast<float>(best_m), fit.q + j * sp.sub_len);
    total += best;
  }
  fit.d = d;
  fit.dmin = dmin;
  return total;
}

}  // namespace

AsymFit fit_asymmetric(const AsymSpec& sp, const float* x, const float* w) {
  assert(sp.n_sub <= kMaxSubBlocks && sp.sub_len <= kMaxSub);
  float s[kMaxSubBlocks] = {}, m[kMaxSubBlocks] = {};
  float s_big = 0.0f, m_big = 0.0f;
  for (int j = 0; j < sp.n_sub; ++j) {
    best_range(x + j * sp.sub_len, w + j * sp.sub_len, sp.sub_len, sp.q_max, &s[j], &m[j]);
    s_big = std::max(s_big, s[j]);
    m_big = std::max(m_big, m[j]);
  }
  AsymFit best{}, cur{};
  double best_err = select_asymmetric(sp, x, w, s, m, 0.0f, 0.0f, best);
  float d = s_big / static_cast<float>(sp.sc_max);
  float dmin = m_big / static_cast<float>(sp.sc_max);
  double prev = INFINITY;
  const int n = sp.n_sub * sp.sub_len;
  for (int it = 0; it < kRefitRounds; ++it) {
    const double err = select_asymmetric(sp, x, w, s, m, round_to_fp16(d), round_to_fp16(dmin), cur);
    if (err < best_err) { best_err = err; best = cur; }
    if (!(err < prev)) break;
    prev = err;
    // x ~= d * a - dmin * b with a = sc * q, b = m: 2x2 normal equations in (d, dmin).
    double saa = 0, sab = 0, sbb = 0, sxa = 0, sxb = 0;
    for (int i = 0; i < n; ++i) {
      const int j = i / sp.sub_len;
      const double a = static_cast<double>(cur.sc[j]) * cur.q[i], b = cur.m[j], wi = w[i];
      saa += wi * a * a; sab += wi * a * b; sbb += wi * b * b;
      sxa += wi * x[i] * a; sxb += wi * x[i] * b;
    }
    const double det = saa * sbb - sab * sab;
    if (det > 1e-12 * saa * sbb) {
      d = static_cast<float>((sxa * sbb - sxb * sab) / det);
      dmin = static_cast<float>((sxa * sab - sxb * saa) / det);
    } else if (saa > 0.0) {
      d = static_cast<float>(sxa / saa);
    }
    if (dmin < 0.0f) { dmin = 0.0f; d = saa > 0.0 ? static_cast<float>(sxa / saa) : 0.0f; }
    if (d < 0.0f) d = 0.0f;
  }
  return best;
}

}  // namespace minfer::quant_detail
