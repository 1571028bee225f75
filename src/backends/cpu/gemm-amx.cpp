// AMX (Intel Advanced Matrix Extensions, INT8) GEMM kernels over repacked weights (repack.h)
// for the types whose activations are Q8_0: Q4_0, Q5_0, Q8_0, IQ4_NL. The tile unit computes
// the exact integer dot products of one 32-element block for 16 tokens x 16 weight rows in one
// instruction; the AVX-512 unit then adds them to the float sums in the order of every other
// ISA (vec-dot-ref.cpp, Seq): per block, row and token s = fma(d_w * d_x, float(isum), s).
// So the results are the reference's bit for bit, like the VNNI kernels (gemm-avx512.cpp).
//
// Tiles (palette 1, configured at the start of each call, released at its end):
//   tmm0-tmm3   C  [16 tokens][16 rows] int32: isum of one block (four in turn: the software
//                  pipeline of run_steps below)
//   tmm4, tmm5  A  [16 tokens][32] int8: the activation block's quants, loaded in place from
//                  the Q8_0 rows (stride x_row)
//   tmm6, tmm7  B  [8][16 rows x 4] int8: the weight block as signed bytes, in the VNNI order
//                  the repacked layout already has (row k = bytes 4k..4k+3 of each of 16 rows);
//                  unpacked once per group into a per-thread buffer for all its token tiles
// tdpbssd: C[t][r] += sum over k of A[t][k] * B[k / 4][4 r + k % 4], signed x signed.
// Token counts that are not a multiple of 16 leave a tail for the VNNI kernels (same bits).
// An AMX region (isa-begin.h); called only after cpuid and the kernel say so
// (kernels-amx.cpp).
#include <immintrin.h>

#include <cstring>
#include <vector>

#include "backends/cpu/kernels-avx512.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/repack.h"
#include "core/fp16.h"
#include "quant/blocks.h"

#define MINFER_ISA amx
#include "backends/cpu/isa-begin.h"
#include "backends/cpu/amx-common.h"

namespace minfer::cpu::amx {
namespace {

constexpr int kTok = kTileTokens;
constexpr size_t kBTile = 512;    // bytes of one unpacked weight block: [8][64] int8
constexpr size_t kQuantsAt = 32;  // every layout here: d[16] f16, then the quants (repack.h)

void configure_tiles() {
  // C: 16 x 16 int32 (tmm0-3); A: 16 x 32 int8 (tmm4, 5); B: 8 x 64 int8 (tmm6, 7).
  configure({{16, 64}, {16, 64}, {16, 64}, {16, 64}, {16, 32}, {16, 32}, {8, 64}, {8, 64}});
}

// The 8 B rows of one repacked block as signed bytes: out[k][4 r + j] = weight of element
// 4k + j (rows 0-3) or 16 + 4(k - 4) + j (rows 4-7) of row r.
struct Q4 {
  static void unpack(const uint8_t* q, int8_t* out) {
    const __m512i m4 = _mm512_set1_epi8(0x0f), off = _mm512_set1_epi8(8);
    for (int k = 0; k < 4; ++k) {
      const __m512i v = _mm512_loadu_si512(q + 64 * k);
      _mm512_store_si512(out + 64 * k, _mm512_sub_epi8(_mm512_and_si512(v, m4), off));
      _mm512_store_si512(out + 64 * (4 + k), _mm512_sub_epi8(_mm512_and_si512(_mm512_srli_epi16(v, 4), m4), off));
    }
  }
};

// Q5_0: the nibble plus the fifth bit (hm[k][h], bit 4r + j) as bit 4, minus 16.
struct Q5 {
  static void unpack(const uint8_t* q, int8_t* out) {
    const __m512i m4 = _mm512_set1_epi8(0x0f), b4 = _mm512_set1_epi8(0x10), off = _mm512_set1_epi8(16);
    uint64_t hm[8];
    std::memcpy(hm, q + 256, sizeof hm);
    for (int k = 0; k < 4; ++k) {
      const __m512i v = _mm512_loadu_si512(q + 64 * k);
      const __m512i lo = _mm512_or_si512(_mm512_and_si512(v, m4), _mm512_and_si512(_mm512_movm_epi8(hm[2 * k]), b4));
      const __m512i hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(v, 4), m4),
                                         _mm512_and_si512(_mm512_movm_epi8(hm[2 * k + 1]), b4));
      _mm512_store_si512(out + 64 * k, _mm512_sub_epi8(lo, off));
      _mm512_store_si512(out + 64 * (4 + k), _mm512_sub_epi8(hi, off));
    }
  }
};

