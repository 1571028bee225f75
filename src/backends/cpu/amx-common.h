// Helpers shared by the AMX kernel files (compiled with the AMX + AVX-512 flags only). Internal.
//
//   amx::configure({{16, 64}, {16, 64}, {}, {}, {16, 32}, ...});  // tmm0..7: rows, bytes per row
//   ... _tile_loadd / _tile_dpbssd / _tile_stored ...
//   _tile_release();
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace minfer::cpu::amx {

struct TileShape {
  uint8_t rows = 0;
  uint16_t colsb = 0;  // bytes per row
};

// Palette 1 with the shapes of tmm0..tmm7 (unused tiles: {}), for this thread until released.
inline void configure(const TileShape (&shapes)[8]) {
  struct alignas(64) TileConfig {
    uint8_t palette = 1;
    uint8_t start_row = 0;
    uint8_t reserved[14] = {};
    uint16_t colsb[16] = {};
    uint8_t rows[16] = {};
  } c;
  for (int t = 0; t < 8; ++t) c.rows[t] = shapes[t].rows, c.colsb[t] = shapes[t].colsb;
  // Not _tile_loadconfig: GCC 12's tells the compiler that only the first 8 bytes are read,
  // so the stores of the rest may be dropped.
  __asm__ volatile("ldtilecfg %0" : : "m"(c));
}

// A buffer of n bytes, 64-byte aligned, grown on demand and kept for the next call.
struct AlignedScratch {
  AlignedScratch() = default;
  AlignedScratch(const AlignedScratch&) = delete;
  AlignedScratch& operator=(const AlignedScratch&) = delete;
  uint8_t* get(size_t n) {
    if (size_ < n) {
      delete[] raw_;
      raw_ = new uint8_t[n + 64];
      size_ = n;
    }
    return reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(raw_) + 63) & ~uintptr_t{63});
  }
  ~AlignedScratch() { delete[] raw_; }

 private:
  uint8_t* raw_ = nullptr;
  size_t size_ = 0;
};

}  // namespace minfer::cpu::amx
