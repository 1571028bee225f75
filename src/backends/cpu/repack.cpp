#include "backends/cpu/repack.h"

#include <algorithm>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string_view>
#include <type_traits>
#include <vector>
#include <mutex>

#include "core/status.h"
#include "quant/blocks.h"

namespace minfer::cpu {
namespace {

// The 32-element nibble types (Q4_0, Q4_1, Q5_0, Q5_1): d[16] | m[16] for the types with a
// min | qs[4][16][4] | hm[4][2] for the types with a fifth bit (layouts in repack.h).
template <class Block>
constexpr bool kHasMin = requires(Block x) { x.m; };
template <class Block>
constexpr bool kHasHigh = requires(Block x) { x.qh; };

template <class Block>
void repack_block_nibbles(const Block* rows[kRepackRows], int64_t b, uint8_t* out) {
  auto* d = reinterpret_cast<uint16_t*>(out);
  uint8_t* qs = out + (kHasMin<Block> ? 64 : 32);
  uint64_t hm[4][2] = {};
  for (int r = 0; r < kRepackRows; ++r) {
    const Block& blk = rows[r][b];
    d[r] = blk.d;
    uint32_t qh = 0;
    if constexpr (kHasMin<Block>) d[kRepackRows + r] = blk.m;
    if constexpr (kHasHigh<Block>) std::memcpy(&qh, blk.qh, 4);
    for (int k = 0; k < 4; ++k)
      for (int j = 0; j < 4; ++j) {
        qs[(k * kRepackRows + r) * 4 + j] = blk.qs[4 * k + j] ^ (std::is_same_v<Block, BlockQ4_0> ? kRepackQ4Xor : 0);
        for (int h = 0; h < 2; ++h)
          hm[k][h] |= static_cast<uint64_t>((qh >> (16 * h + 4 * k + j)) & 1u) << (4 * r + j);
      }
  }
  if constexpr (kHasHigh<Block>) std::memcpy(qs + 256, hm, sizeof hm);
}

// The inverse for row r of a group.
template <class Block>
void unrepack_block_nibbles(const uint8_t* in, int r, Block& o) {
  const auto* d = reinterpret_cast<const uint16_t*>(in);
  const uint8_t* qs = in + (kHasMin<Block> ? 64 : 32);
  o.d = d[r];
  if constexpr (kHasMin<Block>) o.m = d[kRepackRows + r];
  uint64_t hm[4][2];
  if constexpr (kHasHigh<Block>) std::memcpy(hm, qs + 256, sizeof hm);
  uint32_t qh = 0;
  for (int k = 0; k < 4; ++k)
    for (int j = 0; j < 4; ++j) {
      o.qs[4 * k + j] = qs[(k * kRepackRows + r) * 4 + j] ^ (std::is_same_v<Block, BlockQ4_0> ? kRepackQ4Xor : 0);
      if constexpr (kHasHigh<Block>)
        for (int h = 0; h < 2; ++h) qh |= static_cast<uint32_t>((hm[k][h] >> (4 * r + j)) & 1u) << (16 * h + 4 * k + j);
    }
  if constexpr (kHasHigh<Block>) std::memcpy(o.qh, &qh, 4);
}

void repack_block_q8_0(const BlockQ8_0* rows[kRepackRows], int64_t b, uint8_t* out) {
  auto* d = reinterpret_cast<uint16_t*>(out);
  uint8_t* qs = out + 32;
  for (int r = 0; r < kRepackRows; ++r) {
    d[r] = rows[r][b].d;
    for (int k = 0; k < 8; ++k)
      for (int j = 0; j < 4; ++j)
        qs[(k * kRepackRows + r) * 4 + j] = static_cast<uint8_t>(rows[r][b].qs[4 * k + j]) ^ kRepackQ8Xor;
  }
}

// Q4_K: d[16] | dmin[16] (f16) | sc[8][16] | m[8][16] (6-bit values as bytes) |
// qs[4][8][16][4]: qs[p][c][r][j] = row r's qs byte 32p + 4c + j (low nibble: sub-block 2p,
// high nibble: sub-block 2p + 1; element 4c + j of that sub-block). Q5_K starts the same.
// (Q5_K places qs[p] at q5_k_qs_offset(p) instead of 320 + 512p.)
template <class Block>
size_t q4_k_qs_offset(int p) { return std::is_same_v<Block, BlockQ5_K> ? q5_k_qs_offset(p) : 320 + 512 * static_cast<size_t>(p); }

template <class Block>
void repack_block_q4_k(const Block* rows[kRepackRows], int64_t b, uint8_t* out) {
  auto* d = reinterpret_cast<uint16_t*>(out);
  uint8_t* sc = out + 64;
  uint8_t* mn = out + 64 + 128;
  for (int r = 0; r < kRepackRows; ++r) {
    const Block& blk = rows[r][b];
    d[r] = blk.d;
    d[kRepackRows + r] = blk.dmin;
    for (int j = 0; j < 8; ++j) {
      int s, m;
      unpack_scale_min_k4(blk.scales, j, &s, &m);
      sc[j * kRepackRows + r] = static_cast<uint8_t>(s);
      mn[j * kRepackRows + r] = static_cast<uint8_t>(m);
    }
    for (int p = 0; p < 4; ++p)
      for (int c = 0; c < 8; ++c)
        for (int j = 0; j < 4; ++j) out[q4_k_qs_offset<Block>(p) + (c * kRepackRows + r) * 4 + j] = blk.qs[32 * p + 4 * c + j];
  }
}

// The inverse for row r of a group (Q4_K, and the Q4_K part of Q5_K).
template <class Block>
void unrepack_block_q4_k(const uint8_t* in, int r, Block& o) {
  const auto* d = reinterpret_cast<const uint16_t*>(in);
  o.d = d[r];
  o.dmin = d[kRepackRows + r];
  int sc[8], m[8];
  for (int j = 0; j < 8; ++j) {
    sc[j] = in[64 + j * kRepackRows + r];
    m[j] = in[64 + 128 + j * kRepackRows + r];
  }
  for (int j = 0; j < 4; ++j) {  // the 12-byte 6-bit packing (inverse of the repack)
    o.scales[j] = static_cast<uint8_t>(sc[j] | ((sc[j + 4] >> 4) << 6));
    o.scales[j + 4] = static_cast<uint8_t>(m[j] | ((m[j + 4] >> 4) << 6));
    o.scales[j + 8] = static_cast<uint8_t>((sc[j + 4] & 0x0f) | ((m[j + 4] & 0x0f) << 4));
  }
  for (int p = 0; p < 4; ++p)
    for (int c = 0; c < 8; ++c)
      for (int j = 0; j < 4; ++j) o.qs[32 * p + 4 * c + j] = in[q4_k_qs_offset<Block>(p) + (c * kRepackRows + r) * 4 + j];
}

// Sets the bit of element i (0..31) of row r in a 64-byte hm vector (the fifth bit of Q5_K,
// the hmask bit of Q3_K): bit i / 4 of byte 4r + i % 4 (k_repacked_bit in repack.h reads it).
void set_repacked_bit(uint8_t* hm, int r, int i, int bit) {
  uint8_t& byte = hm[4 * r + i % 4];
  byte = static_cast<uint8_t>(byte | bit << (i / 4));
}

// Q5_K: the Q4_K layout | hm[8][16][4] with the fifth bit of element e = bit e / 32 of the GGUF
// qh[e % 32].
void repack_block_q5_k(const BlockQ5_K* rows[kRepackRows], int64_t b, uint8_t* out) {
  repack_block_q4_k(rows, b, out);
  for (int s = 0; s < 8; ++s) std::memset(out + q5_k_hm_offset(s), 0, 64);
  for (int r = 0; r < kRepackRows; ++r)
    for (int e = 0; e < 256; ++e) set_repacked_bit(out + q5_k_hm_offset(e / 32), r, e % 32, (rows[r][b].qh[e % 32] >> (e / 32)) & 1);
}

// The low 2 bits of element e of a GGUF Q2_K / Q3_K block: element 128h + 32s + l is bits
// 2s+1..2s of qs[32h + l].
int k_low2(const uint8_t* qs, int e) { return (qs[32 * (e / 128) + e % 32] >> (2 * (e / 32 % 4))) & 3; }

// The 2-bit vectors q2[s] of a Q2_K / Q3_K block (at out + offset(s)): byte q2[s][r][j] holds
// element 16s + 4v + j of row r in bits 2v+1..2v (k_repacked_low2 in repack.h reads it).
void repack_low2(const uint8_t* qs, int r, uint8_t* out, size_t (*offset)(int)) {
  for (int e = 0; e < 256; ++e) {
    uint8_t& byte = out[offset(e / 16) + 4 * r + e % 4];
    byte = static_cast<uint8_t>(byte | k_low2(qs, e) << (2 * (e % 16 / 4)));
  }
}

void unrepack_low2(const uint8_t* in, size_t (*offset)(int), int r, uint8_t* qs) {
  std::memset(qs, 0, 64);
  for (int e = 0; e < 256; ++e)
    qs[32 * (e / 128) + e % 32] = static_cast<uint8_t>(qs[32 * (e / 128) + e % 32] | k_repacked_low2(in + offset(e / 16), r, e % 16) << (2 * (e / 32 % 4)));
}

// Q2_K: d[16] | dmin[16] (f16) | scm[16][16] (the GGUF scale bytes: scale in the low nibble,
// min in the high) | q2[16][16][4]. The GGUF size.
void repack_block_q2_k(const BlockQ2_K* rows[kRepackRows], int64_t b, uint8_t* out) {
  auto* d = reinterpret_cast<uint16_t*>(out);
  uint8_t* scm = out + 64;
  std::memset(out + q2_k_q2_offset(0), 0, 1024);
  for (int r = 0; r < kRepackRows; ++r) {
    const BlockQ2_K& blk = rows[r][b];
    d[r] = blk.d;
    d[kRepackRows + r] = blk.dmin;
    for (int j = 0; j < 16; ++j) scm[j * kRepackRows + r] = blk.scales[j];
    repack_low2(blk.qs, r, out, q2_k_q2_offset);
  }
}

// 6-bit scale j of a GGUF Q3_K block (stored with +32): low nibble in scales[j % 8] (j < 8:
// low half), top 2 bits in bits 2(j/4)+1..2(j/4) of scales[8 + j % 4].
int q3_k_scale(const uint8_t* s, int j) {
  const int low = j < 8 ? (s[j] & 0x0f) : (s[j - 8] >> 4);
  return low | ((s[8 + j % 4] >> (2 * (j / 4))) & 3) << 4;
}

// Q3_K: d[16] f16 | sc[16][16] int8 (scale - 32) | q2[16][16][4] | hm[8][16][4] with the
// hmask bit of element e (bit e / 32 of the GGUF hmask[e % 32]).
void repack_block_q3_k(const BlockQ3_K* rows[kRepackRows], int64_t b, uint8_t* out) {
  auto* d = reinterpret_cast<uint16_t*>(out);
  auto* sc = reinterpret_cast<int8_t*>(out + 32);
  std::memset(out + q3_k_hm_offset(0), 0, 8 * 192);
  for (int r = 0; r < kRepackRows; ++r) {
    const BlockQ3_K& blk = rows[r][b];
    d[r] = blk.d;
    for (int j = 0; j < 16; ++j) sc[j * kRepackRows + r] = static_cast<int8_t>(q3_k_scale(blk.scales, j) - 32);
    repack_low2(blk.qs, r, out, q3_k_q2_offset);
    for (int e = 0; e < 256; ++e) set_repacked_bit(out + q3_k_hm_offset(e / 32), r, e % 32, (blk.hmask[e % 32] >> (e / 32)) & 1);
  }
}

// F16 / BF16: 32 elements of a row, as repack_rows sees them; repacked element-major
// w[e][r] (repack.h).
struct BlockU16x32 {
  uint16_t v[32];
};

void repack_block_u16(const BlockU16x32* rows[kRepackRows], int64_t b, uint8_t* out) {
  auto* w = reinterpret_cast<uint16_t*>(out);
  for (int e = 0; e < 32; ++e)
    for (int r = 0; r < kRepackRows; ++r) w[e * kRepackRows + r] = rows[r][b].v[e];
}

// IQ4_XS: d[16] f16 | ls[8][16] int8 (sub-block scale - 32) | qs[8][4][16][4]: qs[s][k][r][j]
// = row r's qs byte 16s + 4k + j (low nibble: element 32s + 4k + j, high: 32s + 16 + 4k + j).
void repack_block_iq4_xs(const BlockIQ4_XS* rows[kRepackRows], int64_t b, uint8_t* out) {
  auto* d = reinterpret_cast<uint16_t*>(out);
  auto* ls = reinterpret_cast<int8_t*>(out + 32);
  uint8_t* qs = out + kIQ4XSRepackedQuants;
  for (int r = 0; r < kRepackRows; ++r) {
    const BlockIQ4_XS& blk = rows[r][b];
    d[r] = blk.d;
    for (int s = 0; s < 8; ++s) {
      const int sc = ((blk.scales_l[s / 2] >> (4 * (s % 2))) & 0x0f) | (((blk.scales_h >> (2 * s)) & 3) << 4);
      ls[s * kRepackRows + r] = static_cast<int8_t>(sc - 32);
      for (int k = 0; k < 4; ++k)
        for (int j = 0; j < 4; ++j) qs[((s * 4 + k) * kRepackRows + r) * 4 + j] = blk.qs[16 * s + 4 * k + j];
    }
  }
}

// The unsigned 6-bit value (0..63; the weight is u - 32) of element e of a GGUF Q6_K block.
int q6_k_u(const BlockQ6_K& blk, int e) {
  const int h = e / 128, q = e % 128;
  const int low = (blk.ql[64 * h + q % 64] >> (4 * (q / 64))) & 0x0f;
  const int high = (blk.qh[32 * h + q % 32] >> (2 * (q / 32))) & 3;
  return low | high << 4;
}

// Q6_K: d[16] f16 | sc[16][16] (int8) | q[16][3][16][4] (repack.h): per sub-block s, byte
// q[s][v][r][j] holds chunk v's value u(16s + 4v + j) in bits 5..0 and bits 2v+1..2v of chunk
// 3's u(16s + 12 + j) in bits 7..6. Same size as the GGUF blocks.
void repack_block_q6_k(const BlockQ6_K* rows[kRepackRows], int64_t b, uint8_t* out) {
  auto* d = reinterpret_cast<uint16_t*>(out);
  auto* sc = reinterpret_cast<int8_t*>(out + 32);
  uint8_t* qs = out + kQ6KRepackedQuants;  // [16][3][16][4]
  for (int r = 0; r < kRepackRows; ++r) {
    const BlockQ6_K& blk = rows[r][b];
    d[r] = blk.d;
    for (int j = 0; j < 16; ++j) sc[j * kRepackRows + r] = blk.scales[j];
    for (int s = 0; s < 16; ++s)
      for (int j = 0; j < 4; ++j) {
        const int u3 = q6_k_u(blk, 16 * s + 12 + j);
        for (int v = 0; v < 3; ++v) {
          const int u = q6_k_u(blk, 16 * s + 4 * v + j);
          qs[((s * 3 + v) * kRepackRows + r) * 4 + j] = static_cast<uint8_t>(u | ((u3 >> (2 * v)) & 3) << 6);
        }
      }
  }
}

// Asks the kernel to reclaim the whole pages inside [begin, end) (MADV_PAGEOUT keeps the
// contents: a file-backed mapping re-reads them if touched, anonymous memory is swapped or
// kept; never zeroed). Partial pages at the edges stay: they may hold bytes still in use.
// Returns where the next range may start: end rounded down to a page, or begin if that is
// before it, so consecutive calls release each whole page once.
const uint8_t* release_pages(const uint8_t* begin, const uint8_t* end) {
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t lo = (reinterpret_cast<uintptr_t>(begin) + page - 1) / page * page;
  const uintptr_t hi = reinterpret_cast<uintptr_t>(end) / page * page;
  if (hi <= lo) return begin;
#ifdef MADV_PAGEOUT
  madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_PAGEOUT);
#endif
  return reinterpret_cast<const uint8_t*>(hi);
}

// Source bytes repacked between two releases: small against a large tensor (a 151936-row
// token embedding is 75-150 MB), large against the cost of one madvise.
constexpr size_t kReleaseStep = size_t{2} << 20;

// Repacks group after group; with release_source, hands the source rows done back to the
// kernel every kReleaseStep bytes, so both copies of a large tensor are never resident at once
// (only the repacked rows: the tail rows are still read in place).
template <class Block, class Fn>
void repack_rows(const void* data, size_t row_bytes, RepackedWeight& w, bool release_source, Fn block_fn) {
  const auto* src = static_cast<const uint8_t*>(data);
  const uint8_t* released = src;  // source pages before it are handed back
  for (int64_t g = 0; g < w.n_groups; ++g) {
    const Block* rows[kRepackRows];
    for (int r = 0; r < kRepackRows; ++r)
      rows[r] = reinterpret_cast<const Block*>(src + static_cast<size_t>(g * kRepackRows + r) * row_bytes);
    for (int64_t b = 0; b < w.n_blocks; ++b) block_fn(rows, b, w.data + static_cast<size_t>(g * w.n_blocks + b) * w.block_bytes);
    const uint8_t* done = src + static_cast<size_t>((g + 1) * kRepackRows) * row_bytes;
    if (release_source && (static_cast<size_t>(done - released) >= kReleaseStep || g + 1 == w.n_groups))
      released = release_pages(released, done);
  }
}

// MINFER_HUGE_PAGES=0: 4 KiB pages. Huge pages make decode ~1.2x faster (Qwen2.5-0.5B Q4_0 tg64:
// 65.4 vs 53.9 t/s), but a fresh huge page can be slow to fault in: in a VM whose free memory
// goes back to the host (free page reporting), faulting in a 330 MiB copy took ~0.6 s more.
bool huge_pages_enabled() {
  static const bool on = [] {
    const char* e = std::getenv("MINFER_HUGE_PAGES");
    return !(e && std::string_view(e) == "0");
  }();
  return on;
}

// Repacked weights live in chunks of 64 MiB, 2 MiB-aligned and marked for transparent huge
// pages (THP in "madvise" mode is the common default): a decode step streams every weight once,
// and on 4 KiB pages each page is a TLB miss. Small weights (a MoE layer's experts are ~1 MiB
// each) share chunks, bump-allocated; a chunk goes back when its last weight is freed (untouched
// pages of its tail are never resident). Larger weights get a region of their own.
//
// Chunks and regions are anonymous mappings of their own, not malloc's: a model unloaded in a
// long-lived server (keep_alive, --models-max) gives every byte back. Through posix_memalign, each
// region freed raised glibc's dynamic mmap threshold to its size (up to 32 MiB), so later
// buffers below it came from malloc's heaps and stayed there: a server whose three models were
// loaded and evicted ~60 times grew from 140 to 349 MB resident with none loaded
// (tests/server/test_chaos_pool.py).
class WeightArena {
 public:
  uint8_t* alloc(size_t bytes) {
    const size_t n = std::max<size_t>(64, (bytes + 63) / 64 * 64);  // (0 bytes would point past a full chunk)
    std::lock_guard<std::mutex> lock(mu_);
    if (n > kChunk / 4) {
      uint8_t* p = huge_region(n);
      if (p) regions_[p] = round_huge(n);
      return p;
    }
    if (chunks_.empty() || chunks_.back().used + n > kChunk) {
      uint8_t* base = huge_region(kChunk);
      if (!base) return nullptr;
      chunks_.push_back({base, 0, 0});
    }
    Chunk& c = chunks_.back();
    uint8_t* p = c.base + c.used;
    c.used += n;
    ++c.live;
    return p;
  }
  void free(uint8_t* p) {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < chunks_.size(); ++i) {
      Chunk& c = chunks_[i];
      if (p < c.base || p >= c.base + kChunk) continue;
      if (--c.live == 0) {
        munmap(c.base, kChunk);
        chunks_.erase(chunks_.begin() + static_cast<std::ptrdiff_t>(i));
      }
      return;
    }
    auto it = regions_.find(p);  // a region of its own
    MINFER_ASSERT(it != regions_.end());
    munmap(it->first, it->second);
    regions_.erase(it);
  }

