// AMX-INT8 GEMM of Q4_K weights (repack.h) with Q8_K activations, in gemm-ref.cpp's order, so
// the results equal every other table's bit for bit. Per super-block of 256, row r and token t
// the reference needs two exact integers,
//   q = sum over sub-blocks j of sc[j] * (sum over its 32 elements of nibble * x)
//   m = sum over j of mn[j] * (bsums[2j] + bsums[2j + 1])
// then acc += d_x * (d_w * q - dmin_w * m). The 6-bit scale is split, sc = 8 sh + sl (sh, sl in
// 0..7), so that nibble * sl and nibble * sh (<= 105) are signed bytes: with the scales folded
// into the weights, q = Q_l + 8 Q_h, where Q_l and Q_h are plain dot products over the whole
// super-block, four tdpbssd of 64 elements each into one tile apiece. m goes through vpdpwssd:
// the mins of sub-blocks 2i, 2i + 1 as an int16 pair per row against the token's pair of
// 32-element sums. Token counts that are not a multiple of 16 leave a tail for the VNNI kernel.
//
// Tiles: tmm0 Q_l, tmm1 Q_h [16 tokens][16 rows] int32; tmm2, tmm3 A [16 tokens][64] int8 (the
// activation quants in place, stride x_row); tmm4/tmm5 and tmm6/tmm7 B pairs (l, h)
// [16][16 rows x 4] int8, alternating between the four 64-element chunks of a super-block.
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

namespace minfer::cpu::amx {
namespace {

// One super-block of a group, unpacked: B tiles [4 chunks][l, h][16][64] int8, then the mins
// as int16 pairs [4][16 rows] int32.
constexpr size_t kBTile = 1024;
constexpr size_t kUnpacked = 4 * 2 * kBTile + 4 * 64;
// The repacked Q4_K block (repack.h): d[16] f16 | dmin[16] f16 | sc[8][16] | m[8][16] | qs.
constexpr size_t kScales = 64, kMins = 192, kQuants = 320;

// Bytes q (0..15) times per-row factors s (a 16-bit word per byte position, the row's factor
// in both words of its dword): 16-bit products, the high byte of each zero.
inline __m512i mul_bytes(__m512i q, __m512i s) {
  const __m512i even = _mm512_mullo_epi16(_mm512_and_si512(q, _mm512_set1_epi16(0x00ff)), s);
  const __m512i odd = _mm512_mullo_epi16(_mm512_srli_epi16(q, 8), s);
  return _mm512_or_si512(even, _mm512_slli_epi16(odd, 8));
}

// 16 bytes (one per row) -> each row's value in both 16-bit halves of its dword.
inline __m512i row_words(const uint8_t* v16) {
  const __m512i d = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(v16)));
  return _mm512_or_si512(d, _mm512_slli_epi32(d, 16));
}

// One repacked super-block -> out (kUnpacked bytes, the layout above). Chunk k covers sub-blocks
// 2k (B rows 0-7: the low nibbles of qs[k][c]) and 2k + 1 (rows 8-15: the high nibbles).
inline void unpack(const uint8_t* blk, uint8_t* out) {
  const __m512i m4 = _mm512_set1_epi8(0x0f), m7 = _mm512_set1_epi16(7);
  for (int k = 0; k < 4; ++k) {
    const __m512i sc0 = row_words(blk + kScales + 16 * (2 * k)), sc1 = row_words(blk + kScales + 16 * (2 * k + 1));
    const __m512i l0 = _mm512_and_si512(sc0, m7), h0 = _mm512_srli_epi16(sc0, 3);
    const __m512i l1 = _mm512_and_si512(sc1, m7), h1 = _mm512_srli_epi16(sc1, 3);
    uint8_t* bl = out + (2 * k) * kBTile;
    uint8_t* bh = bl + kBTile;
    for (int c = 0; c < 8; ++c) {
      const __m512i v = _mm512_loadu_si512(blk + kQuants + 64 * (8 * k + c));
      const __m512i lo = _mm512_and_si512(v, m4), hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
      _mm512_store_si512(bl + 64 * c, mul_bytes(lo, l0));
      _mm512_store_si512(bh + 64 * c, mul_bytes(lo, h0));
      _mm512_store_si512(bl + 64 * (8 + c), mul_bytes(hi, l1));
      _mm512_store_si512(bh + 64 * (8 + c), mul_bytes(hi, h1));
    }
  }
  for (int i = 0; i < 4; ++i) {  // (mn[2i], mn[2i + 1]) per row as int16 pairs
    const __m512i lo = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + kMins + 16 * (2 * i))));
    const __m512i hi = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + kMins + 16 * (2 * i + 1))));
    _mm512_store_si512(out + 8 * kBTile + 64 * i, _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16)));
  }
}

