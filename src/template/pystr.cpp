// Python string and number conversions with CPython's rules.
#include <wctype.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

#include "template/error.h"
#include "template/filters-impl.h"
#include "template/text.h"

namespace minfer::jinja {

std::string html_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

namespace {

// Strips Python whitespace and removes '_' between digits; nullopt on a misplaced '_'.
std::optional<std::string> clean_number(const std::string& s, bool allow_hex) {
  std::string t = py_strip(s, true, true, nullptr);
  std::string out;
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i] != '_') {
      out += t[i];
      continue;
    }
    auto digit = [&](char c) { return std::isdigit(static_cast<unsigned char>(c)) || (allow_hex && std::isxdigit(static_cast<unsigned char>(c))); };
    if (i == 0 || i + 1 >= t.size() || !digit(t[i + 1]) || !(digit(t[i - 1]) || (allow_hex && std::isalpha(static_cast<unsigned char>(t[i - 1])))))
      return std::nullopt;
  }
  return out;
}

}  // namespace

std::optional<double> parse_py_float(const std::string& s) {
  auto c = clean_number(s, false);
  if (!c || c->empty()) return std::nullopt;
  std::string t = *c;
  size_t i = 0;
  if (t[0] == '+' || t[0] == '-') i = 1;
  std::string rest = str_lower(t.substr(i));
  if (rest == "inf" || rest == "infinity" || rest == "nan") {
    const double v = rest == "nan" ? std::nan("") : INFINITY;
    return t[0] == '-' ? -v : v;
  }
  // digits [. digits] [e [sign] digits], at least one digit in the mantissa.
  size_t p = i, digits = 0;
  while (p < t.size() && std::isdigit(static_cast<unsigned char>(t[p]))) ++p, ++digits;
  if (p < t.size() && t[p] == '.') {
    ++p;
    while (p < t.size() && std::isdigit(static_cast<unsigned char>(t[p]))) ++p, ++digits;
  }
  if (!digits) return std::nullopt;
  if (p < t.size() && (t[p] | 0x20) == 'e') {
    ++p;
    if (p < t.size() && (t[p] == '+' || t[p] == '-')) ++p;
    size_t ed = 0;
    while (p < t.size() && std::isdigit(static_cast<unsigned char>(t[p]))) ++p, ++ed;
    if (!ed) return std::nullopt;
  }
  if (p != t.size()) return std::nullopt;
  return std::strtod(t.c_str(), nullptr);
}

std::optional<int64_t> parse_py_int(const std::string& s, int64_t base) {
  if (base != 0 && (base < 2 || base > 36)) type_error("int() base must be >= 2 and <= 36, or 0");
  std::string t = py_strip(s, true, true, nullptr);
  bool neg = false;
  size_t i = 0;
  if (i < t.size() && (t[i] == '+' || t[i] == '-')) neg = t[i++] == '-';
  std::string body = t.substr(i);
  auto prefix = [&](char p) { return body.size() >= 2 && body[0] == '0' && (body[1] | 0x20) == p; };
  bool had_prefix = false;
  if ((base == 0 || base == 16) && prefix('x')) { base = 16; had_prefix = true; }
  else if ((base == 0 || base == 8) && prefix('o')) { base = 8; had_prefix = true; }
  else if ((base == 0 || base == 2) && prefix('b')) { base = 2; had_prefix = true; }
  if (had_prefix) {
    body = body.substr(2);
    if (!body.empty() && body[0] == '_') body = body.substr(1);
  }
  if (base == 0) {
    base = 10;
    // Python refuses leading zeros in base 0 ("010"), except for zero itself.
    if (body.size() > 1 && body[0] == '0' && body.find_first_not_of("0_") != std::string::npos) return std::nullopt;
  }
  if (body.empty()) return std::nullopt;
  std::string digits;
  for (size_t k = 0; k < body.size(); ++k) {
    const char c = body[k];
    if (c == '_') {
      if (k == 0 || k + 1 >= body.size() || body[k + 1] == '_') return std::nullopt;
      continue;
    }
    int d = std::isdigit(static_cast<unsigned char>(c)) ? c - '0'
            : std::isalpha(static_cast<unsigned char>(c)) ? (c | 0x20) - 'a' + 10 : 99;
    if (d >= base) return std::nullopt;
    digits += c;
  }
  errno = 0;
  const unsigned long long v = std::strtoull(digits.c_str(), nullptr, static_cast<int>(base));
  if (errno == ERANGE || v > static_cast<unsigned long long>(INT64_MAX) + (neg ? 1 : 0))
    fail(ErrorKind::kUnsupported, fmt::format("integer '{}' does not fit in 64 bits", s));
  return neg ? static_cast<int64_t>(0 - v) : static_cast<int64_t>(v);
}

int64_t float_to_int(double f) {
  if (!(std::fabs(f) < 9.2e18)) fail(ErrorKind::kUnsupported, fmt::format("integer {} does not fit in 64 bits", f));
  return static_cast<int64_t>(f);
}