 private:
  static constexpr size_t kHuge = size_t{2} << 20, kChunk = size_t{64} << 20;
  struct Chunk {
    uint8_t* base;
    size_t used;
    int live;
  };
  static size_t round_huge(size_t bytes) { return (bytes + kHuge - 1) / kHuge * kHuge; }
  // An anonymous mapping of round_huge(bytes), 2 MiB-aligned: kHuge more is mapped and the
  // unaligned head and the tail past the end are unmapped again.
  static uint8_t* huge_region(size_t bytes) {
    const size_t n = round_huge(bytes);
    void* m = mmap(nullptr, n + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return nullptr;
    auto* raw = static_cast<uint8_t*>(m);
    const auto addr = reinterpret_cast<uintptr_t>(raw);
    uint8_t* p = raw + ((kHuge - addr % kHuge) % kHuge);
    if (p > raw) munmap(raw, static_cast<size_t>(p - raw));
    if (p + n < raw + n + kHuge) munmap(p + n, static_cast<size_t>(raw + n + kHuge - (p + n)));
#ifdef MADV_HUGEPAGE  // Linux; macOS has no transparent huge pages
    if (huge_pages_enabled()) madvise(p, n, MADV_HUGEPAGE);  // advice only: without THP it stays 4 KiB pages
#endif
    return p;
  }
  std::mutex mu_;
  std::vector<Chunk> chunks_;
  std::map<uint8_t*, size_t> regions_;  // a region's start -> its mapped bytes
};

WeightArena& weight_arena() {
  static WeightArena* a = new WeightArena();  // never destroyed: weights may outlive static destructors
  return *a;
}

std::unique_ptr<RepackedWeight> repack(DType type, const void* data, int64_t n_in, int64_t n_out, bool release_source) {
  const int64_t block_elems = repack_block_elems(type);
  if (!repack_supported(type) || n_out < kRepackRows || n_in % block_elems != 0) return nullptr;
  auto w = std::make_unique<RepackedWeight>();
  w->type = type;
  w->n_in = n_in;
  w->n_out = n_out;
  w->n_groups = n_out / kRepackRows;
  w->n_blocks = n_in / block_elems;
  w->block_bytes = repack_block_bytes(type);
  const size_t bytes = static_cast<size_t>(w->n_groups * w->n_blocks) * w->block_bytes;
  w->data = weight_arena().alloc(bytes);
  if (!w->data) return nullptr;
  const size_t row = row_bytes(type, n_in);
  switch (type) {
    case DType::Q4_0: repack_rows<BlockQ4_0>(data, row, *w, release_source, repack_block_nibbles<BlockQ4_0>); break;
    case DType::Q5_0: repack_rows<BlockQ5_0>(data, row, *w, release_source, repack_block_nibbles<BlockQ5_0>); break;
    case DType::Q5_1: repack_rows<BlockQ5_1>(data, row, *w, release_source, repack_block_nibbles<BlockQ5_1>); break;
    case DType::Q4_1: repack_rows<BlockQ4_1>(data, row, *w, release_source, repack_block_nibbles<BlockQ4_1>); break;
    case DType::Q8_0: repack_rows<BlockQ8_0>(data, row, *w, release_source, repack_block_q8_0); break;
    case DType::Q4_K: repack_rows<BlockQ4_K>(data, row, *w, release_source, repack_block_q4_k<BlockQ4_K>); break;
    case DType::Q5_K: repack_rows<BlockQ5_K>(data, row, *w, release_source, repack_block_q5_k); break;
    case DType::Q3_K: repack_rows<BlockQ3_K>(data, row, *w, release_source, repack_block_q3_k); break;
    case DType::Q2_K: repack_rows<BlockQ2_K>(data, row, *w, release_source, repack_block_q2_k); break;
    case DType::Q6_K: repack_rows<BlockQ6_K>(data, row, *w, release_source, repack_block_q6_k); break;
    case DType::F16:
    case DType::BF16: repack_rows<BlockU16x32>(data, row, *w, release_source, repack_block_u16); break;
    case DType::IQ4_NL: repack_rows<BlockIQ4_NL>(data, row, *w, release_source, repack_block_nibbles<BlockIQ4_NL>); break;
    case DType::IQ4_XS: repack_rows<BlockIQ4_XS>(data, row, *w, release_source, repack_block_iq4_xs); break;
    default: return nullptr;
  }
  return w;
}

}  // namespace

