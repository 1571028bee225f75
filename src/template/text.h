// UTF-8 and Python-str helpers for the Jinja engine. Python strings index by code point, so
// every length, index and slice in a template works on code points, never on bytes.
//
//   std::vector<uint32_t> cps = utf8_decode("héllo");   // 5 code points
//   std::string s; utf8_append(s, 0x1F600);
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/utf8.h"

namespace minfer::jinja {

// Returns the byte offset of the first invalid sequence, or npos when `s` is valid UTF-8.
size_t utf8_invalid_at(std::string_view s);
bool is_ascii(std::string_view s);
size_t utf8_length(std::string_view s);
std::vector<uint32_t> utf8_decode(std::string_view s);  // input must be valid UTF-8
using minfer::utf8_append;  // core/utf8.h
std::string utf8_encode(const std::vector<uint32_t>& cps, size_t begin, size_t end);

// Python's str.isspace() set (ASCII whitespace, \x1c-\x1f, \x85, \xa0 and Unicode spaces).
bool py_isspace(uint32_t cp);
bool py_isalpha(uint32_t cp);
bool py_isdigit(uint32_t cp);
bool py_isupper(uint32_t cp);
bool py_islower(uint32_t cp);
bool py_isprintable(uint32_t cp);  // for repr(): what Python writes literally

// Simple (one-to-one) case mapping; ß upper-cases to "SS" like Python in `str_upper`.
uint32_t cp_upper(uint32_t cp);
uint32_t cp_lower(uint32_t cp);
std::string str_upper(std::string_view s);
std::string str_lower(std::string_view s);

// Python str.strip/lstrip/rstrip: `chars` empty means whitespace.
std::string py_strip(std::string_view s, bool left, bool right, const std::string* chars);

}  // namespace minfer::jinja
