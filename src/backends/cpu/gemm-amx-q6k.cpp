// AMX-INT8 GEMM of Q6_K weights (repack.h) with Q8_K activations, in gemm-ref.cpp's order, so
// the results equal every other table's bit for bit. Per super-block of 256, row r and token t
// the reference needs one exact integer,
//   q = sum over sub-blocks j (16 elements) of sc[j] * sum over e in j of (u_e - 32) * x_e
// (u: the unsigned 6-bit value, sc: a signed 8-bit scale), then acc += (d_x * d_w) * q.
// Split u = 8 uh + ul and sc = 16 sh + sl (uh, ul in 0..7, sl in 0..15; sh in -8..7, by an
// arithmetic shift):
//   u * sc = 128 (uh sh) + 8 (uh sl) + 16 (ul sh) + (ul sl)
// and each bracket fits a signed byte (-56..49 or 0..105), so with the scales folded into the
// weights q = 128 Q1 + 8 Q2 + 16 Q3 + Q4 - 32 M, where Q1..Q4 are plain dot products over the
// whole super-block (four tdpbssd of 64 elements each into one tile apiece) and
// M = sum over j of sc[j] * bsums[j] goes through vpdpwssd (scale pairs per row against the
// token's pairs of 16-element sums). Token counts that are not a multiple of 16 leave a tail
// for the VNNI kernel.
//
// Tiles: tmm0-3 Q1..Q4 [16 tokens][16 rows] int32; tmm4 A [16 tokens][64] int8 (the activation
// quants in place, stride x_row); tmm5-7 B [16][16 rows x 4] int8, the brackets in turn.
// An AMX region (isa-begin.h); called only after cpuid and the kernel say so.
#include <immintrin.h>

#include <cstring>

#include "backends/cpu/kernels-avx512.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/repack.h"
#include "quant/blocks.h"

#define MINFER_ISA amx
#include "backends/cpu/isa-begin.h"
#include "backends/cpu/amx-common.h"
#include "backends/cpu/avx512-common.h"

namespace minfer::cpu::amx {
namespace {

// One super-block of a group, unpacked: B tiles [4 chunks][4 brackets][16][64] int8, then the
// scales as int16 pairs [8][16 rows] int32.
constexpr size_t kBTile = 1024;
constexpr size_t kUnpacked = 4 * 4 * kBTile + 8 * 64;
constexpr size_t kScales = 32;  // sc[16][16] int8 after d[16] f16 (repack.h)

// The low bytes of the 16-bit words a and b as bytes: a's at even, b's at odd positions.
inline __m512i pack_bytes(__m512i even, __m512i odd) {
  return _mm512_or_si512(_mm512_and_si512(even, _mm512_set1_epi16(0x00ff)), _mm512_slli_epi16(odd, 8));
}

// Per byte position q * s (q: bytes 0..7; s: the row's factor in both 16-bit words of its
// dword), as signed bytes (the brackets fit).
inline __m512i mul_bytes(__m512i q, __m512i s) {
  const __m512i e = _mm512_mullo_epi16(_mm512_and_si512(q, _mm512_set1_epi16(0x00ff)), s);
  const __m512i o = _mm512_mullo_epi16(_mm512_srli_epi16(q, 8), s);
  return pack_bytes(e, o);
}

// A 32-bit value per row -> that value's low 16 bits in both 16-bit halves of the row's dword.
inline __m512i row_words(__m512i d) { return _mm512_or_si512(_mm512_and_si512(d, _mm512_set1_epi32(0xffff)), _mm512_slli_epi32(d, 16)); }

// One repacked super-block -> out (kUnpacked bytes, the layout above). Chunk k covers
// sub-blocks 4k..4k+3; B row 4i + v holds chunk v (elements 4v..4v+3) of sub-block 4k + i.
inline void unpack(const uint8_t* blk, uint8_t* out) {
  const __m512i m7 = _mm512_set1_epi8(7);
  for (int s = 0; s < 16; ++s) {
    const __m512i sc = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + kScales + 16 * s)));
    const __m512i sh = row_words(_mm512_srai_epi32(sc, 4)), sl = row_words(_mm512_and_si512(sc, _mm512_set1_epi32(15)));
    __m512i u[4];
    unpack_q6_k(blk + kQ6KRepackedQuants + 192 * s, u);
    uint8_t* b = out + (s / 4) * 4 * kBTile + 64 * (4 * (s % 4));
    for (int v = 0; v < 4; ++v) {
      const __m512i ul = _mm512_and_si512(u[v], m7), uh = _mm512_and_si512(_mm512_srli_epi16(u[v], 3), m7);
      _mm512_store_si512(b + 64 * v, mul_bytes(uh, sh));
      _mm512_store_si512(b + kBTile + 64 * v, mul_bytes(uh, sl));
      _mm512_store_si512(b + 2 * kBTile + 64 * v, mul_bytes(ul, sh));
      _mm512_store_si512(b + 3 * kBTile + 64 * v, mul_bytes(ul, sl));
    }
  }
  for (int i = 0; i < 8; ++i) {  // (sc[2i], sc[2i + 1]) per row as int16 pairs
    const __m512i lo = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + kScales + 16 * (2 * i))));
    const __m512i hi = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + kScales + 16 * (2 * i + 1))));
    _mm512_store_si512(out + 16 * kBTile + 64 * i,
                       _mm512_or_si512(_mm512_and_si512(lo, _mm512_set1_epi32(0xffff)), _mm512_slli_epi32(hi, 16)));
  }
}

