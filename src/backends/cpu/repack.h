// Weights repacked at load for the GEMM kernels (kernels.h, GemmFn): rows in groups of 16,
// interleaved block by block, so that one vector holds the same 4 bytes of 16 rows and a
// multiply-add of 4-byte integer dot products (VNNI vpdpbusd, or its AVX2 emulation) computes
// 16 rows at once against one activation block (the float types: one element of 16 rows per
// vector, times one broadcast activation). About the size of the GGUF layout (Q4_K +3%, Q5_K
// +2%, Q3_K +4%, IQ4_XS +1.5%: their scales unpacked to bytes).
//
// Per group and block of 32 elements (r = row in the group, j = byte in a 4-byte chunk):
//   Q4_0  d[16] f16 | qs[4][16][4]: qs[k][r][j] = row r's byte 4k+j XOR kRepackQ4Xor (low
//         nibble = element 4k+j, high nibble = element 16+4k+j)                 288 bytes
//   IQ4_NL as Q4_0 (the nibbles index kIq4nlValues)                              288 bytes
//   Q5_0  as Q4_0 | hm[4][2] u64: bit 4r+j of hm[k][h] = the fifth bit of element 16h+4k+j
//                                                                                 352 bytes
//   Q4_1  d[16] f16 | m[16] f16 | qs as Q4_0                                     320 bytes
//   Q5_1  d[16] f16 | m[16] f16 | qs and hm as Q5_0                              384 bytes
//   Q8_0  d[16] f16 | qs[8][16][4]: qs[k][r][j] = row r's element 4k+j XOR kRepackQ8Xor
//                                                                                 544 bytes
//   Q4_K  (per super-block of 256) d[16] f16 | dmin[16] f16 | sc[8][16] | m[8][16] (the
//         6-bit scales and mins unpacked to bytes) | qs[4][8][16][4]: qs[p][c][r][j] = row
//         r's byte 32p+4c+j (low nibble: sub-block 2p, high: 2p+1)                2368 bytes
//   Q5_K  (per super-block of 256) as Q4_K plus hm[8][16][4]: bit c of hm[s][r][j] = the
//         fifth bit of row r's element 4c+j of sub-block s (of 32), i.e. of element e = 32s +
//         4c + j; so one vector hm[s] holds the fifth bits of the 8 chunks of sub-block s, bit
//         plane c for chunk c (a kernel moves bit c to bit 4 with one shift). Order in the
//         block: d | dmin | sc | m | per sub-block pair p: hm[2p] hm[2p+1] qs[p]  2880 bytes
//   Q3_K  (per super-block of 256) d[16] f16 | sc[16][16] int8 (the 6-bit scale - 32) |
//         q2[16][16][4] | hm[8][16][4]; per sub-block s of 16 elements, chunk v = its
//         elements 4v..4v+3 (v = 0..3):
//           byte q2[s][r][j]:   bits 2v+1..2v = the low 2 bits of element 16s+4v+j (chunk v)
//           byte hm[b][r][j]:   bit c = the hmask bit of element 32b+4c+j (b = s/2,
//                               c = 4(s%2) + v)
//         so one vector holds the low bits of a whole sub-block of 16 rows (4 chunks: a
//         shift and an AND each); u = low + 4 * hmask bit (0..7), weight = u - 4. Order
//         in the block: d | sc | per b: hm[b] q2[2b] q2[2b+1]                    1824 bytes
//   Q2_K  (per super-block of 256) d[16] f16 | dmin[16] f16 | scm[16][16] (the GGUF scale
//         byte of sub-block s: scale in the low nibble, min in the high) | q2[16][16][4] as
//         Q3_K; the GGUF size                                                     1344 bytes
//   Q6_K  (per super-block of 256) d[16] f16 | sc[16][16] int8 | q[16][3][16][4], with u(e)
//         = row r's element e as an unsigned 6-bit value (weight = u - 32); per sub-block s
//         of 16 elements, chunk v = its elements 4v..4v+3 (v = 0..3):
//           byte q[s][v][r][j], v = 0..2:  b7 b6 = bits 2v+1, 2v of u(16s + 12 + j) (chunk 3)
//                                          b5..b0 = u(16s + 4v + j)                 (chunk v)
//         so a kernel gets chunks 0-2 with one AND each and chunk 3 from the three top bit
//         pairs; the GGUF size (q6_k_repacked_u below is the scalar spec)        3360 bytes
//   F16, BF16  w[32][16] u16: w[e][r] = row r's element e of the block (element-major), so
//         one 32-byte load is element e of 16 rows, and a group (its blocks consecutive) is
//         w[n_in][16]                                                            1024 bytes
//   IQ4_XS (per super-block of 256) d[16] f16 | ls[8][16] int8 (sub-block s's 6-bit scale
//         - 32) | qs[8][4][16][4]: qs[s][k][r][j] = row r's byte 16s+4k+j (low nibble =
//         element 32s+4k+j, high nibble = element 32s+16+4k+j; both index kIq4nlValues)
//                                                                   2208 bytes (GGUF 2176)
// Rows past the last full group (n_out % 16) are not repacked: the matmul computes them with
// the row kernels. A process-wide cache keyed by the weight's address shares one repacked copy
// between sessions; while repacking, the source pages of the rows done are handed back to the
// kernel every few MiB (madvise MADV_PAGEOUT, contents kept), so resident memory stays about
// the file size, also at the peak of load. MINFER_REPACK=0 turns repacking off (zero-copy mmap).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/dtype.h"

