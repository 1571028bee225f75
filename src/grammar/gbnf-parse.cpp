// GBNF text -> Grammar (gbnf.h). Groups and repetitions become generated rules, so the matcher
// only sees characters, rule references and the ends of alternatives:
//   x*      -> R ::= x R | (empty)          x+ -> x R with R as for x*
//   x?      -> R ::= x | (empty)            x{m,n} -> m copies of x, then n - m nested x?
#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "grammar/gbnf.h"

namespace minfer {

bool CharSet::matches(uint32_t cp) const {
  bool in = false;
  for (const auto& [lo, hi] : ranges) in = in || (cp >= lo && cp <= hi);
  return in != negated;
}

bool CharSet::matches_any(uint32_t lo, uint32_t hi) const {
  if (!negated) {
    for (const auto& [a, b] : ranges)
      if (a <= hi && b >= lo) return true;
    return false;
  }
  for (const auto& [a, b] : ranges)  // a complement misses [lo, hi] only if one range covers it
    if (a <= lo && b >= hi) return false;
  return true;
}

namespace {

constexpr int kMaxRepeat = 4096;  // {m,n} bounds above this are refused (each copy is a rule)

struct Sym {
  GrammarElem::Kind kind;
  int32_t arg;
};
using Seq = std::vector<Sym>;

class Parser {
 public:
  explicit Parser(std::string_view t) : t_(t) {}

  Expected<Grammar> run() {
    skip(true);
    while (p_ < t_.size()) {
      if (Status st = rule(); !st) return st.error();
      skip(true);
    }
    if (rules_.empty()) return make_error("gbnf: the grammar has no rules");
    for (size_t r = 0; r < names_.size(); ++r)
      if (!defined_[r]) return fail_at(first_use_[r], fmt::format("undefined rule '{}'", names_[r]));
    const auto root = ids_.find("root");
    if (root == ids_.end()) return make_error("gbnf: no 'root' rule (the start rule must be named root)");
    if (Status st = check_left_recursion(); !st) return st.error();
    if (Status st = check_root_finishes(root->second); !st) return st.error();
    return flatten(root->second);
  }

 private:
  std::string_view t_;
  size_t p_ = 0;
  std::map<std::string, int32_t, std::less<>> ids_;
  std::vector<std::string> names_;
  std::vector<bool> defined_, generated_;
  std::vector<size_t> first_use_;
  std::vector<std::vector<Seq>> rules_;  // [rule][alternative]
  std::vector<CharSet> sets_;
  size_t symbols_ = 0;  // elements made by repetitions so far
  static constexpr size_t kMaxSymbols = size_t{1} << 21;
  int depth_ = 0;  // open parentheses
  static constexpr int kMaxDepth = 256;

