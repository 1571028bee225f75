#include "template/text.h"

#include <locale.h>
#include <wctype.h>

#include <algorithm>

namespace minfer::jinja {

size_t utf8_invalid_at(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    const unsigned c = p[i];
    if (c < 0x80) { ++i; continue; }
    size_t len = 0;
    uint32_t cp = 0;
    if ((c & 0xE0) == 0xC0) { len = 2; cp = c & 0x1F; }
    else if ((c & 0xF0) == 0xE0) { len = 3; cp = c & 0x0F; }
    else if ((c & 0xF8) == 0xF0) { len = 4; cp = c & 0x07; }
    else return i;
    if (i + len > n) return i;
    for (size_t k = 1; k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    // Reject overlong forms, surrogates and code points past U+10FFFF.
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
        (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF)
      return i;
    i += len;
  }
  return std::string_view::npos;
}

bool is_ascii(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

size_t utf8_length(std::string_view s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

std::vector<uint32_t> utf8_decode(std::string_view s) {
  std::vector<uint32_t> out;
  out.reserve(s.size());
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  for (size_t i = 0; i < s.size();) {
    const unsigned c = p[i];
    if (c < 0x80) { out.push_back(c); ++i; continue; }
    size_t len = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : 4;
    uint32_t cp = c & (len == 2 ? 0x1F : len == 3 ? 0x0F : 0x07);
    for (size_t k = 1; k < len && i + k < s.size(); ++k) cp = (cp << 6) | (p[i + k] & 0x3F);
    out.push_back(cp);
    i += len;
  }
  return out;
}

std::string utf8_encode(const std::vector<uint32_t>& cps, size_t begin, size_t end) {
  std::string out;
  for (size_t i = begin; i < end; ++i) utf8_append(out, cps[i]);
  return out;
}

bool py_isspace(uint32_t cp) {
  if (cp < 0x80) return cp == ' ' || (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x1F);
  return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
         cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

namespace {

// glibc's C.UTF-8 locale carries the Unicode character classes and simple case mappings.
locale_t utf8_locale() {
  static locale_t loc = newlocale(LC_CTYPE_MASK, "C.UTF-8", static_cast<locale_t>(nullptr));
  return loc;
}

}  // namespace

bool py_isalpha(uint32_t cp) {
  if (cp < 0x80) return (cp | 0x20) >= 'a' && (cp | 0x20) <= 'z';
  locale_t loc = utf8_locale();
  return loc && iswalpha_l(static_cast<wint_t>(cp), loc);
}

bool py_isdigit(uint32_t cp) {
  if (cp < 0x80) return cp >= '0' && cp <= '9';
  return false;
}

bool py_isupper(uint32_t cp) {
  if (cp < 0x80) return cp >= 'A' && cp <= 'Z';
  locale_t loc = utf8_locale();
  return loc && iswupper_l(static_cast<wint_t>(cp), loc);
}

bool py_islower(uint32_t cp) {
  if (cp < 0x80) return cp >= 'a' && cp <= 'z';
  locale_t loc = utf8_locale();
  return loc && iswlower_l(static_cast<wint_t>(cp), loc);
}

bool py_isprintable(uint32_t cp) {
  if (cp < 0x20 || cp == 0x7F) return false;
  if (cp < 0x7F) return true;
  if (cp <= 0xA0 || cp == 0xAD) return false;  // C1 controls, no-break space, soft hyphen
  if (cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200F) || (cp >= 0x2028 && cp <= 0x202F) ||
      (cp >= 0x205F && cp <= 0x206F) || cp == 0x3000 || cp == 0xFEFF ||
      (cp >= 0xFFF9 && cp <= 0xFFFB) || cp == 0xFFFE || cp == 0xFFFF)
    return false;
  if ((cp >= 0xD800 && cp <= 0xF8FF) || cp >= 0xF0000) return false;  // surrogates, private use
  return true;
}

uint32_t cp_upper(uint32_t cp) {
  if (cp < 0x80) return (cp >= 'a' && cp <= 'z') ? cp - 32 : cp;
  locale_t loc = utf8_locale();
  return loc ? static_cast<uint32_t>(towupper_l(static_cast<wint_t>(cp), loc)) : cp;
}

uint32_t cp_lower(uint32_t cp) {
  if (cp < 0x80) return (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp;
  locale_t loc = utf8_locale();
  return loc ? static_cast<uint32_t>(towlower_l(static_cast<wint_t>(cp), loc)) : cp;
}

std::string str_upper(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  if (is_ascii(s)) {
    for (char c : s) out += (c >= 'a' && c <= 'z') ? static_cast<char>(c - 32) : c;
    return out;
  }
  for (uint32_t cp : utf8_decode(s)) {
    if (cp == 0xDF) { out += "SS"; continue; }  // full case mapping of ß, as Python does
    utf8_append(out, cp_upper(cp));
  }
  return out;
}

std::string str_lower(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  if (is_ascii(s)) {
    for (char c : s) out += (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c;
    return out;
  }
  for (uint32_t cp : utf8_decode(s)) utf8_append(out, cp_lower(cp));
  return out;
}

std::string py_strip(std::string_view s, bool left, bool right, const std::string* chars) {
  std::vector<uint32_t> set;
  if (chars) set = utf8_decode(*chars);
  auto strip_cp = [&](uint32_t cp) {
    return chars ? std::find(set.begin(), set.end(), cp) != set.end() : py_isspace(cp);
  };
  if (is_ascii(s) && (!chars || is_ascii(*chars))) {
    size_t b = 0, e = s.size();
    if (left) while (b < e && strip_cp(static_cast<unsigned char>(s[b]))) ++b;
    if (right) while (e > b && strip_cp(static_cast<unsigned char>(s[e - 1]))) --e;
    return std::string(s.substr(b, e - b));
  }
  std::vector<uint32_t> cps = utf8_decode(s);
  size_t b = 0, e = cps.size();
  if (left) while (b < e && strip_cp(cps[b])) ++b;
  if (right) while (e > b && strip_cp(cps[e - 1])) --e;
  return utf8_encode(cps, b, e);
}

}  // namespace minfer::jinja