// Q8_0: the repacked bytes are the quants XOR 0x80.
struct Q8 {
  static void unpack(const uint8_t* q, int8_t* out) {
    const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
    for (int k = 0; k < 8; ++k)
      _mm512_store_si512(out + 64 * k, _mm512_xor_si512(_mm512_loadu_si512(q + 64 * k), flip));
  }
};

// IQ4_NL: each nibble indexes kIq4nlValues (-127..113, signed bytes already).
struct Iq4Table {
  alignas(64) int8_t v[64] = {};
  constexpr Iq4Table() {
    for (int i = 0; i < 64; ++i) v[i] = kIq4nlValues[i % 16];
  }
};
constexpr Iq4Table kIq4Table;
struct Iq4nl {
  static void unpack(const uint8_t* q, int8_t* out) {
    const __m512i m4 = _mm512_set1_epi8(0x0f), table = _mm512_load_si512(kIq4Table.v);
    for (int k = 0; k < 4; ++k) {
      const __m512i v = _mm512_loadu_si512(q + 64 * k);
      _mm512_store_si512(out + 64 * k, _mm512_shuffle_epi8(table, _mm512_and_si512(v, m4)));
      _mm512_store_si512(out + 64 * (4 + k), _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16(v, 4), m4)));
    }
  }
};

// Per-thread buffers, grown on demand and kept for the next call.
struct Scratch {
  AlignedScratch wq;        // [n_blocks][512] the group's unpacked weights
  std::vector<float> dx;    // [n_tiles][n_blocks][16] the activation scales, per token tile
};
thread_local Scratch t_scratch;

// The work of one call is a sequence of steps (group g, token tile i, block b), b fastest.
struct Cursor {
  int64_t g = 0, i = 0, b = 0;
  void next(int64_t n_tiles, int64_t nb) {
    if (++b < nb) return;
    b = 0;
    if (++i < n_tiles) return;
    i = 0;
    ++g;
  }
};

// The steps run as a software pipeline, so that the tile unit and the vector unit work at the
// same time and the vector loads never wait for a tile store (which cannot forward): at
// iteration u the tile unit computes step u into C(u % 4) and stores step u - 2 from
// C((u - 2) % 4) into ring slot (u - 2) % 8, while the vector unit adds up step u - 6 from
// ring slot (u - 6) % 8 (stored four iterations before).
constexpr int64_t kLag = 6;
constexpr int64_t kRing = 8;

// GCC's tile intrinsics paste the register number into inline assembly, so the tile numbers
// must be literals (macros, not template parameters).
// One block's product into tile C: A from the 16 activation rows, B from the unpacked weights.
#define MINFER_AMX_PRODUCT(C, A, B, xa, x_row, wb)  \
  do {                                              \
    _tile_loadd(A, (xa), static_cast<long>(x_row)); \
    _tile_loadd(B, (wb), 64);                       \
    _tile_zero(C);                                  \
    _tile_dpbssd(C, A, B);                          \
  } while (0)

template <class W>
void run_steps(const GemmArgs& a, int64_t n_tiles, const float* dxs, int8_t* wq, bool stream) {
  const int64_t nb = a.n_blocks;
  const int64_t total = (a.g1 - a.g0) * n_tiles * nb;
  alignas(64) int32_t ring[kRing][kTok * 16];
  __m512 acc[kTok];
  #pragma GCC unroll 16
  for (int t = 0; t < kTok; ++t) acc[t] = _mm512_setzero_ps();
  Cursor p{a.g0}, e{a.g0};  // the tile unit's step, the vector unit's step
  auto group = [&](int64_t g) { return a.w + static_cast<size_t>(g * nb) * a.block_bytes; };
  // The tile unit's step u: unpack the group's weights on entering it, then the product.
  auto start = [&](int64_t u) __attribute__((always_inline)) -> const uint8_t* {
    if (u >= total) return nullptr;
    if (p.i == 0 && p.b == 0) {
      const uint8_t* wg = group(p.g);
      for (int64_t b = 0; b < nb; ++b) W::unpack(wg + static_cast<size_t>(b) * a.block_bytes + kQuantsAt, wq + b * kBTile);
    }
    return a.x + static_cast<size_t>(p.i * kTok) * a.x_row + static_cast<size_t>(p.b) * sizeof(BlockQ8_0) +
           offsetof(BlockQ8_0, qs);
  };
  // The vector unit's step: acc[t] = fma(d_w * d_x[t], float(isum[t]), acc[t]) for the 16
  // tokens, then the sums out at the group's last block.
  auto finish = [&](int64_t u) __attribute__((always_inline)) {
    if (u < 0 || u >= total) return;
    const int32_t* c = ring[u % kRing];
    const uint8_t* blk = group(e.g) + static_cast<size_t>(e.b) * a.block_bytes;
    const float* dx = dxs + (e.i * nb + e.b) * kTok;
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk)));
    #pragma GCC unroll 16
    for (int t = 0; t < kTok; ++t) {
      const __m512 dd = _mm512_mul_ps(dw, _mm512_set1_ps(dx[t]));
      acc[t] = _mm512_fmadd_ps(dd, _mm512_cvtepi32_ps(_mm512_load_si512(c + 16 * t)), acc[t]);
    }
    if (e.b == nb - 1) {
      store_tile(a.y + e.i * kTok * a.y_stride + e.g * kRepackRows, a.y_stride, acc, stream);
      #pragma GCC unroll 16
      for (int t = 0; t < kTok; ++t) acc[t] = _mm512_setzero_ps();
    }
    e.next(n_tiles, nb);
  };
