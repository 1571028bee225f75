#include "tokenizer/unicode.h"

#include <algorithm>
#include <array>
#include <memory>
#include <vector>

namespace minfer {
namespace {

// Two-stage table built once from the ranges: block[cp >> 8] selects a 256-entry page of
// classes; identical pages are shared (about 170 distinct pages for 4352 blocks).
struct ClassTable {
  std::vector<uint16_t> block;  // [0x1100]
  std::vector<uint8_t> pages;   // [n_pages][256]

  ClassTable() {
    std::vector<uint8_t> flat(0x110000);
    for (size_t i = 0; i < kUnicodeRangeCount; ++i) {
      const uint32_t end = i + 1 < kUnicodeRangeCount ? kUnicodeRanges[i + 1].first : 0x110000;
      std::fill(flat.begin() + kUnicodeRanges[i].first, flat.begin() + end, kUnicodeRanges[i].cls);
    }
    block.resize(0x1100);
    for (uint32_t b = 0; b < 0x1100; ++b) {
      const uint8_t* page = flat.data() + (size_t(b) << 8);
      size_t found = pages.size() / 256;
      for (size_t p = 0; p < pages.size() / 256; ++p) {
        if (std::equal(page, page + 256, pages.data() + p * 256)) {
          found = p;
          break;
        }
      }
      if (found == pages.size() / 256) pages.insert(pages.end(), page, page + 256);
      block[b] = static_cast<uint16_t>(found);
    }
  }
};

const ClassTable& class_table() {
  static const ClassTable t;
  return t;
}

}  // namespace

uint8_t unicode_class(uint32_t cp) {
  if (cp >= 0x110000) return kUnicodeUnassigned;
  const ClassTable& t = class_table();
  return t.pages[(size_t(t.block[cp >> 8]) << 8) | (cp & 0xFF)];
}

size_t utf8_encode(uint32_t cp, char* out) {
  if (cp < 0x80) {
    out[0] = static_cast<char>(cp);
    return 1;
  }
  if (cp < 0x800) {
    out[0] = static_cast<char>(0xC0 | (cp >> 6));
    out[1] = static_cast<char>(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    out[0] = static_cast<char>(0xE0 | (cp >> 12));
    out[1] = static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out[2] = static_cast<char>(0x80 | (cp & 0x3F));
    return 3;
  }
  out[0] = static_cast<char>(0xF0 | (cp >> 18));
  out[1] = static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
  out[2] = static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
  out[3] = static_cast<char>(0x80 | (cp & 0x3F));
  return 4;
}

size_t utf8_incomplete_tail(const char* s, size_t n) {
  // Walk back over at most 3 continuation bytes to a lead byte; the tail is incomplete when
  // the lead announces more bytes than are present.
  for (size_t k = 1; k <= 4 && k <= n; ++k) {
    const uint8_t c = static_cast<uint8_t>(s[n - k]);
    if ((c & 0xC0) == 0x80) continue;  // continuation: keep walking back
    size_t need = 0;
    if ((c & 0xE0) == 0xC0) need = 2;
    else if ((c & 0xF0) == 0xE0) need = 3;
    else if ((c & 0xF8) == 0xF0) need = 4;
    return need > k ? k : 0;
  }
  return 0;
}

}  // namespace minfer
