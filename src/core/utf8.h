// UTF-8 encoding of one code point, and a well-formedness check (lead and continuation bytes;
// overlong forms are not looked for), shared by the text layers (template, grammar, server).
//
//   std::string s;
//   utf8_append(s, 0x20AC);   // "€" (3 bytes)
//   utf8_valid(s);            // true; utf8_valid("\xE2\x82") is false (cut short)
//   utf8_valid_len("a\xE2\x82");  // 1: the whole characters before the cut one
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace minfer {

// Appends the UTF-8 form of cp (<= U+10FFFF) to out.
inline void utf8_append(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// The length of s's longest prefix of whole UTF-8 characters (s.size() when all of it is).
inline size_t utf8_valid_len(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return i;
    for (size_t k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) >> 6) != 2) return i;
    i += n;
  }
  return s.size();
}

// Whether s is a sequence of whole UTF-8 characters.
inline bool utf8_valid(std::string_view s) { return utf8_valid_len(s) == s.size(); }

}  // namespace minfer