#define MINFER_AMX_ITER(j, CP, AP, BP, CS)                                                          \
  {                                                                                                 \
    const int64_t v = u + j;                                                                        \
    if (const uint8_t* xa = start(v)) {                                                             \
      MINFER_AMX_PRODUCT(CP, AP, BP, xa, a.x_row, wq + p.b * kBTile);                               \
      p.next(n_tiles, nb);                                                                          \
    }                                                                                               \
    if (v >= 2 && v - 2 < total) _tile_stored(CS, ring[(v - 2) % kRing], 64);                       \
    finish(v - kLag);                                                                               \
  }
  for (int64_t u = 0; u < total + kLag; u += 4) {
    MINFER_AMX_ITER(0, 0, 4, 6, 2)
    MINFER_AMX_ITER(1, 1, 5, 7, 3)
    MINFER_AMX_ITER(2, 2, 4, 6, 0)
    MINFER_AMX_ITER(3, 3, 5, 7, 1)
  }
#undef MINFER_AMX_ITER
}

#undef MINFER_AMX_PRODUCT

template <class W>
void gemm(const GemmArgs& a, GemmFn tail) {
  const int64_t n_tiles = a.n_tok / kTok;
  if (n_tiles > 0) {
    Scratch& s = t_scratch;
    const int64_t nb = a.n_blocks;
    // d_x of every block of every token tile, as floats: dx[tile][b][t]; the op converts them
    // once for all its calls (xd_tiles), a caller without them here.
    const float* dx = a.xd_tiles;
    static_assert(kGemmScaleTokens == kTok);
    if (!dx) {
      if (s.dx.size() < static_cast<size_t>(n_tiles * nb * kTok)) s.dx.resize(static_cast<size_t>(n_tiles * nb * kTok));
      for (int64_t i = 0; i < n_tiles; ++i)
        for (int t = 0; t < kTok; ++t) {
          const auto* xr = reinterpret_cast<const BlockQ8_0*>(a.x + static_cast<size_t>(i * kTok + t) * a.x_row);
          float* d = s.dx.data() + i * nb * kTok + t;
          for (int64_t b = 0; b < nb; ++b) d[b * kTok] = fp16_to_fp32(xr[b].d);
        }
      dx = s.dx.data();
    }
    auto* wq = reinterpret_cast<int8_t*>(s.wq.get(static_cast<size_t>(nb) * kBTile));
    configure_tiles();
    const bool stream = stream_output(a);
    run_steps<W>(a, n_tiles, dx, wq, stream);
    end_tiles(stream);
  }
  gemm_tail(a, n_tiles * kTok, tail);
}


}  // namespace

void gemm_q4_0(const GemmArgs& a) { gemm<Q4>(a, avx512::gemm_q4_0); }
void gemm_q5_0(const GemmArgs& a) { gemm<Q5>(a, avx512::gemm_q5_0); }
void gemm_q8_0(const GemmArgs& a) { gemm<Q8>(a, avx512::gemm_q8_0); }
void gemm_iq4_nl(const GemmArgs& a) { gemm<Iq4nl>(a, avx512::gemm_iq4_nl); }

}  // namespace minfer::cpu::amx

#include "backends/cpu/isa-end.h"