RepackedWeight::~RepackedWeight() {
  if (data) weight_arena().free(data);
}

void unrepack_row(const RepackedWeight& w, int64_t row, uint8_t* out) {
  const int64_t g = row / kRepackRows;
  const int r = static_cast<int>(row % kRepackRows);
  for (int64_t b = 0; b < w.n_blocks; ++b) {
    const uint8_t* in = w.group(g) + static_cast<size_t>(b) * w.block_bytes;
    const auto* d = reinterpret_cast<const uint16_t*>(in);
    switch (w.type) {
      case DType::Q4_0: unrepack_block_nibbles(in, r, reinterpret_cast<BlockQ4_0*>(out)[b]); break;
      case DType::Q4_1: unrepack_block_nibbles(in, r, reinterpret_cast<BlockQ4_1*>(out)[b]); break;
      case DType::Q5_0: unrepack_block_nibbles(in, r, reinterpret_cast<BlockQ5_0*>(out)[b]); break;
      case DType::Q5_1: unrepack_block_nibbles(in, r, reinterpret_cast<BlockQ5_1*>(out)[b]); break;
      case DType::IQ4_NL: unrepack_block_nibbles(in, r, reinterpret_cast<BlockIQ4_NL*>(out)[b]); break;
      case DType::Q8_0: {
        auto& o = reinterpret_cast<BlockQ8_0*>(out)[b];
        o.d = d[r];
        for (int k = 0; k < 8; ++k)
          for (int j = 0; j < 4; ++j) o.qs[4 * k + j] = static_cast<int8_t>(in[32 + (k * kRepackRows + r) * 4 + j] ^ kRepackQ8Xor);
        break;
      }
      case DType::Q4_K: unrepack_block_q4_k(in, r, reinterpret_cast<BlockQ4_K*>(out)[b]); break;
      case DType::Q5_K: {
        auto& o = reinterpret_cast<BlockQ5_K*>(out)[b];
        unrepack_block_q4_k(in, r, o);
        std::memset(o.qh, 0, sizeof o.qh);
        for (int e = 0; e < 256; ++e)
          o.qh[e % 32] = static_cast<uint8_t>(o.qh[e % 32] | k_repacked_bit(in + q5_k_hm_offset(e / 32), r, e % 32) << (e / 32));
        break;
      }
      case DType::Q2_K: {
        auto& o = reinterpret_cast<BlockQ2_K*>(out)[b];
        o.d = d[r];
        o.dmin = d[kRepackRows + r];
        for (int j = 0; j < 16; ++j) o.scales[j] = in[64 + j * kRepackRows + r];
        unrepack_low2(in, q2_k_q2_offset, r, o.qs);
        break;
      }
      case DType::Q3_K: {
        auto& o = reinterpret_cast<BlockQ3_K*>(out)[b];
        o.d = d[r];
        int sc[16];
        for (int j = 0; j < 16; ++j) sc[j] = static_cast<int8_t>(in[32 + j * kRepackRows + r]) + 32;
        for (int j = 0; j < 8; ++j) o.scales[j] = static_cast<uint8_t>((sc[j] & 0x0f) | (sc[j + 8] & 0x0f) << 4);
        for (int i = 0; i < 4; ++i)  // the top 2 bits (inverse of q3_k_scale)
          o.scales[8 + i] = static_cast<uint8_t>(sc[i] >> 4 | (sc[i + 4] >> 4) << 2 | (sc[i + 8] >> 4) << 4 | (sc[i + 12] >> 4) << 6);
        unrepack_low2(in, q3_k_q2_offset, r, o.qs);
        std::memset(o.hmask, 0, sizeof o.hmask);
        for (int e = 0; e < 256; ++e)
          o.hmask[e % 32] = static_cast<uint8_t>(o.hmask[e % 32] | k_repacked_bit(in + q3_k_hm_offset(e / 32), r, e % 32) << (e / 32));
        break;
      }
      case DType::Q6_K: {
        auto& o = reinterpret_cast<BlockQ6_K*>(out)[b];
        o.d = d[r];
        for (int j = 0; j < 16; ++j) o.scales[j] = static_cast<int8_t>(in[32 + j * kRepackRows + r]);
        std::memset(o.ql, 0, sizeof o.ql);
        std::memset(o.qh, 0, sizeof o.qh);
        for (int e = 0; e < 256; ++e) {  // the GGUF 4 + 2 bit packing (inverse of q6_k_u)
          const int u = q6_k_repacked_u(in, r, e);
          const int h = e / 128, q = e % 128;
          o.ql[64 * h + q % 64] = static_cast<uint8_t>(o.ql[64 * h + q % 64] | ((u & 0x0f) << (4 * (q / 64))));
          o.qh[32 * h + q % 32] = static_cast<uint8_t>(o.qh[32 * h + q % 32] | ((u >> 4) << (2 * (q / 32))));
        }
        break;
      }
      case DType::F16:
      case DType::BF16: {
        auto& o = reinterpret_cast<BlockU16x32*>(out)[b];
        for (int e = 0; e < 32; ++e) o.v[e] = d[e * kRepackRows + r];
        break;
      }
      case DType::IQ4_XS: {
        auto& o = reinterpret_cast<BlockIQ4_XS*>(out)[b];
        o.d = d[r];
        o.scales_h = 0;
        std::memset(o.scales_l, 0, sizeof o.scales_l);
        for (int s = 0; s < 8; ++s) {  // the 4 + 2 bit scale packing (inverse of the repack)
          const int sc = static_cast<int8_t>(in[32 + s * kRepackRows + r]) + 32;
          o.scales_l[s / 2] = static_cast<uint8_t>(o.scales_l[s / 2] | ((sc & 0x0f) << (4 * (s % 2))));
          o.scales_h = static_cast<uint16_t>(o.scales_h | ((sc >> 4) << (2 * s)));
          for (int k = 0; k < 4; ++k)
            for (int j = 0; j < 4; ++j)
              o.qs[16 * s + 4 * k + j] = in[kIQ4XSRepackedQuants + ((s * 4 + k) * kRepackRows + r) * 4 + j];
        }
        break;
      }
      default: MINFER_ASSERT(false && "unrepack_row: type without a repacked layout");
    }
  }
}