#define MINFER_AMX_CHUNK(k, A, BL, BH)                                      \
  do {                                                                      \
    _tile_loadd(A, xq + 64 * (k), static_cast<long>(a.x_row));              \
    _tile_loadd(BL, wb + (2 * (k)) * kBTile, 64);                           \
    _tile_loadd(BH, wb + (2 * (k) + 1) * kBTile, 64);                       \
    _tile_dpbssd(0, A, BL);                                                 \
    _tile_dpbssd(1, A, BH);                                                 \
  } while (0)

// One group (16 rows) against one token tile (16 tokens at x).
inline void tile(const GemmArgs& a, const uint8_t* wg, const uint8_t* wq, const uint8_t* x, const float* xd,
                 const uint32_t* bs, float* y, bool stream) {
  alignas(64) int32_t ql[kTileTokens * 16], qh[kTileTokens * 16];
  __m512 acc[kTileTokens];
  #pragma GCC unroll 16
  for (int t = 0; t < kTileTokens; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < a.n_blocks; ++b) {
    const uint8_t* wb = wq + static_cast<size_t>(b) * kUnpacked;
    const uint8_t* xq = x + static_cast<size_t>(b) * sizeof(BlockQ8_K) + offsetof(BlockQ8_K, qs);
    _tile_zero(0);
    _tile_zero(1);
    MINFER_AMX_CHUNK(0, 2, 4, 5);
    MINFER_AMX_CHUNK(1, 3, 6, 7);
    MINFER_AMX_CHUNK(2, 2, 4, 5);
    MINFER_AMX_CHUNK(3, 3, 6, 7);
    _tile_stored(0, ql, 64);
    _tile_stored(1, qh, 64);
    const uint8_t* blk = wg + static_cast<size_t>(b) * a.block_bytes;
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk)));
    const __m512 dmin = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 32)));
    const __m512i* mn = reinterpret_cast<const __m512i*>(wb + 8 * kBTile);
    const __m512i mn0 = mn[0], mn1 = mn[1], mn2 = mn[2], mn3 = mn[3];
    const float* d = xd + b * kTileTokens;
    const uint32_t* s = bs + b * kTileTokens * 4;
    #pragma GCC unroll 16
    for (int t = 0; t < kTileTokens; ++t) {
      const __m512i q = _mm512_add_epi32(_mm512_load_si512(ql + 16 * t), _mm512_slli_epi32(_mm512_load_si512(qh + 16 * t), 3));
      __m512i m = _mm512_dpwssd_epi32(_mm512_setzero_si512(), mn0, _mm512_set1_epi32(static_cast<int>(s[4 * t])));
      m = _mm512_dpwssd_epi32(m, mn1, _mm512_set1_epi32(static_cast<int>(s[4 * t + 1])));
      m = _mm512_dpwssd_epi32(m, mn2, _mm512_set1_epi32(static_cast<int>(s[4 * t + 2])));
      m = _mm512_dpwssd_epi32(m, mn3, _mm512_set1_epi32(static_cast<int>(s[4 * t + 3])));
      const __m512 f = _mm512_sub_ps(_mm512_mul_ps(dw, _mm512_cvtepi32_ps(q)), _mm512_mul_ps(dmin, _mm512_cvtepi32_ps(m)));
      acc[t] = _mm512_add_ps(acc[t], _mm512_mul_ps(_mm512_set1_ps(d[t]), f));
    }
  }
  store_tile(y, a.y_stride, acc, stream);
}

#undef MINFER_AMX_CHUNK

// The driver's view of this kernel (amx-common.h, gemm_super_blocks).
struct Kernel {
  static constexpr size_t kUnpacked = amx::kUnpacked;
  static constexpr int kPairs = 4;
  // The int16 pairs (bs[2i], bs[2i + 1]) of the 32-element sums bs[j] = bsums[2j] + bsums[2j + 1].
  static void pairs(const BlockQ8_K& x, uint32_t* out) {
    for (int p = 0; p < 4; ++p) {
      const auto lo = static_cast<uint16_t>(x.bsums[4 * p] + x.bsums[4 * p + 1]);
      const auto hi = static_cast<uint16_t>(x.bsums[4 * p + 2] + x.bsums[4 * p + 3]);
      out[p] = lo | static_cast<uint32_t>(hi) << 16;
    }
  }
  static constexpr auto& configure = configure_all_64;
  static constexpr auto& unpack = amx::unpack;
  static constexpr auto& tile = amx::tile;
};

}  // namespace

void gemm_q4_k(const GemmArgs& a) { gemm_super_blocks<Kernel>(a, avx512::gemm_q4_k); }

}  // namespace minfer::cpu::amx

#include "backends/cpu/isa-end.h"