  Error fail_at(size_t at, const std::string& what) const {
    int line = 1, col = 1;
    for (size_t i = 0; i < at && i < t_.size(); ++i) {
      if (t_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    return Error{fmt::format("gbnf {}:{}: {}", line, col, what)};
  }
  Error fail(const std::string& what) const { return fail_at(p_, what); }

  bool at_end() const { return p_ >= t_.size(); }
  char peek(size_t ahead = 0) const { return p_ + ahead < t_.size() ? t_[p_ + ahead] : '\0'; }
  static bool word_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
  }

  // Spaces, tabs and # comments; newlines too when `newlines` (inside parentheses, after '|').
  void skip(bool newlines) {
    while (!at_end()) {
      const char c = peek();
      if (c == ' ' || c == '\t' || (newlines && (c == '\n' || c == '\r'))) {
        ++p_;
      } else if (c == '#') {
        while (!at_end() && peek() != '\n') ++p_;
      } else {
        break;
      }
    }
  }

  int32_t id(std::string_view name, size_t at) {
    auto it = ids_.find(name);
    if (it != ids_.end()) return it->second;
    const auto r = static_cast<int32_t>(names_.size());
    ids_.emplace(std::string(name), r);
    names_.emplace_back(name);
    defined_.push_back(false);
    generated_.push_back(false);
    first_use_.push_back(at);
    rules_.emplace_back();
    return r;
  }

  int32_t generated(std::vector<Seq> alts, std::string_view base) {
    const int32_t r = id(fmt::format("{}#{}", base, names_.size()), p_);
    defined_[static_cast<size_t>(r)] = generated_[static_cast<size_t>(r)] = true;
    rules_[static_cast<size_t>(r)] = std::move(alts);
    return r;
  }

  Status rule() {
    const size_t at = p_;
    while (!at_end() && word_char(peek())) ++p_;
    if (p_ == at) return fail("expected a rule name");
    const std::string name(t_.substr(at, p_ - at));
    skip(false);
    if (t_.substr(p_, 3) != "::=") return fail(fmt::format("expected '::=' after rule name '{}'", name));
    p_ += 3;
    skip(true);
    const int32_t r = id(name, at);
    if (defined_[static_cast<size_t>(r)]) return fail_at(at, fmt::format("rule '{}' is defined twice", name));
    defined_[static_cast<size_t>(r)] = true;
    auto alts = alternatives(name, false);
    if (!alts) return alts.error();
    rules_[static_cast<size_t>(r)] = std::move(*alts);
    if (peek() == '\r') ++p_;
    if (!at_end() && peek() != '\n') return fail(fmt::format("expected the end of rule '{}'", name));
    return {};
  }

  Expected<std::vector<Seq>> alternatives(const std::string& base, bool nested) {
    std::vector<Seq> alts;
    for (;;) {
      auto s = sequence(base, nested);
      if (!s) return s.error();
      alts.push_back(std::move(*s));
      if (peek() != '|') return alts;
      ++p_;
      skip(true);
    }
  }

  // One code point of a literal or class, with escapes; quote: the closing delimiter.
  Expected<uint32_t> character() {
    if (at_end()) return fail("unexpected end of the grammar");
    const auto c = static_cast<unsigned char>(peek());
    if (c == '\\') {
      const char e = peek(1);
      p_ += 2;
      switch (e) {
        case 'n': return uint32_t{'\n'};
        case 'r': return uint32_t{'\r'};
        case 't': return uint32_t{'\t'};
        case '\\': case '"': case '[': case ']': case '-': case '^': case '\'': return static_cast<uint32_t>(e);
        case 'x': return hex(2);
        case 'u': return hex(4);
        case 'U': return hex(8);
        default: p_ -= 2; return fail(fmt::format("unknown escape '\\{}'", e));
      }
    }
    // UTF-8
    int n = c < 0x80 ? 0 : (c >> 5) == 6 ? 1 : (c >> 4) == 14 ? 2 : (c >> 3) == 30 ? 3 : -1;
    if (n < 0) return fail("invalid UTF-8 in the grammar");
    uint32_t cp = n == 0 ? c : c & (0x3f >> n);
    for (int i = 1; i <= n; ++i) {
      const auto b = static_cast<unsigned char>(peek(static_cast<size_t>(i)));
      if ((b & 0xc0) != 0x80) return fail("invalid UTF-8 in the grammar");
      cp = (cp << 6) | (b & 0x3f);
    }
    p_ += static_cast<size_t>(n) + 1;
    return cp;
  }

  Expected<uint32_t> hex(int digits) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      const char h = peek();
      int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
      if (d < 0) return fail(fmt::format("expected {} hex digits", digits));
      v = v * 16 + static_cast<uint32_t>(d);
      ++p_;
    }
    if (v > 0x10ffff) return fail("code point beyond U+10FFFF");
    return v;
  }

  int32_t set(CharSet s) {
    sets_.push_back(std::move(s));
    return static_cast<int32_t>(sets_.size() - 1);
  }

  Expected<int> number() {
    const size_t at = p_;
    long v = 0;
    while (!at_end() && peek() >= '0' && peek() <= '9') {
      v = v * 10 + (peek() - '0');
      if (v > kMaxRepeat) return fail_at(at, fmt::format("repetition bound above {}", kMaxRepeat));
      ++p_;
    }
    if (p_ == at) return fail("expected a number");
    return static_cast<int>(v);
  }

