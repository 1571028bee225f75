// The CPU kernel seam: dot products of one weight row with one activation row, and the
// activation quantizers, per ISA. The scalar reference ("ref") is the spec and the oracle of
// every ISA version; a table is chosen once from cpuid (x86) or the OS's feature flags (ARM),
// and MINFER_ISA=ref|avx2|avx512|amx (x86), ref|neon|dotprod|i8mm (ARM) forces one.
//
//   const CpuKernels& k = cpu_kernels();                 // the selected ISA
//   DType act = activation_type(DType::Q4_K);            // Q8_K
//   k.quantize[act_slot(act)](x, xq, n);                 // x: [n] f32 -> n/256 Q8_K blocks
//   float s = k.vec_dot[type_slot(DType::Q4_K)](n, w_row, xq);
//
// Weight type -> activation type (as llama.cpp does, so results are comparable):
//   F32 -> F32, F16 -> F16, BF16 -> BF16 (products of the rounded activations, f32 sums);
//   Q4_0, Q5_0, Q8_0, IQ4_NL -> Q8_0;  Q4_1, Q5_1 -> Q8_1 (carries d * sum(q) for the mins);
//   Q2_K ... Q6_K, IQ4_XS -> Q8_K (carries 16-element sums for the mins).
#pragma once

#include <cstdint>
#include <string_view>

#include "core/dtype.h"

