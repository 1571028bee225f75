// Code point classes and a lenient UTF-8 decoder for the pre-tokenizers.
//
//   size_t len;
//   uint32_t cp = utf8_decode(text.data() + i, text.size() - i, &len);   // len >= 1
//   if (unicode_is_letter(unicode_class(cp))) ...
//
// The class table is generated from Unicode 15.1 (gen-unicode-table.py), the version of
// llama.cpp's tables, so \p{L}, \p{N}... agree with it code point for code point.
#pragma once

#include <cstddef>
#include <cstdint>

namespace minfer {

// Major general category; kUnicodeWhitespace is or'd in for White_Space code points.
enum UnicodeClass : uint8_t {
  kUnicodeUnassigned = 0,  // Cn
  kUnicodeLetter = 1,      // L*
  kUnicodeMark = 2,        // M*
  kUnicodeNumber = 3,      // N*
  kUnicodePunct = 4,       // P*
  kUnicodeSymbol = 5,      // S*
  kUnicodeSeparator = 6,   // Z*
  kUnicodeOther = 7,       // Cc Cf Cs Co
};
constexpr uint8_t kUnicodeWhitespace = 0x10;
constexpr uint8_t kUnicodeCategoryMask = 0x0f;

struct UnicodeRange {
  uint32_t first;
  uint8_t cls;
};
extern const UnicodeRange kUnicodeRanges[];  // unicode-table.cpp, sorted by `first`
extern const size_t kUnicodeRangeCount;
extern const char kUnicodeVersion[];

// Class of a code point (category | whitespace bit); past U+10FFFF: unassigned.
uint8_t unicode_class(uint32_t cp);

inline bool unicode_is_ws(uint8_t c) { return (c & kUnicodeWhitespace) != 0; }
inline bool unicode_is_letter(uint8_t c) { return (c & kUnicodeCategoryMask) == kUnicodeLetter; }
inline bool unicode_is_number(uint8_t c) { return (c & kUnicodeCategoryMask) == kUnicodeNumber; }
inline bool unicode_is_mark(uint8_t c) { return (c & kUnicodeCategoryMask) == kUnicodeMark; }
inline bool unicode_is_punct(uint8_t c) { return (c & kUnicodeCategoryMask) == kUnicodePunct; }

// Code point used for bytes that do not start a well-formed sequence (classified as a symbol,
// like llama.cpp's replacement of invalid bytes). The bytes themselves are always kept.
constexpr uint32_t kUtf8Invalid = 0xFFFD;

// Decodes one code point from s[0..n) (n >= 1). The lead byte fixes the length and the
// continuation bytes must be 10xxxxxx, as in llama.cpp (overlong forms and surrogates pass);
// anything else, or a value past U+10FFFF, yields kUtf8Invalid with *len = 1.
inline uint32_t utf8_decode(const char* s, size_t n, size_t* len) {
  const auto b = [&](size_t i) { return static_cast<uint8_t>(s[i]); };
  const uint8_t c = b(0);
  *len = 1;
  if (c < 0x80) return c;
  auto cont = [&](size_t i) { return i < n && (b(i) & 0xC0) == 0x80; };
  if ((c & 0xE0) == 0xC0) {
    if (!cont(1)) return kUtf8Invalid;
    *len = 2;
    return (uint32_t(c & 0x1F) << 6) | (b(1) & 0x3F);
  }
  if ((c & 0xF0) == 0xE0) {
    if (!cont(1) || !cont(2)) return kUtf8Invalid;
    *len = 3;
    return (uint32_t(c & 0x0F) << 12) | (uint32_t(b(1) & 0x3F) << 6) | (b(2) & 0x3F);
  }
  if ((c & 0xF8) == 0xF0) {
    if (!cont(1) || !cont(2) || !cont(3)) return kUtf8Invalid;
    const uint32_t cp = (uint32_t(c & 0x07) << 18) | (uint32_t(b(1) & 0x3F) << 12) |
                        (uint32_t(b(2) & 0x3F) << 6) | (b(3) & 0x3F);
    if (cp > 0x10FFFF) return kUtf8Invalid;
    *len = 4;
    return cp;
  }
  return kUtf8Invalid;
}

// Appends the UTF-8 form of cp (<= U+10FFFF) to out; returns the number of bytes (1..4).
size_t utf8_encode(uint32_t cp, char* out);

// Length of the longest suffix of s[0..n) that is an incomplete but so far well-formed UTF-8
// sequence (0..3): the bytes a streaming decoder must hold back.
size_t utf8_incomplete_tail(const char* s, size_t n);

}  // namespace minfer