static_assert(kQ6KRepackedQuants + 16 * 192 == kRepackRows * sizeof(BlockQ6_K), "Q6_K repacks to the GGUF size");
static_assert(320 + 1024 == kRepackRows * sizeof(BlockQ2_K), "Q2_K repacks to the GGUF size");

int64_t repack_block_elems(DType t) {
  switch (t) {
    case DType::Q2_K:
    case DType::Q3_K:
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K:
    case DType::IQ4_XS: return 256;
    default: return 32;
  }
}

bool repack_supported(DType t) { return repack_block_bytes(t) != 0; }

bool repack_enabled() {
  static const bool on = [] {
    const char* e = std::getenv("MINFER_REPACK");
    return !(e && std::strcmp(e, "0") == 0);
  }();
  return on;
}

std::unique_ptr<RepackedWeight> repack_weight_uncached(DType type, const void* data, int64_t n_in, int64_t n_out) {
  return repack(type, data, n_in, n_out, false);
}

std::shared_ptr<const RepackedWeight> repack_weight(DType type, const void* data, int64_t n_in, int64_t n_out,
                                                    bool release_source) {
  static std::mutex mu;
  static std::map<const void*, std::weak_ptr<const RepackedWeight>> cache;
  auto cached = [&]() -> std::shared_ptr<const RepackedWeight> {
    auto it = cache.find(data);
    if (it == cache.end()) return nullptr;
    auto sp = it->second.lock();
    return sp && sp->type == type && sp->n_in == n_in && sp->n_out == n_out ? sp : nullptr;
  };
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto sp = cached()) return sp;
  }
  // The repack itself runs unlocked, so callers repack different weights in parallel (a MoE
  // layer's experts). Two callers racing on one weight both repack it; the first to finish is
  // kept (the source bytes are read-only, so either copy is the same).
  std::shared_ptr<const RepackedWeight> w = repack(type, data, n_in, n_out, release_source);
  if (!w) return nullptr;
  std::lock_guard<std::mutex> lock(mu);
  if (auto sp = cached()) return sp;
  cache[data] = w;
  return w;
}

}  // namespace minfer::cpu