  // item repeated m .. n times (n < 0: unbounded), appended to seq.
  void repeat(Seq& seq, const Seq& item, int m, int n, const std::string& base) {
    for (int i = 0; i < m; ++i) seq.insert(seq.end(), item.begin(), item.end());
    if (n < 0) {
      const int32_t r = id(fmt::format("{}#{}", base, names_.size()), p_);
      defined_[static_cast<size_t>(r)] = generated_[static_cast<size_t>(r)] = true;
      Seq loop = item;
      loop.push_back({GrammarElem::kRule, r});
      rules_[static_cast<size_t>(r)] = {loop, Seq{}};
      seq.push_back({GrammarElem::kRule, r});
      return;
    }
    int32_t last = -1;
    for (int i = 0; i < n - m; ++i) {
      Seq once = item;
      if (last >= 0) once.push_back({GrammarElem::kRule, last});
      last = generated({once, Seq{}}, base);
    }
    if (last >= 0) seq.push_back({GrammarElem::kRule, last});
  }

  Expected<Seq> sequence(const std::string& base, bool nested) {
    Seq seq;
    size_t last = std::string::npos;  // where the last item starts in seq
    for (;;) {
      const char c = peek();
      const size_t start = seq.size();
      if (c == '"') {
        ++p_;
        while (peek() != '"') {
          if (at_end()) return fail("unterminated string literal");
          auto cp = character();
          if (!cp) return cp.error();
          seq.push_back({GrammarElem::kChars, set(CharSet{{{*cp, *cp}}, false})});
        }
        ++p_;
        last = start;
      } else if (c == '[') {
        ++p_;
        CharSet s;
        if (peek() == '^') {
          s.negated = true;
          ++p_;
        }
        while (peek() != ']') {
          if (at_end()) return fail("unterminated character class");
          auto lo = character();
          if (!lo) return lo.error();
          uint32_t hi = *lo;
          if (peek() == '-' && peek(1) != ']' && p_ + 1 < t_.size()) {
            ++p_;
            auto h = character();
            if (!h) return h.error();
            hi = *h;
            if (hi < *lo) return fail("character range out of order");
          }
          s.ranges.emplace_back(*lo, hi);
        }
        ++p_;
        seq.push_back({GrammarElem::kChars, set(std::move(s))});
        last = start;
      } else if (c == '.') {
        ++p_;
        seq.push_back({GrammarElem::kChars, set(CharSet{{}, true})});
        last = start;
      } else if (c == '(') {
        if (++depth_ > kMaxDepth) return fail(fmt::format("groups nested deeper than {}", kMaxDepth));
        ++p_;
        skip(true);
        auto alts = alternatives(base, true);
        --depth_;
        if (!alts) return alts.error();
        if (peek() != ')') return fail("expected ')'");
        ++p_;
        seq.push_back({GrammarElem::kRule, generated(std::move(*alts), base)});
        last = start;
      } else if (word_char(c)) {
        const size_t at = p_;
        while (!at_end() && word_char(peek())) ++p_;
        const std::string_view name = t_.substr(at, p_ - at);
        seq.push_back({GrammarElem::kRule, id(name, at)});
        last = start;
      } else if (c == '<' || (c == '!' && peek(1) == '<')) {
        return fail("token references (<...>) are not supported: write the token's text as a \"literal\"");
      } else if (c == '*' || c == '+' || c == '?' || c == '{') {
        if (last == std::string::npos || last >= seq.size()) return fail(fmt::format("'{}' with nothing before it", c));
        ++p_;
        int m = 0, n = -1;
        if (c == '+') m = 1;
        if (c == '?') n = 1;
        if (c == '{') {
          skip(false);
          auto a = number();
          if (!a) return a.error();
          m = n = *a;
          skip(false);
          if (peek() == ',') {
            ++p_;
            skip(false);
            n = -1;
            if (peek() != '}') {
              auto b = number();
              if (!b) return b.error();
              n = *b;
              if (n < m) return fail("repetition {m,n} with n < m");
            }
            skip(false);
          }
          if (peek() != '}') return fail("expected '}'");
          ++p_;
        }
        const Seq item(seq.begin() + static_cast<std::ptrdiff_t>(last), seq.end());
        seq.resize(last);
        // Each copy is stored: bound the grammar's size, ({4096}{4096} would be 16M copies).
        symbols_ += item.size() * static_cast<size_t>(std::max(m, n)) + seq.size();
        if (symbols_ > kMaxSymbols)
          return fail(fmt::format("the grammar grows past {} symbols with its repetitions", kMaxSymbols));
        repeat(seq, item, m, n, base);
        last = std::string::npos;  // x** is refused, as in llama.cpp
      } else {
        return seq;
      }
      skip(nested);
    }
  }

