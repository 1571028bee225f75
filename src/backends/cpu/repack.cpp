#include "backends/cpu/repack.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "quant/blocks.h"

namespace minfer::cpu {
namespace {

void repack_block_q4_0(const BlockQ4_0* rows[kRepackRows], int64_t b, uint8_t* out) {
  auto* d = reinterpret_cast<uint16_t*>(out);
  uint8_t* qs = out + 32;
  for (int r = 0; r < kRepackRows; ++r) {
    d[r] = rows[r][b].d;
    for (int k = 0; k < 4; ++k)
      for (int j = 0; j < 4; ++j) qs[(k * kRepackRows + r) * 4 + j] = rows[r][b].qs[4 * k + j];
  }
}

void repack_block_q5_0(const BlockQ5_0* rows[kRepackRows], int64_t b, uint8_t* out) {
  auto* d = reinterpret_cast<uint16_t*>(out);
  uint8_t* qs = out + 32;
  uint64_t hm[4][2] = {};
  for (int r = 0; r < kRepackRows; ++r) {
    d[r] = rows[r][b].d;
    uint32_t qh;
    std::memcpy(&qh, rows[r][b].qh, 4);
    for (int k = 0; k < 4; ++k)
      for (int j = 0; j < 4; ++j) {
        qs[(k * kRepackRows + r) * 4 + j] = rows[r][b].qs[4 * k + j];
        for (int h = 0; h < 2; ++h)
          hm[k][h] |= static_cast<uint64_t>((qh >> (16 * h + 4 * k + j)) & 1u) << (4 * r + j);
      }
  }
  std::memcpy(out + 32 + 256, hm, sizeof hm);
}

void repack_block_q8_0(const BlockQ8_0* rows[kRepackRows], int64_t b, uint8_t* out) {
  auto* d = reinterpret_cast<uint16_t*>(out);
  uint8_t* qs = out + 32;
  for (int r = 0; r < kRepackRows; ++r) {
    d[r] = rows[r][b].d;
    for (int k = 0; k < 8; ++k)
      for (int j = 0; j < 4; ++j)
        qs[(k * kRepackRows + r) * 4 + j] = static_cast<uint8_t>(rows[r][b].qs[4 * k + j]) ^ 0x80u;
  }
}

template <class Block, class Fn>
void repack_rows(const void* data, size_t row_bytes, RepackedWeight& w, Fn block_fn) {
  for (int64_t g = 0; g < w.n_groups; ++g) {
    const Block* rows[kRepackRows];
    for (int r = 0; r < kRepackRows; ++r)
      rows[r] = reinterpret_cast<const Block*>(static_cast<const uint8_t*>(data) + static_cast<size_t>(g * kRepackRows + r) * row_bytes);
    for (int64_t b = 0; b < w.n_blocks; ++b) block_fn(rows, b, w.data + static_cast<size_t>(g * w.n_blocks + b) * w.block_bytes);
  }
}

// Asks the kernel to reclaim the source pages (MADV_PAGEOUT keeps the contents: a file-backed
// mapping re-reads them if touched, anonymous memory is swapped or kept; never zeroed).
void release_pages(const void* data, size_t bytes) {
#ifdef MADV_PAGEOUT
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto lo = (reinterpret_cast<uintptr_t>(data) + page - 1) / page * page;
  const auto hi = (reinterpret_cast<uintptr_t>(data) + bytes) / page * page;
  if (hi > lo) madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_PAGEOUT);
#else
  (void)data;
  (void)bytes;
#endif
}

}  // namespace

RepackedWeight::~RepackedWeight() { std::free(data); }

size_t repack_block_bytes(DType t) {
  switch (t) {
    case DType::Q4_0: return 288;
    case DType::Q5_0: return 352;
    case DType::Q8_0: return 544;
    default: return 0;
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
  if (!repack_supported(type) || n_out < kRepackRows || n_in % 32 != 0) return nullptr;
  auto w = std::make_unique<RepackedWeight>();
  w->type = type;
  w->n_in = n_in;
  w->n_out = n_out;
  w->n_groups = n_out / kRepackRows;
  w->n_blocks = n_in / 32;
  w->block_bytes = repack_block_bytes(type);
  const size_t bytes = static_cast<size_t>(w->n_groups * w->n_blocks) * w->block_bytes;
  w->data = static_cast<uint8_t*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64));
  if (!w->data) return nullptr;
  const size_t row = row_bytes(type, n_in);
  switch (type) {
    case DType::Q4_0: repack_rows<BlockQ4_0>(data, row, *w, repack_block_q4_0); break;
    case DType::Q5_0: repack_rows<BlockQ5_0>(data, row, *w, repack_block_q5_0); break;
    case DType::Q8_0: repack_rows<BlockQ8_0>(data, row, *w, repack_block_q8_0); break;
    default: return nullptr;
  }
  return w;
}

std::shared_ptr<const RepackedWeight> repack_weight(DType type, const void* data, int64_t n_in, int64_t n_out,
                                                    bool release_source) {
  static std::mutex mu;
  static std::map<const void*, std::weak_ptr<const RepackedWeight>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(data);
  if (it != cache.end()) {
    if (auto sp = it->second.lock(); sp && sp->type == type && sp->n_in == n_in && sp->n_out == n_out) return sp;
  }
  std::shared_ptr<const RepackedWeight> w = repack_weight_uncached(type, data, n_in, n_out);
  if (!w) return nullptr;
  // Only the repacked rows' pages: the tail rows are still read in place.
  if (release_source) release_pages(data, row_bytes(type, n_in) * static_cast<size_t>(w->n_groups * kRepackRows));
  cache[data] = w;
  return w;
}

}  // namespace minfer::cpu
