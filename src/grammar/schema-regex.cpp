// A JSON Schema `pattern` (json-schema-parts.h) -> GBNF for the string's contents as they are
// written inside the quotes: a pattern character that JSON must escape (", \, control
// characters) is matched in its escaped form, everything else as itself.
#include <algorithm>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/utf8.h"
#include "grammar/json-schema-parts.h"

namespace minfer::schema {
namespace {

using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;  // inclusive, sorted, disjoint once normalized

Ranges normalize(Ranges r) {
  std::sort(r.begin(), r.end());
  Ranges out;
  for (const auto& [lo, hi] : r) {
    if (!out.empty() && lo <= out.back().second + 1) {
      out.back().second = std::max(out.back().second, hi);
    } else {
      out.emplace_back(lo, hi);
    }
  }
  return out;
}

Ranges complement(const Ranges& r) {  // r normalized
  Ranges out;
  uint32_t next = 0;
  for (const auto& [lo, hi] : r) {
    if (lo > next) out.emplace_back(next, lo - 1);
    next = hi + 1;
  }
  if (next <= 0x10ffff) out.emplace_back(next, 0x10ffff);
  return out;
}

bool contains(const Ranges& r, uint32_t cp) {
  return std::any_of(r.begin(), r.end(), [&](const auto& p) { return cp >= p.first && cp <= p.second; });
}

std::string class_char(uint32_t cp) {
  if ((cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || (cp >= '0' && cp <= '9')) return std::string(1, static_cast<char>(cp));
  if (cp <= 0xff) return fmt::format("\\x{:02X}", cp);
  if (cp <= 0xffff) return fmt::format("\\u{:04X}", cp);
  return fmt::format("\\U{:08X}", cp);
}

// JSON's escaped form of a character that must be escaped inside a string.
std::string json_escape(uint32_t cp) {
  switch (cp) {
    case '"': return "\\\"";
    case '\\': return "\\\\";
    case '\n': return "\\n";
    case '\r': return "\\r";
    case '\t': return "\\t";
    case '\b': return "\\b";
    case '\f': return "\\f";
    default: return fmt::format("\\u{:04x}", cp);
  }
}


// The set of characters `r` as JSON string contents: the characters that stand for themselves
// as one class, the rest by their escapes.
std::string emit_set(const Ranges& set) {
  const Ranges raw_excluded = normalize({{0, 0x1f}, {'"', '"'}, {'\\', '\\'}});
  Ranges raw;
  for (const auto& [lo, hi] : set) {  // set minus raw_excluded
    uint32_t a = lo;
    for (const auto& [xlo, xhi] : raw_excluded) {
      if (xhi < a || xlo > hi) continue;
      if (xlo > a) raw.emplace_back(a, xlo - 1);
      a = xhi + 1;
    }
    if (a <= hi && a >= lo) raw.emplace_back(a, hi);
  }
  std::vector<std::string> alts;
  if (raw.size() == 1 && raw[0].first == raw[0].second) {  // one character: a literal
    std::string utf8;
    utf8_append(utf8, raw[0].first);
    alts.push_back(gbnf_literal(utf8));
  } else if (!raw.empty()) {
    // A class, negated when that is shorter (the usual [^...] case).
    const Ranges comp = complement(raw);
    const bool neg = comp.size() < raw.size();
    std::string c = neg ? "[^" : "[";
    for (const auto& [lo, hi] : neg ? comp : raw) c += lo == hi ? class_char(lo) : class_char(lo) + "-" + class_char(hi);
    alts.push_back(c + "]");
  }
  for (const uint32_t cp : {uint32_t{'"'}, uint32_t{'\\'}})
    if (contains(set, cp)) alts.push_back(gbnf_literal(json_escape(cp)));
  for (uint32_t cp = 0; cp < 0x20; ++cp)
    if (contains(set, cp)) alts.push_back(gbnf_literal(json_escape(cp)));
  if (alts.empty()) return "";
  if (alts.size() == 1) return alts[0];
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
  return out + ")";
}

Ranges digits() { return {{'0', '9'}}; }
Ranges words() { return normalize({{'a', 'z'}, {'A', 'Z'}, {'0', '9'}, {'_', '_'}}); }
Ranges spaces() { return normalize({{' ', ' '}, {'\t', '\r'}, {0xa0, 0xa0}, {0x2028, 0x2029}, {0xfeff, 0xfeff}}); }

class RegexParser {
 public:
  RegexParser(std::string_view re) : re_(re) {}

  Expected<std::string> run(const std::string& chr) {
    bool head = false, tail = false;
    size_t end = re_.size();
    if (end > 0 && re_[0] == '^') {
      head = true;
      p_ = 1;
    }
    if (end > p_ && re_[end - 1] == '$' && (end < 2 || re_[end - 2] != '\\')) {
      tail = true;
      --end;
    }
    end_ = end;
    auto body = alternation();
    if (!body) return body.error();
    if (p_ < end_) return fail(fmt::format("unexpected '{}'", re_[p_]));
    if ((head || tail) && top_alternatives_ > 1)
      return fail_at(0, "an anchor beside a top-level '|': group the alternatives, as in ^(a|b)$");
    std::string out = *body;
    if (!head) out = chr + "* " + out;
    if (!tail) out = out + " " + chr + "*";
    return "(" + out + ")";
  }

 private:
  std::string_view re_;
  size_t p_ = 0, end_ = 0;
  int depth_ = 0;
  int top_alternatives_ = 0;

  Error fail_at(size_t at, const std::string& what) const {
    return Error{fmt::format("pattern {:?} at offset {}: {}", std::string(re_), at, what)};
  }
  Error fail(const std::string& what) const { return fail_at(p_, what); }
  bool at_end() const { return p_ >= end_; }
  char peek() const { return at_end() ? '\0' : re_[p_]; }

  Expected<uint32_t> utf8() {
    const auto c = static_cast<unsigned char>(re_[p_]);
    const int n = c < 0x80 ? 0 : (c >> 5) == 6 ? 1 : (c >> 4) == 14 ? 2 : (c >> 3) == 30 ? 3 : -1;
    if (n < 0) return fail("invalid UTF-8");
    uint32_t cp = n == 0 ? c : c & (0x3f >> n);
    for (int i = 1; i <= n; ++i) {
      if (p_ + static_cast<size_t>(i) >= end_) return fail("invalid UTF-8");
      const auto b = static_cast<unsigned char>(re_[p_ + static_cast<size_t>(i)]);
      if ((b & 0xc0) != 0x80) return fail("invalid UTF-8");
      cp = (cp << 6) | (b & 0x3f);
    }
    p_ += static_cast<size_t>(n) + 1;
    return cp;
  }

  Expected<uint32_t> hex(int n) {
    uint32_t v = 0;
    for (int i = 0; i < n; ++i) {
      const char h = peek();
      const int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
      if (d < 0) return fail(fmt::format("expected {} hex digits", n));
      v = v * 16 + static_cast<uint32_t>(d);
      ++p_;
    }
    return v;
  }

  // After a backslash: a character class escape (set) or one character.
  Expected<Ranges> escape(bool in_class) {
    if (at_end()) return fail("a pattern cannot end with '\\'");
    const size_t at = p_;
    const char e = re_[p_++];
    auto one = [](uint32_t cp) { return Ranges{{cp, cp}}; };
    switch (e) {
      case 'd': return digits();
      case 'w': return words();
      case 's': return spaces();
      case 'D': case 'W': case 'S': {
        if (in_class) return fail_at(at - 1, fmt::format("'\\{}' inside a class is not supported", e));
        return complement(e == 'D' ? digits() : e == 'W' ? words() : spaces());
      }
      case 'n': return one('\n');
      case 'r': return one('\r');
      case 't': return one('\t');
      case 'f': return one('\f');
      case 'v': return one('\v');
      case '0': return one(0);
      case 'x': { auto v = hex(2); if (!v) return v.error(); return one(*v); }
      case 'u': { auto v = hex(4); if (!v) return v.error(); return one(*v); }
      default: break;
    }
    if (e == 'b' && in_class) return one('\b');
    if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') || (e >= '0' && e <= '9'))
      return fail_at(at - 1, fmt::format("'\\{}' is not supported (backreferences, word boundaries and property classes are not)", e));
    --p_;
    auto cp = utf8();
    if (!cp) return cp.error();
    return one(*cp);
  }

  Expected<std::string> char_class() {
    const size_t at = p_ - 1;
    bool neg = false;
    if (peek() == '^') {
      neg = true;
      ++p_;
    }
    Ranges set;
    bool first = true;
    while (true) {
      if (at_end()) return fail_at(at, "unterminated character class");
      if (peek() == ']' && !first) break;
      first = false;
      auto lo = member();
      if (!lo) return lo.error();
      if (peek() == '-' && p_ + 1 < end_ && re_[p_ + 1] != ']' && lo->size() == 1 && lo->front().first == lo->front().second) {
        ++p_;
        auto hi = member();
        if (!hi) return hi.error();
        if (hi->size() != 1 || hi->front().first != hi->front().second) return fail("a class range ends in a class escape");
        if (hi->front().first < lo->front().first) return fail("a class range runs backwards");
        set.emplace_back(lo->front().first, hi->front().first);
      } else {
        set.insert(set.end(), lo->begin(), lo->end());
      }
    }
    ++p_;  // ']'
    set = normalize(set);
    if (neg) set = complement(set);
    std::string e = emit_set(set);
    if (e.empty()) return fail_at(at, "the class matches nothing");
    return e;
  }

  Expected<Ranges> member() {
    if (peek() == '\\') {
      ++p_;
      return escape(true);
    }
    auto cp = utf8();
    if (!cp) return cp.error();
    return Ranges{{*cp, *cp}};
  }

  Expected<std::string> atom() {
    const char c = peek();
    if (c == '(') {
      const size_t at = p_++;
      if (peek() == '?') {
        if (p_ + 1 < end_ && re_[p_ + 1] == ':') {
          p_ += 2;
        } else {
          return fail_at(at, "lookarounds and named groups are not supported (only (...) and (?:...))");
        }
      }
      if (++depth_ > 64) return fail_at(at, "groups nested deeper than 64");
      auto inner = alternation();
      --depth_;
      if (!inner) return inner.error();
      if (peek() != ')') return fail_at(at, "unclosed group");
      ++p_;
      return "(" + *inner + ")";
    }
    if (c == '[') {
      ++p_;
      return char_class();
    }
    if (c == '.') {
      ++p_;
      return emit_set(complement(normalize({{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}})));
    }
    if (c == '\\') {
      ++p_;
      auto set = escape(false);
      if (!set) return set.error();
      return emit_set(*set);
    }
    if (c == '^' || c == '$') return fail(fmt::format("'{}' is supported only at the start ('^') or end ('$') of the pattern", c));
    if (c == '*' || c == '+' || c == '?' || c == '{') return fail(fmt::format("'{}' has nothing to repeat", c));
    auto cp = utf8();
    if (!cp) return cp.error();
    return emit_set({{*cp, *cp}});
  }

  Expected<int> count() {
    const size_t at = p_;
    int v = 0;
    while (!at_end() && peek() >= '0' && peek() <= '9') {
      v = v * 10 + (peek() - '0');
      if (v > 4096) return fail_at(at, "repetition bound above 4096");
      ++p_;
    }
    if (p_ == at) return fail("expected a number in {m,n}");
    return v;
  }

  Expected<std::string> quantified() {
    auto a = atom();
    if (!a) return a.error();
    std::string out = *a;
    const char c = peek();
    if (c == '*' || c == '+' || c == '?') {
      ++p_;
      out = "(" + out + ")" + c;
    } else if (c == '{') {
      const size_t at = p_++;
      auto m = count();
      if (!m) return m.error();
      std::string q = fmt::format("{{{}", *m);
      if (peek() == ',') {
        ++p_;
        q += ",";
        if (peek() != '}') {
          auto n = count();
          if (!n) return n.error();
          if (*n < *m) return fail_at(at, "{m,n} with n < m");
          q += std::to_string(*n);
        }
      }
      if (peek() != '}') return fail_at(at, "unclosed {m,n}");
      ++p_;
      out = "(" + out + ")" + q + "}";
    } else {
      return out;
    }
    if (peek() == '?') ++p_;  // lazy: the same language
    if (peek() == '*' || peek() == '+' || peek() == '?' || peek() == '{') return fail("a quantifier after a quantifier");
    return out;
  }

  Expected<std::string> sequence() {
    std::string out;
    while (!at_end() && peek() != '|' && peek() != ')') {
      auto q = quantified();
      if (!q) return q.error();
      out += (out.empty() ? "" : " ") + *q;
    }
    return out.empty() ? std::string("\"\"") : out;
  }

  Expected<std::string> alternation() {
    std::vector<std::string> alts;
    while (true) {
      auto s = sequence();
      if (!s) return s.error();
      alts.push_back(std::move(*s));
      if (peek() != '|') break;
      ++p_;
    }
    if (depth_ == 0) top_alternatives_ = static_cast<int>(alts.size());
    if (alts.size() == 1) return alts[0];
    std::string out = "(";
    for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
    return out + ")";
  }
};

}  // namespace

std::string gbnf_class_chars(std::string_view ch) {
  const auto c = static_cast<unsigned char>(ch[0]);
  const int n = c < 0x80 ? 0 : (c >> 5) == 6 ? 1 : (c >> 4) == 14 ? 2 : 3;
  uint32_t cp = n == 0 ? c : c & (0x3f >> n);
  for (size_t i = 1; i < ch.size(); ++i) cp = (cp << 6) | (static_cast<unsigned char>(ch[i]) & 0x3f);
  return class_char(cp);
}

Expected<std::string> regex_to_gbnf(std::string_view re, const std::string& chr) { return RegexParser(re).run(chr); }

}  // namespace minfer::schema
