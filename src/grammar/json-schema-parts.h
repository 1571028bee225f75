// The pieces json-schema.cpp builds grammars from: GBNF literals, decimal ranges and string
// patterns. Each returns a GBNF expression (text that can stand inside an alternative).
//
//   gbnf_literal("a\"b")            -> "a\"b" as a quoted GBNF literal
//   int_range_gbnf(-5, 12)          -> the decimal texts of -5 .. 12 (no leading zeros, no -0)
//   regex_to_gbnf("^[a-z]+$", "c")  -> the JSON string contents the pattern matches
//
// Internal to src/grammar/.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"

namespace minfer::schema {

// The GBNF literal matching exactly these bytes (UTF-8 text).
std::string gbnf_literal(std::string_view bytes);

// One UTF-8 character as it is written inside a GBNF [class].
std::string gbnf_class_chars(std::string_view utf8_char);

// The decimal integers in [lo, hi]; an absent bound is open (then at most kMaxDigits digits).
// Empty optional: the range is empty.
constexpr int kMaxDigits = 16;
std::optional<std::string> int_range_gbnf(std::optional<int64_t> lo, std::optional<int64_t> hi);

// JSON numbers (fraction allowed, no exponent) between integral bounds, each inclusive or open.
struct Bound {
  int64_t v = 0;
  bool open = false;  // exclusive
};
std::optional<std::string> number_range_gbnf(std::optional<Bound> lo, std::optional<Bound> hi);

// A regular expression (ECMA 262 subset: literals, escapes \d \w \s \D \W \S \. and friends,
// classes with ranges and negation, '.', groups (...) and (?:...), '|', the quantifiers
// * + ? {m} {m,} {m,n} (lazy forms mean the same language), '^' at the start and '$' at the
// end) -> the GBNF for the contents of a JSON string that it matches somewhere (unanchored
// sides take any characters). `chr` names the rule for one JSON string character. Errors name
// the construct and its offset.
Expected<std::string> regex_to_gbnf(std::string_view re, const std::string& chr);

}  // namespace minfer::schema