  // Some text must complete the root (else every alternative recurses without end, as in
  // x ::= x "a", and the grammar matches nothing).
  Status check_root_finishes(int32_t root) const {
    std::vector<bool> done(rules_.size(), false);
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t r = 0; r < rules_.size(); ++r) {
        if (done[r]) continue;
        for (const Seq& alt : rules_[r]) {
          if (std::all_of(alt.begin(), alt.end(), [&](const Sym& s) { return s.kind != GrammarElem::kRule || done[static_cast<size_t>(s.arg)]; })) {
            done[r] = changed = true;
            break;
          }
        }
      }
    }
    if (!done[static_cast<size_t>(root)])
      return make_error("gbnf: the grammar matches nothing (rule 'root' never finishes: its alternatives recurse without end)");
    return {};
  }

  Status check_left_recursion() const {
    const size_t n = rules_.size();
    std::vector<bool> nullable(n, false);
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t r = 0; r < n; ++r) {
        if (nullable[r]) continue;
        for (const Seq& alt : rules_[r]) {
          const bool all = std::all_of(alt.begin(), alt.end(), [&](const Sym& s) {
            return s.kind == GrammarElem::kRule && nullable[static_cast<size_t>(s.arg)];
          });
          if (all) {
            nullable[r] = changed = true;
            break;
          }
        }
      }
    }
    // r -> s when s can come first in r. The edge "grows" when something follows s in the
    // alternative (the matcher then stacks that continuation); a cycle through a growing edge
    // is left recursion that never ends. Cycles of tail references only (R ::= G R with G
    // empty-able, from ( [x]* )*) keep the stack as it is and are fine (llama.cpp takes them).
    struct Edge {
      int32_t to;
      bool grows;
    };
    std::vector<std::vector<Edge>> first(n);
    for (size_t r = 0; r < n; ++r)
      for (const Seq& alt : rules_[r])
        for (size_t i = 0; i < alt.size(); ++i) {
          const Sym& s = alt[i];
          if (s.kind != GrammarElem::kRule) break;
          first[r].push_back({s.arg, i + 1 < alt.size()});
          if (!nullable[static_cast<size_t>(s.arg)]) break;
        }
    std::vector<int32_t> mark(n, -1);
    auto reaches = [&](size_t from, size_t to, int32_t stamp) {
      std::vector<size_t> todo{from};
      mark[from] = stamp;
      while (!todo.empty()) {
        const size_t u = todo.back();
        todo.pop_back();
        if (u == to) return true;
        for (const Edge& e : first[u])
          if (mark[static_cast<size_t>(e.to)] != stamp) {
            mark[static_cast<size_t>(e.to)] = stamp;
            todo.push_back(static_cast<size_t>(e.to));
          }
      }
      return false;
    };
    int32_t stamp = 0;
    for (size_t r = 0; r < n; ++r)
      for (const Edge& e : first[r])
        if (e.grows && reaches(static_cast<size_t>(e.to), r, stamp++))
          return make_error("gbnf: left recursion in rule '{}' (it can reach itself before matching a character)", names_[r]);
    return {};
  }

  Grammar flatten(int32_t root) {
    Grammar g;
    g.sets = std::move(sets_);
    g.names = names_;
    g.generated = generated_;
    g.root = root;
    g.alts.resize(rules_.size());
    for (size_t r = 0; r < rules_.size(); ++r)
      for (const Seq& alt : rules_[r]) {
        g.alts[r].push_back(static_cast<int32_t>(g.elems.size()));
        for (const Sym& s : alt) g.elems.push_back({s.kind, s.arg});
        g.elems.push_back({GrammarElem::kEnd, 0});
      }
    return g;
  }
};

}  // namespace

Expected<Grammar> parse_gbnf(std::string_view text) { return Parser(text).run(); }

}  // namespace minfer
