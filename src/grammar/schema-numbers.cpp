// GBNF literals and decimal ranges for json-schema.cpp (json-schema-parts.h).
//
// A range of same-length digit strings [X, Y] splits on the first digit where they differ:
//   X0 (X[1:] .. 99..9) | [X0+1 - Y0-1] [0-9]{L-1} | Y0 (00..0 .. Y[1:])
// and a range over several lengths is one such range per length.
#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "grammar/json-schema-parts.h"

namespace minfer::schema {

std::string gbnf_literal(std::string_view bytes) {
  std::string out = "\"";
  for (const char ch : bytes) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          out += fmt::format("\\x{:02X}", c);
        } else {
          out += ch;
        }
    }
  }
  return out + "\"";
}

namespace {

std::string digits_any(size_t n) {  // n digits
  if (n == 0) return "";
  return n == 1 ? "[0-9]" : fmt::format("[0-9]{{{}}}", n);
}

std::string digit_class(char lo, char hi) {
  if (lo == hi) return fmt::format("\"{}\"", lo);
  return fmt::format("[{}-{}]", lo, hi);
}

bool all_of(std::string_view s, char c) { return s.find_first_not_of(c) == std::string_view::npos; }

std::string seq(const std::string& a, const std::string& b) {
  if (a.empty()) return b;
  if (b.empty()) return a;
  return a + " " + b;
}

// Same-length digit strings x <= y.
std::string same_length(std::string_view x, std::string_view y) {
  if (x.empty()) return "";
  if (x[0] == y[0]) return seq(fmt::format("\"{}\"", x[0]), same_length(x.substr(1), y.substr(1)));
  const size_t rest = x.size() - 1;
  const bool low_full = all_of(x.substr(1), '0'), high_full = all_of(y.substr(1), '9');
  std::vector<std::string> alts;
  char mid_lo = static_cast<char>(x[0] + 1), mid_hi = static_cast<char>(y[0] - 1);
  if (low_full) {
    mid_lo = x[0];
  } else {
    alts.push_back(seq(fmt::format("\"{}\"", x[0]), same_length(x.substr(1), std::string(rest, '9'))));
  }
  if (high_full) mid_hi = y[0];
  if (mid_lo <= mid_hi) alts.push_back(seq(digit_class(mid_lo, mid_hi), digits_any(rest)));
  if (!high_full) alts.push_back(seq(fmt::format("\"{}\"", y[0]), same_length(std::string(rest, '0'), y.substr(1))));
  if (alts.size() == 1) return alts[0];
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
  return out + ")";
}

int64_t pow10(int n) {
  int64_t p = 1;
  for (int i = 0; i < n; ++i) p *= 10;
  return p;
}

std::string join_alts(const std::vector<std::string>& alts) {
  if (alts.size() == 1) return alts[0];
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
  return out + ")";
}

// Non-negative integers in [a, b] (b absent: open, up to kMaxDigits digits); a <= b.
std::string nonneg(int64_t a, std::optional<int64_t> b) {
  std::vector<std::string> alts;
  const int la = static_cast<int>(std::to_string(a).size());
  const int lb = b ? static_cast<int>(std::to_string(*b).size()) : kMaxDigits;
  for (int len = la; len <= lb; ++len) {
    const int64_t lo = std::max<int64_t>(a, len == 1 ? 0 : pow10(len - 1));
    if (!b && len > la) {  // every longer length, all at once
      alts.push_back(len == kMaxDigits ? "[1-9] " + digits_any(static_cast<size_t>(len - 1))
                                       : fmt::format("[1-9] [0-9]{{{},{}}}", len - 1, kMaxDigits - 1));
      break;
    }
    const int64_t hi = b && len == lb ? *b : pow10(len) - 1;
    if (lo > hi) continue;
    alts.push_back(same_length(std::to_string(lo), std::to_string(hi)));
  }
  return join_alts(alts);
}

}  // namespace

std::optional<std::string> int_range_gbnf(std::optional<int64_t> lo, std::optional<int64_t> hi) {
  if (lo && hi && *lo > *hi) return std::nullopt;
  std::vector<std::string> alts;
  if (!lo || *lo < 0)  // -m for m in [max(1, -hi), -lo]
    alts.push_back("\"-\" " + nonneg(hi && *hi < 0 ? -*hi : 1, lo ? std::optional<int64_t>(-*lo) : std::nullopt));
  if (!hi || *hi >= 0) alts.push_back(nonneg(lo ? std::max<int64_t>(*lo, 0) : 0, hi));
  return join_alts(alts);
}

std::optional<std::string> number_range_gbnf(std::optional<Bound> lo, std::optional<Bound> hi) {
  if (lo && hi && (lo->v > hi->v || (lo->v == hi->v && (lo->open || hi->open)))) return std::nullopt;
  const std::string frac = "(\".\" [0-9]{1,16})?", zero_frac = "(\".\" \"0\"{1,16})?",
                    nonzero_frac = "\".\" [0-9]{0,15} [1-9] [0-9]{0,15}";
  // Magnitudes m with c <= m <= d (or < where open); d absent: unbounded. Nothing: empty.
  auto magnitudes = [&](Bound c, std::optional<Bound> d) -> std::optional<std::string> {
    std::vector<std::string> parts;
    if (d && c.v == d->v) {
      if (c.open || d->open) return std::nullopt;
      return fmt::format("\"{}\" {}", c.v, zero_frac);
    }
    parts.push_back(fmt::format("\"{}\" {}", c.v, c.open ? nonzero_frac : frac));
    if (!d) {
      parts.push_back(nonneg(c.v + 1, std::nullopt) + " " + frac);
    } else {
      if (c.v + 1 <= d->v - 1) parts.push_back(nonneg(c.v + 1, d->v - 1) + " " + frac);
      if (!d->open) parts.push_back(fmt::format("\"{}\" {}", d->v, zero_frac));
    }
    return join_alts(parts);
  };
  std::vector<std::string> alts;
  if (!hi || hi->v > 0 || (hi->v == 0 && !hi->open)) {  // x >= 0
    const Bound c = lo && lo->v >= 0 ? *lo : Bound{0, false};
    if (auto m = magnitudes(c, hi)) alts.push_back(*m);
  }
  if (!lo || lo->v < 0) {  // x = -m, m > 0
    const Bound c = hi && hi->v <= 0 ? Bound{-hi->v, hi->open} : Bound{0, false};
    const std::optional<Bound> d = lo ? std::optional<Bound>(Bound{-lo->v, lo->open}) : std::nullopt;
    if (auto m = magnitudes(c, d)) alts.push_back("\"-\" " + *m);
  }
  if (alts.empty()) return std::nullopt;
  return join_alts(alts);
}

}  // namespace minfer::schema