namespace minfer::cpu {

constexpr int kRepackRows = 16;

// How Q8_0 and Q4_0 quants are stored, per architecture: the form its integer products take
// with the least work. x86's vpdpbusd multiplies unsigned by signed bytes: Q8_0 stored biased
// (XOR 0x80: the element + 128), Q4_0 as in GGUF (nibble = weight + 8). ARM's SDOT / SMMLA
// multiply signed by signed: Q8_0 stored as in GGUF; Q4_0 with each nibble XOR 8, i.e. the
// weight as a 4-bit two's complement number, so that byte << 4 and byte & 0xf0 are the low
// and high weights times 16 (two instructions per 32 weights instead of four; the kernels
// convert the 16x integer sums with 4 fraction bits, exactly).
#if defined(__aarch64__)
constexpr uint8_t kRepackQ8Xor = 0x00;
constexpr uint8_t kRepackQ4Xor = 0x88;
#else
constexpr uint8_t kRepackQ8Xor = 0x80;
constexpr uint8_t kRepackQ4Xor = 0x00;
#endif

struct RepackedWeight {
  DType type = DType::F32;
  int64_t n_in = 0, n_out = 0;
  int64_t n_groups = 0;        // n_out / 16
  int64_t n_blocks = 0;        // n_in / repack_block_elems(type)
  size_t block_bytes = 0;      // one block of a group (288 ... 3360, the layouts above)
  uint8_t* data = nullptr;     // [n_groups][n_blocks][block_bytes], 64-byte aligned (huge-page chunks)
  ~RepackedWeight();
  const uint8_t* group(int64_t g) const { return data + static_cast<size_t>(g * n_blocks) * block_bytes; }
};

bool repack_supported(DType t);
int64_t repack_block_elems(DType t); // elements per row in one block: 256 (super-block types) or 32
bool repack_enabled();               // MINFER_REPACK != 0

// Repacks W [n_in, n_out] (memory [n_out][n_in] in `type`), or returns the cached copy of the
// same address. nullptr when the type is not supported or n_out < 16.
// release_source: hand the source pages back to the kernel afterwards (only when every reader
// of the tensor reads the repacked copy: matmul, and get_rows through unrepack_row).
std::shared_ptr<const RepackedWeight> repack_weight(DType type, const void* data, int64_t n_in, int64_t n_out,
                                                    bool release_source);

// The original GGUF bytes of row `row` (< n_groups * 16) of a repacked weight: out gets
// row_bytes(type, n_in) bytes. Lets get_rows read a repacked tied embedding.
void unrepack_row(const RepackedWeight& w, int64_t row, uint8_t* out);

// Q6_K: byte offset of the quants in a block, and the unsigned 6-bit value (0..63) of element
// e (0..255) of row r (0..15) of a repacked block (the layout above).
constexpr size_t kQ6KRepackedQuants = 32 + 256;
inline int q6_k_repacked_u(const uint8_t* blk, int r, int e) {
  const uint8_t* q = blk + kQ6KRepackedQuants + 192 * (e / 16) + 4 * r + e % 4;
  const int v = e % 16 / 4;
  if (v < 3) return q[64 * v] & 0x3f;
  return (q[0] >> 6) | (q[64] >> 6) << 2 | (q[128] >> 6) << 4;
}

// IQ4_XS: byte offset of the quants in a block (after d[16] and ls[8][16]).
constexpr size_t kIQ4XSRepackedQuants = 32 + 128;
// Q5_K / Q3_K / Q2_K: where the arrays of the layouts above lie in a block. The bit planes hm
// sit next to the quants they go with, so a kernel reads a block front to back (one stream
// for the hardware prefetcher; an array read alongside from the end of the block halves the
// decode bandwidth).
//   Q5_K  per sub-block pair p at 320 + 640p: hm[2p] | hm[2p+1] | qs[p] (512 bytes)
//   Q3_K  per sub-block pair b (32 elements) at 288 + 192b: hm[b] | q2[2b] | q2[2b+1]
//   Q2_K  q2[s] at 320 + 64s
inline size_t q5_k_hm_offset(int s) { return 320 + 640 * (s / 2) + 64 * (s % 2); }
inline size_t q5_k_qs_offset(int p) { return 320 + 640 * p + 128; }
inline size_t q3_k_hm_offset(int b) { return 288 + 192 * b; }
inline size_t q3_k_q2_offset(int s) { return 288 + 192 * (s / 2) + 64 + 64 * (s % 2); }
inline size_t q2_k_q2_offset(int s) { return 320 + 64 * s; }

// Q2_K / Q3_K: the low 2 bits (0..3) of element i (0..15) of a sub-block of row r, from its
// 64-byte q2 vector.
inline int k_repacked_low2(const uint8_t* q2, int r, int i) { return (q2[4 * r + i % 4] >> (2 * (i / 4))) & 3; }

// Q3_K / Q5_K: the hmask / fifth bit of element i (0..31) of row r, from a 64-byte hm vector
// (bit i/4 of byte 4r + i%4).
inline int k_repacked_bit(const uint8_t* hm, int r, int i) { return (hm[4 * r + i % 4] >> (i / 4)) & 1; }

// Repacks without the cache and without releasing the source (tests).
std::unique_ptr<RepackedWeight> repack_weight_uncached(DType type, const void* data, int64_t n_in, int64_t n_out);

// Bytes of one repacked block of a group (the layouts above; 0 when unsupported). Constant, so
// a kernel that names its type streams blocks of a compile-time size (its prefetch unrolled).
constexpr size_t repack_block_bytes(DType t) {
  switch (t) {
    case DType::Q4_0: return 288;
    case DType::Q5_0: return 352;
    case DType::Q5_1: return 384;
    case DType::Q4_1: return 320;
    case DType::Q8_0: return 544;
    case DType::Q4_K: return 64 + 256 + 2048;
    case DType::Q5_K: return 320 + 4 * 640;
    case DType::Q3_K: return 288 + 8 * 192;
    case DType::Q2_K: return 320 + 1024;
    case DType::Q6_K: return kQ6KRepackedQuants + 16 * 192;
    case DType::F16:
    case DType::BF16: return 32 * kRepackRows * 2;
    case DType::IQ4_NL: return 288;
    case DType::IQ4_XS: return kIQ4XSRepackedQuants + 2048;
    default: return 0;
  }
}

}  // namespace minfer::cpu