#define MINFER_AMX_CHUNK(k)                                          \
  do {                                                               \
    _tile_loadd(4, xq + 64 * (k), static_cast<long>(a.x_row));       \
    _tile_loadd(5, wb + (4 * (k)) * kBTile, 64);                     \
    _tile_loadd(6, wb + (4 * (k) + 1) * kBTile, 64);                 \
    _tile_loadd(7, wb + (4 * (k) + 2) * kBTile, 64);                 \
    _tile_dpbssd(0, 4, 5);                                           \
    _tile_dpbssd(1, 4, 6);                                           \
    _tile_dpbssd(2, 4, 7);                                           \
    _tile_loadd(5, wb + (4 * (k) + 3) * kBTile, 64);                 \
    _tile_dpbssd(3, 4, 5);                                           \
  } while (0)

// One group (16 rows) against one token tile (16 tokens at x).
inline void tile(const GemmArgs& a, const uint8_t* wg, const uint8_t* wq, const uint8_t* x, const float* xd,
                 const uint32_t* bs, float* y, bool stream) {
  alignas(64) int32_t q1[kTileTokens * 16], q2[kTileTokens * 16], q3[kTileTokens * 16], q4[kTileTokens * 16];
  __m512 acc[kTileTokens];
  #pragma GCC unroll 16
  for (int t = 0; t < kTileTokens; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < a.n_blocks; ++b) {
    const uint8_t* wb = wq + static_cast<size_t>(b) * kUnpacked;
    const uint8_t* xq = x + static_cast<size_t>(b) * sizeof(BlockQ8_K) + offsetof(BlockQ8_K, qs);
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    MINFER_AMX_CHUNK(0);
    MINFER_AMX_CHUNK(1);
    MINFER_AMX_CHUNK(2);
    MINFER_AMX_CHUNK(3);
    _tile_stored(0, q1, 64);
    _tile_stored(1, q2, 64);
    _tile_stored(2, q3, 64);
    _tile_stored(3, q4, 64);
    const uint8_t* blk = wg + static_cast<size_t>(b) * a.block_bytes;
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk)));
    const auto* scp = reinterpret_cast<const __m512i*>(wb + 16 * kBTile);
    const float* d = xd + b * kTileTokens;
    const uint32_t* s = bs + b * kTileTokens * 8;
    for (int t = 0; t < kTileTokens; ++t) {
      __m512i m = _mm512_setzero_si512();
      #pragma GCC unroll 8
      for (int i = 0; i < 8; ++i) m = _mm512_dpwssd_epi32(m, scp[i], _mm512_set1_epi32(static_cast<int>(s[8 * t + i])));
      const __m512i qa = _mm512_add_epi32(_mm512_slli_epi32(_mm512_load_si512(q1 + 16 * t), 7),
                                          _mm512_slli_epi32(_mm512_load_si512(q2 + 16 * t), 3));
      const __m512i qb = _mm512_add_epi32(_mm512_slli_epi32(_mm512_load_si512(q3 + 16 * t), 4), _mm512_load_si512(q4 + 16 * t));
      const __m512i q = _mm512_sub_epi32(_mm512_add_epi32(qa, qb), _mm512_slli_epi32(m, 5));
      const __m512 dd = _mm512_mul_ps(_mm512_set1_ps(d[t]), dw);
      acc[t] = _mm512_add_ps(acc[t], _mm512_mul_ps(dd, _mm512_cvtepi32_ps(q)));
    }
  }
  store_tile(y, a.y_stride, acc, stream);
}

#undef MINFER_AMX_CHUNK

// The driver's view of this kernel (amx-common.h, gemm_super_blocks).
struct Kernel {
  static constexpr size_t kUnpacked = amx::kUnpacked;
  static constexpr int kPairs = 8;
  // The 16 bsums as 8 int16 pairs, as they lie in the block.
  static void pairs(const BlockQ8_K& x, uint32_t* out) { std::memcpy(out, x.bsums, sizeof x.bsums); }
  static constexpr auto& configure = configure_all_64;
  static constexpr auto& unpack = amx::unpack;
  static constexpr auto& tile = amx::tile;
};

}  // namespace

void gemm_q6_k(const GemmArgs& a) { gemm_super_blocks<Kernel>(a, avx512::gemm_q6_k); }

}  // namespace minfer::cpu::amx

#include "backends/cpu/isa-end.h"