std::string py_replace(const std::string& s, const std::string& old, const std::string& rep, int64_t count) {
  std::string out;
  if (old.empty()) {
    // Python inserts `rep` before every code point and at the end, up to `count` times.
    std::vector<uint32_t> cps = utf8_decode(s);
    int64_t n = 0;
    for (size_t i = 0; i <= cps.size(); ++i) {
      if (count < 0 || n < count) {
        out += rep;
        ++n;
      }
      if (i < cps.size()) utf8_append(out, cps[i]);
    }
    return out;
  }
  size_t pos = 0;
  int64_t n = 0;
  while (count < 0 || n < count) {
    const size_t hit = s.find(old, pos);
    if (hit == std::string::npos) break;
    out.append(s, pos, hit - pos);
    out += rep;
    pos = hit + old.size();
    ++n;
  }
  out.append(s, pos, std::string::npos);
  return out;
}

Value py_round(const Value& v, int64_t ndigits) {
  if (!v.is_float()) {
    const int64_t x = v.get_int();
    if (ndigits >= 0) return Value(x);
    if (ndigits < -18) return Value(int64_t{0});
    int64_t p = 1;
    for (int64_t i = 0; i < -ndigits; ++i) p *= 10;
    int64_t q = x / p, r = x % p;
    if (r < 0) { r += p; --q; }
    if (2 * r > p || (2 * r == p && (q & 1))) ++q;  // round half to even
    int64_t out;
    if (__builtin_mul_overflow(q, p, &out)) fail(ErrorKind::kUnsupported, "integer overflow in round()");
    return Value(out);
  }
  const double f = v.as_double();
  if (!std::isfinite(f) || ndigits > 308) return Value(f);
  if (ndigits >= 0) {
    // printf rounds the exact binary value half-to-even, as CPython's round() does.
    return Value(std::strtod(fmt::format("{:.{}f}", f, ndigits).c_str(), nullptr));
  }
  const double p = std::pow(10.0, static_cast<double>(-ndigits));
  double y = f / p;
  double r = std::nearbyint(y);
  return Value(r * p);
}

std::string jinja_title(const std::string& s) {
  // re.split(r"([-\s({\[<]+)") then item[0].upper() + item[1:].lower() for each piece.
  std::vector<uint32_t> cps = utf8_decode(s);
  auto is_sep = [](uint32_t cp) { return cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<' || py_isspace(cp); };
  std::string out;
  size_t i = 0;
  while (i < cps.size()) {
    const bool sep = is_sep(cps[i]);
    size_t j = i;
    while (j < cps.size() && is_sep(cps[j]) == sep) ++j;
    for (size_t k = i; k < j; ++k) utf8_append(out, k == i ? cp_upper(cps[k]) : cp_lower(cps[k]));
    i = j;
  }
  return out;
}

std::string py_title(const std::string& s) {
  std::string out;
  bool prev_cased = false;
  for (uint32_t cp : utf8_decode(s)) {
    const bool cased = cp_upper(cp) != cp || cp_lower(cp) != cp;
    if (cased) {
      utf8_append(out, prev_cased ? cp_lower(cp) : cp_upper(cp));
    } else {
      utf8_append(out, cp);
    }
    prev_cased = cased;
  }
  return out;
}

std::vector<std::string> py_split(const std::string& s, const std::string& sep, int64_t maxsplit) {
  if (sep.empty()) fail(ErrorKind::kType, "empty separator");
  std::vector<std::string> out;
  size_t pos = 0;
  while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
    const size_t hit = s.find(sep, pos);
    if (hit == std::string::npos) break;
    out.push_back(s.substr(pos, hit - pos));
    pos = hit + sep.size();
  }
  out.push_back(s.substr(pos));
  return out;
}

std::vector<std::string> py_rsplit(const std::string& s, const std::string& sep, int64_t maxsplit) {
  if (sep.empty()) fail(ErrorKind::kType, "empty separator");
  std::vector<std::string> out;
  size_t end = s.size();
  while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
    if (end < sep.size()) break;
    const size_t hit = s.rfind(sep, end - sep.size());
    if (hit == std::string::npos) break;
    out.push_back(s.substr(hit + sep.size(), end - hit - sep.size()));
    end = hit;
  }
  out.push_back(s.substr(0, end));
  std::reverse(out.begin(), out.end());
  return out;
}

std::vector<std::string> py_split_ws(const std::string& s, int64_t maxsplit, bool from_right) {
  std::vector<uint32_t> cps = utf8_decode(s);
  std::vector<std::string> out;
  if (!from_right) {
    size_t i = 0;
    while (i < cps.size()) {
      while (i < cps.size() && py_isspace(cps[i])) ++i;
      if (i >= cps.size()) break;
      if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
        out.push_back(utf8_encode(cps, i, cps.size()));  // the remainder keeps its trailing spaces
        break;
      }
      size_t j = i;
      while (j < cps.size() && !py_isspace(cps[j])) ++j;
      out.push_back(utf8_encode(cps, i, j));
      i = j;
    }
    return out;
  }
  size_t e = cps.size();
  while (e > 0) {
    while (e > 0 && py_isspace(cps[e - 1])) --e;
    if (e == 0) break;
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
      out.push_back(utf8_encode(cps, 0, e));  // the remainder keeps its leading spaces
      break;
    }
    size_t b = e;
    while (b > 0 && !py_isspace(cps[b - 1])) --b;
    out.push_back(utf8_encode(cps, b, e));
    e = b;
  }
  std::reverse(out.begin(), out.end());
  return out;
}

bool py_isalnum_extra(uint32_t cp) { return iswalnum(static_cast<wint_t>(cp)) || py_isalpha(cp); }

}  // namespace minfer::jinja