namespace minfer::cpu {

// s = sum_i w[i] * x[i] over n elements (n a multiple of both block sizes).
using VecDotFn = float (*)(int64_t n, const void* w, const void* x);
// x: [n] f32 -> the activation type's blocks.
using QuantizeFn = void (*)(const float* x, void* y, int64_t n);
// Attention, llama.cpp's small-batch order (ops-attn.cpp): s = sum_i x[i] * y[i] with 64
// products per step fused into 4 x 16 lane sums, the groups added as (g0 + g2) + (g1 + g3),
// the 16 lanes halved 16 -> 8 -> 4 -> 2 -> 1, then the n % 64 tail added in double.
using DotW64F16Fn = float (*)(int64_t n, const uint16_t* x, const uint16_t* y);  // f16 x f16
using DotW64F32Fn = float (*)(int64_t n, const float* x, const float* y);
// y[i] = silu(x[i]) = x[i] / (1 + exp(-x[i])) over one row: exp by exp_poly (below) for the
// first n / 16 * 16 elements, by libm's expf for the rest, as llama.cpp's AVX-512 build does.
using SiluRowFn = void (*)(int64_t n, float* y, const float* x);
// RoPE of one head row (ops-rope.cpp): pair i < half, (a, b) = (x[i0], x[i1]), turns into
//   y[i0] = fma(a, cos[i], -(b * sin[i])),  y[i1] = fma(a, sin[i], b * cos[i])
// with i0, i1 = i, i + half (NEOX) or 2i, 2i + 1 (NORM); y may be x. The same two roundings
// per output on every ISA.
using RopeRowFn = void (*)(int64_t half, bool neox, const float* cos, const float* sin, const float* x, float* y);
// y[i] = f16(fma(x[i], v, y[i])): an f16 accumulator (llama.cpp's VKQ16).
using MadF16Fn = void (*)(int64_t n, uint16_t* y, const uint16_t* x, float v);
// The two steps above for the query rows that read one cache row (the heads of a KV head):
// s[r] = DotW64F16(n, k, q_r) where q_r = q + r * q_stride holds f32 values already rounded to
// f16 (so s[r] equals dot_w64_f16 of the rounded row bit for bit), and
// acc_r[i] = f16(fma(v[i], p[r], acc_r[i])) with acc_r = acc + r * acc_stride (MadF16 per row).
// The cache row is widened once for all n_rows rows.
using DotW64RowsF16Fn = void (*)(int64_t n, const uint16_t* k, const float* q, int64_t q_stride, int64_t n_rows,
                                 float* s);
using MadRowsF16Fn = void (*)(int64_t n, uint16_t* acc, int64_t acc_stride, const uint16_t* v, const float* p,
                              int64_t n_rows);
// Attention over a q8_0 / q4_0 cache (llama.cpp's order for a V it widens to f32):
// acc_r[i] = fma(v[i], p[r], acc_r[i]) for the n_rows rows acc_r = acc + r * acc_stride.
using MadRowsF32Fn = void (*)(int64_t n, float* acc, int64_t acc_stride, const float* v, const float* p,
                              int64_t n_rows);
// A cache row of a block type widened to f32, y[i] = d * q[i] (n a multiple of 32): one product
// per value, so every ISA's floats are the reference's bit for bit.
using RowToF32Fn = void (*)(int64_t n, const void* x, float* y);

// Attention of the wide (64+ query rows) batches for the G query rows of one token that share a
// KV head (ops-attn.cpp): keys in blocks of 8 (cache rows converted to f32 once per block for
// all G rows), scores scaled, an online softmax per block with exp_poly, the V sum in f32.
struct AttnWideArgs {
  const float* q = nullptr;  // [G][q_stride] the query rows
  int64_t q_stride = 0, G = 0;
  int64_t hd = 0, hd_v = 0;
  const uint8_t* k = nullptr;  // cache row of key 0, this KV head; rows k_row bytes apart
  const uint8_t* v = nullptr;
  size_t k_row = 0, v_row = 0;
  bool f16 = true;             // cache element type (else f32)
  int64_t n_kv = 0;            // keys 0 .. n_kv - 1
  // A ring cache (a sliding-window layer) wraps: keys from n_first on are at k_wrap, v_wrap
  // (the ring's first row) instead of following on from k, v.
  int64_t n_first = INT64_MAX;
  const uint8_t* k_wrap = nullptr;
  const uint8_t* v_wrap = nullptr;
  const uint8_t* k_at(int64_t j) const {
    return j < n_first ? k + static_cast<size_t>(j) * k_row : k_wrap + static_cast<size_t>(j - n_first) * k_row;
  }
  const uint8_t* v_at(int64_t j) const {
    return j < n_first ? v + static_cast<size_t>(j) * v_row : v_wrap + static_cast<size_t>(j - n_first) * v_row;
  }
  float scale = 1.0f;
  float softcap = 0.0f;        // > 0: scores s = q.k * scale become softcap * tanh(s) (the caller
                               // divides scale by softcap first)
  float* y = nullptr;          // [G][y_stride] outputs
  int64_t y_stride = 0;
  float* scratch = nullptr;    // G * hd_v + 16 * 256 floats
};
using AttnWideFn = void (*)(const AttnWideArgs& a);

// The small-batch arithmetic over an f16 cache (ops-attn.cpp attn_rows_narrow_f16) as one
// kernel, for the G <= kAttnRowsMax query rows of one KV head, with attn_wide's arguments (q
// rows hold values already rounded to f16; scratch unused): per key, s_r = dot_w64_rows_f16,
// online_step (attn-online.h) per row, acc_r = f16(acc_r * ms) on a new maximum, then
// acc_r = f16(fma(v, p_r, acc_r)); y_r = acc_r / l_r. Keys go in blocks whose scores are taken
// before their V rows are summed: the same float steps as the composed loop, bit for bit, with
// the dependency chains of a block's keys apart. Shapes: attn_rows_f16_fits.
using AttnRowsF16Fn = void (*)(const AttnWideArgs& a);
constexpr int64_t kAttnRowsMax = 8;
constexpr int64_t kAttnRowsMaxDim = 256;
inline bool attn_rows_f16_fits(int64_t hd, int64_t hd_v) {
  return hd % 64 == 0 && hd <= kAttnRowsMaxDim && hd_v % 16 == 0 && hd_v <= kAttnRowsMaxDim;
}

// Attention of a tile of query rows (ops-attn.cpp: wide batches of layers without a sliding
// window): the G query heads of one KV head for T consecutive tokens, R = T * G <= the table's
// attn_tile_rows rows; token t sees keys 0 .. n_kv[t] - 1. The rows sit in vector lanes: q is
// transposed once per tile, keys go by blocks of 32 whose K and V rows are widened to f32 once
// for all R rows, and for each lane (row) the arithmetic is one fixed sequence of float steps,
// so every ISA's result is the reference's bit for bit:
//   s_k = (fma chain over i of q[i] * k[i]) * scale   (c * tanh(s_k) with a soft-cap)
//   m' = max(m, max of the block's visible s_k); c = e(m - m'); p_k = e(s_k - m') or 0 if hidden
//   l = fma(l, c, p_0 + p_1 + ... in key order); o = o * c, then o = fma(p_k, v_k, o) in key order
//   y = o * (1 / l)
// where e(x) = exp_poly(min(max(x, -87), 0)) (e^-87 ~ 1.6e-38: nothing a sum of at least 1
// notices, and the 2^n of exp_poly stays normal).
struct AttnTileArgs {
  const float* q = nullptr;  // row (t, g) at q + t * q_tok + g * hd
  int64_t q_tok = 0;
  int64_t T = 0, G = 0, hd = 0, hd_v = 0;
  const int32_t* n_kv = nullptr;  // [T] keys each token sees (>= 1)
  const uint8_t* k = nullptr;     // cache row of key 0, this KV head; rows k_row bytes apart
  const uint8_t* v = nullptr;
  size_t k_row = 0, v_row = 0;
  size_t k_bytes = 0, v_bytes = 0;  // of this head's part of a row: the next block's are prefetched
  bool f16 = true;         // cache element type (else f32), unless to_f32 is set
  RowToF32Fn to_f32 = nullptr;  // a quantized cache: its rows widened by this
  float scale = 1.0f;      // as AttnWideArgs (divided by softcap when capping)
  float softcap = 0.0f;
  float* y = nullptr;      // row (t, g) at y + t * y_tok + g * hd_v
  int64_t y_tok = 0;
  float* scratch = nullptr;  // attn_tile_scratch(hd, hd_v) floats, 64-byte aligned
};
using AttnTileFn = void (*)(const AttnTileArgs& a);
constexpr int64_t kAttnTileMaxRows = 64;  // lanes of the transposed tiles (scratch layout)
constexpr int64_t kAttnTileKeys = 32;     // keys per block
inline int64_t attn_tile_scratch(int64_t hd, int64_t hd_v) {
  return (hd + hd_v + kAttnTileKeys + 3) * kAttnTileMaxRows + kAttnTileKeys * (hd + hd_v);
}
// The kernels' view of that scratch; row r of a tile is lane r of the transposed arrays.
struct AttnTileScratch {
  float* qt;  // [hd][kAttnTileMaxRows] q transposed
  float* ot;  // [hd_v][kAttnTileMaxRows] the V sums, transposed
  float* kf;  // [kAttnTileKeys][hd] the block's K rows in f32
  float* vf;  // [kAttnTileKeys][hd_v]
  float* pt;  // [kAttnTileKeys][kAttnTileMaxRows] scores, then weights
  float* m;   // [kAttnTileMaxRows] running max
  float* l;   // [kAttnTileMaxRows] running sum
  float* c;   // [kAttnTileMaxRows] the block's rescale factor
  AttnTileScratch(float* s, int64_t hd, int64_t hd_v)
      : qt(s), ot(qt + hd * kAttnTileMaxRows), kf(ot + hd_v * kAttnTileMaxRows), vf(kf + kAttnTileKeys * hd),
        pt(vf + kAttnTileKeys * hd_v), m(pt + kAttnTileKeys * kAttnTileMaxRows), l(m + kAttnTileMaxRows),
        c(l + kAttnTileMaxRows) {}
};

// A GEMM over weights repacked in groups of 16 rows (repack.h) and activation rows of the
// type's activation type (above):
//   y[t * y_stride + 16 g + r] = dot(row 16 g + r, activation row t)   for g in [g0, g1)
// in the float order of the type's vec_dot (bit-identical to it).
// F16 and BF16 instead take f32 activation rows holding the values already rounded to F16 /
// BF16 (op_matmul), so x_row = 4 n_in, and compute one chain s = fma(w_e, x_e, s) per (row,
// token) over e = 0 .. n_in - 1 in order: bit-identical across ISAs and batch sizes, within
// float rounding of vec_dot_f16 / vec_dot_bf16 (8 partial sums).
struct GemmArgs {
  const uint8_t* w = nullptr;  // repacked groups [n_groups][n_blocks][block bytes]
  size_t block_bytes = 0;
  int64_t n_blocks = 0;        // blocks per row (repack_block_elems: 32 or 256 elements)
  int64_t g0 = 0, g1 = 0;      // groups to compute
  const uint8_t* x = nullptr;  // [n_tok] rows of n_blocks activation blocks (F16 / BF16: f32)
  size_t x_row = 0;            // bytes per activation row
  const int32_t* xsum = nullptr;  // Q8_0: [n_tok][n_blocks] sum of each block's 32 values
  // Q8_0: each block's scale as f32 for whole tiles of kGemmScaleTokens tokens,
  // [n_tok / 16][n_blocks][16] (what the AMX kernels multiply by); null: they convert them.
  const float* xd_tiles = nullptr;
  int64_t n_tok = 0;
  float* y = nullptr;
  int64_t y_stride = 0;        // floats between token rows of y
};
using GemmFn = void (*)(const GemmArgs& a);
constexpr int64_t kGemmScaleTokens = 16;  // GemmArgs::xd_tiles' token tile

constexpr int kTypeSlots = 40;  // > every GGML type id used
inline int type_slot(DType t) { return static_cast<int>(t); }

struct CpuKernels {
  std::string_view isa;                  // "ref", "avx2", "avx512", "amx", "neon", "dotprod", "i8mm"
  VecDotFn vec_dot[kTypeSlots] = {};     // by weight type; null = unsupported
  GemmFn gemm[kTypeSlots] = {};          // by weight type, over repacked weights; null = none
  int64_t gemm_x_block_bytes = 196608;   // activation bytes per GEMM call (ops-matmul.cpp)
  QuantizeFn quantize[kTypeSlots] = {};  // by activation type
  DotW64F16Fn dot_w64_f16 = nullptr;
  DotW64F32Fn dot_w64_f32 = nullptr;
  MadF16Fn mad_f16 = nullptr;
  DotW64RowsF16Fn dot_w64_rows_f16 = nullptr;
  MadRowsF16Fn mad_rows_f16 = nullptr;
  MadRowsF32Fn mad_rows_f32 = nullptr;
  RowToF32Fn row_to_f32[kTypeSlots] = {};  // by cache type: Q8_0, Q4_0
  SiluRowFn silu_row = nullptr;
  RopeRowFn rope_row = nullptr;
  AttnWideFn attn_wide = nullptr;
  AttnTileFn attn_tile = nullptr;
  AttnRowsF16Fn attn_rows_f16 = nullptr;  // null: ops-attn.cpp composes the row kernels
  int64_t attn_tile_rows = 0;  // the most rows attn_tile takes (<= kAttnTileMaxRows)
};

// e^x in f32 with Arm's optimized-routines v_expf method (MIT OR Apache-2.0: x = n ln2 + r
// by a shifted fma, ln2 split in two, a degree-5 polynomial in r, max error ~2 ulp), the
// polynomial evaluated as fma(fma(fma(C0, r, C1), r^2, fma(C2, r, C3)), r^2, fma(C4, r, 1))
// and scaled by an exact 2^n; |n| > 192 gives 0 or inf. The scalar form of the vector kernels.
float exp_poly(float x);

// The activation type a weight type's dot product takes; F32 for unsupported types.
DType activation_type(DType weight);
bool matmul_supported(DType weight);

const CpuKernels& cpu_kernels_ref();
// nullptr when this build or this machine has no such ISA (an x86 table in an ARM build, and
// the reverse: kernels-absent.cpp).
const CpuKernels* cpu_kernels_avx2();
const CpuKernels* cpu_kernels_avx512();  // AVX-512 F/BW/VL/DQ + VNNI
const CpuKernels* cpu_kernels_amx();     // avx512 + AMX-INT8 tiles for the Q8_0-activation GEMMs
const CpuKernels* cpu_kernels_neon();     // ARMv8.0 Advanced SIMD (every AArch64 CPU)
const CpuKernels* cpu_kernels_dotprod();  // neon + SDOT/UDOT (ARMv8.2 FEAT_DotProd)
const CpuKernels* cpu_kernels_i8mm();     // dotprod + SMMLA/UMMLA (ARMv8.6 FEAT_I8MM)
// The table used by the backend: MINFER_ISA if set (an unknown or unavailable value is
// reported once on stderr and ignored), else the best the CPU supports.
const CpuKernels& cpu_kernels();
// Every table this machine can run, reference first (tests iterate over it).
int cpu_kernel_variants(const CpuKernels** out, int max);

// f16 -> f32 through a 64 Ki-entry table (exact; faster than the bit-twiddling conversion).
float f16_lookup(uint16_t h);

}  // namespace minfer::cpu
