// The tiled attention of kernels.h (AttnTileFn) written once over a vector type: included by
// attn-tile-avx2.cpp and attn-tile-avx512.cpp inside their ISA regions (isa-begin.h), with a
// traits struct V giving the lane count and the handful of operations below. Internal.
//
//   struct V { using F = __m256; using I = __m256i; static constexpr int kLanes = 8;
//              static constexpr int kKeys = 2, kDims = 2;  // register blocking
//              load, store, zero, set1, fmadd, mul, add, max, sub, visible, keep_max, keep,
//              exp_clamped, widen };
//   attn_tile_lanes<V>(args);  // rows <= 4 * V::kLanes
//
// Per lane (query row) the steps are attn-tile-ref.cpp's in the same order, so every ISA's
// result is the reference's bit for bit.
#pragma once
#ifndef MINFER_ISA_REGION
#error "attn-tile-impl.h: include it inside an ISA region (isa-begin.h), after every other header"
#endif

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "backends/cpu/kernels.h"
#include "backends/cpu/prefetch.h"

namespace minfer::cpu::MINFER_ISA::tile {

constexpr int64_t kL = kAttnTileMaxRows, kB = kAttnTileKeys;

// Scores of keys k0 .. k0 + kKeys - 1 for NV row vectors: pt[k][rows] = (q . k) * scale. One
// broadcast of a key value feeds NV vectors of rows.
template <class V, int NV>
inline void scores(const float* qt, const float* kf, int64_t hd, int64_t k0, typename V::F scale, float* pt) {
  typename V::F acc[V::kKeys][NV];
  for (int kk = 0; kk < V::kKeys; ++kk)
    for (int v = 0; v < NV; ++v) acc[kk][v] = V::zero();
  const float* k = kf + k0 * hd;
  for (int64_t i = 0; i < hd; ++i) {
    typename V::F q[NV];
    for (int v = 0; v < NV; ++v) q[v] = V::load(qt + i * kL + V::kLanes * v);
    for (int kk = 0; kk < V::kKeys; ++kk) {
      const typename V::F b = V::set1(k[kk * hd + i]);
      for (int v = 0; v < NV; ++v) acc[kk][v] = V::fmadd(q[v], b, acc[kk][v]);
    }
  }
  for (int kk = 0; kk < V::kKeys; ++kk)
    for (int v = 0; v < NV; ++v) V::store(pt + (k0 + kk) * kL + V::kLanes * v, V::mul(acc[kk][v], scale));
}

// o[d .. d + kDims - 1][rows] = o * c, then fma(p_k, v_k[d], o) over the block's keys in order.
template <class V, int NV>
inline void vsums(float* ot, const float* pt, const float* vf, int64_t hd_v, int64_t d, int64_t nb, const float* c) {
  typename V::F acc[V::kDims][NV];
  for (int dd = 0; dd < V::kDims; ++dd)
    for (int v = 0; v < NV; ++v)
      acc[dd][v] = V::mul(V::load(ot + (d + dd) * kL + V::kLanes * v), V::load(c + V::kLanes * v));
  for (int64_t k = 0; k < nb; ++k) {
    typename V::F p[NV];
    for (int v = 0; v < NV; ++v) p[v] = V::load(pt + k * kL + V::kLanes * v);
    for (int dd = 0; dd < V::kDims; ++dd) {
      const typename V::F b = V::set1(vf[k * hd_v + d + dd]);
      for (int v = 0; v < NV; ++v) acc[dd][v] = V::fmadd(p[v], b, acc[dd][v]);
    }
  }
  for (int dd = 0; dd < V::kDims; ++dd)
    for (int v = 0; v < NV; ++v) V::store(ot + (d + dd) * kL + V::kLanes * v, acc[dd][v]);
}

// Keys j0 .. j0 + nb - 1 widened to f32: kf [nbk][hd], vf [nb][hd_v]; the K rows from nb to nbk
// are zeros (scored, never used). The next block's first n_next rows are requested meanwhile:
// a head's rows lie a whole cache row apart, a stride the hardware prefetchers do not follow.
template <class V>
inline void widen_block(const AttnTileArgs& a, int64_t j0, int64_t nb, int64_t nbk, int64_t n_next, float* kf,
                        float* vf) {
  const int64_t hd = a.hd, hd_v = a.hd_v;
  for (int64_t k = 0; k < nbk; ++k) {
    if (k < n_next) {
      prefetch_lines_l2(a.k + static_cast<size_t>(j0 + kB + k) * a.k_row, a.k_bytes);
      prefetch_lines_l2(a.v + static_cast<size_t>(j0 + kB + k) * a.v_row, a.v_bytes);
    }
    if (k < nb) {
      const uint8_t *kr = a.k + static_cast<size_t>(j0 + k) * a.k_row, *vr = a.v + static_cast<size_t>(j0 + k) * a.v_row;
      if (a.to_f32) {
        a.to_f32(hd, kr, kf + k * hd);
        a.to_f32(hd_v, vr, vf + k * hd_v);
      } else {
        V::widen(kr, hd, a.f16, kf + k * hd);
        V::widen(vr, hd_v, a.f16, vf + k * hd_v);
      }
    } else {
      std::fill(kf + k * hd, kf + (k + 1) * hd, 0.0f);  // scored, never used
    }
  }
}

// NV vectors of rows: R = T * G <= NV * kLanes (the lanes past R are padding: q = 0, one key).
// Needs hd % kLanes == 0, hd_v % max(kLanes, kDims) == 0 and 64-byte aligned scratch.
template <class V, int NV>
void lanes(const AttnTileArgs& a) {
  constexpr int64_t W = V::kLanes;
  const int64_t R = a.T * a.G, hd = a.hd, hd_v = a.hd_v;
  const AttnTileScratch sc(a.scratch, hd, hd_v);
  float *qt = sc.qt, *ot = sc.ot, *kf = sc.kf, *vf = sc.vf, *pt = sc.pt, *m = sc.m, *l = sc.l, *c = sc.c;
  alignas(64) int32_t n_kv[kL];  // [kL] keys each lane sees
  int64_t n_max = 0;
  for (int64_t r = 0; r < W * NV; ++r) {
    const bool real = r < R;
    const int64_t t = r / a.G, g = r % a.G;
    const float* q = a.q + t * a.q_tok + g * hd;
    for (int64_t i = 0; i < hd; ++i) qt[i * kL + r] = real ? q[i] : 0.0f;
    n_kv[r] = real ? a.n_kv[t] : 1;
    n_max = std::max<int64_t>(n_max, n_kv[r]);
  }
  for (int64_t d = 0; d < hd_v; ++d)
    for (int v = 0; v < NV; ++v) V::store(ot + d * kL + W * v, V::zero());
  for (int v = 0; v < NV; ++v) {
    V::store(m + W * v, V::set1(-INFINITY));
    V::store(l + W * v, V::zero());
  }
  const typename V::F scale = V::set1(a.scale);
  for (int64_t j0 = 0; j0 < n_max; j0 += kB) {
    const int64_t nb = std::min(kB, n_max - j0), nbk = (nb + V::kKeys - 1) / V::kKeys * V::kKeys;
    widen_block<V>(a, j0, nb, nbk, std::min(kB, n_max - j0 - kB), kf, vf);
    for (int64_t k0 = 0; k0 < nbk; k0 += V::kKeys) scores<V, NV>(qt, kf, hd, k0, scale, pt);
    if (a.softcap > 0.0f)
      for (int64_t k = 0; k < nb; ++k)
        for (int64_t r = 0; r < W * NV; ++r) pt[k * kL + r] = a.softcap * std::tanh(pt[k * kL + r]);
    for (int v = 0; v < NV; ++v) {
      const typename V::I nkv = V::load_i(n_kv + W * v);
      typename V::F bm = V::set1(-INFINITY);
      for (int64_t k = 0; k < nb; ++k)
        bm = V::keep_max(V::visible(nkv, static_cast<int32_t>(j0 + k)), bm, V::load(pt + k * kL + W * v));
      const typename V::F mo = V::load(m + W * v), nm = V::max(mo, bm);
      const typename V::F cv = V::exp_clamped(V::sub(mo, nm));
      typename V::F sum = V::zero();
      for (int64_t k = 0; k < nb; ++k) {
        const typename V::F p = V::keep(V::visible(nkv, static_cast<int32_t>(j0 + k)),
                                        V::exp_clamped(V::sub(V::load(pt + k * kL + W * v), nm)));
        V::store(pt + k * kL + W * v, p);
        sum = V::add(sum, p);
      }
      V::store(l + W * v, V::fmadd(V::load(l + W * v), cv, sum));
      V::store(m + W * v, nm);
      V::store(c + W * v, cv);
    }
    for (int64_t d = 0; d < hd_v; d += V::kDims) vsums<V, NV>(ot, pt, vf, hd_v, d, nb, c);
  }
  for (int64_t r = 0; r < R; ++r) {
    const int64_t t = r / a.G, g = r % a.G;
    const float inv = 1.0f / l[r];
    float* y = a.y + t * a.y_tok + g * hd_v;
    for (int64_t d = 0; d < hd_v; ++d) y[d] = ot[d * kL + r] * inv;
  }
}

// Up to 4 vectors of rows; other shapes go to `fallback` (the reference).
template <class V>
void run(const AttnTileArgs& a, void (*fallback)(const AttnTileArgs&)) {
  const int64_t R = a.T * a.G;
  if (a.hd % V::kLanes != 0 || a.hd_v % V::kLanes != 0 || a.hd_v % V::kDims != 0 || R < 1 || R > 4 * V::kLanes)
    return fallback(a);
  switch ((R + V::kLanes - 1) / V::kLanes) {
    case 1: return lanes<V, 1>(a);
    case 2: return lanes<V, 2>(a);
    case 3: return lanes<V, 3>(a);
    default: return lanes<V, 4>(a);
  }
}

}  // namespace minfer::cpu::MINFER_ISA::tile
