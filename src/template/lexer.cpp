#include "template/lexer.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include <fmt/format.h>

#include "template/error.h"
#include "template/text.h"
#include "template/value.h"

namespace minfer::jinja {

const char* tok_name(Tok t) {
  switch (t) {
    case Tok::kData: return "template data";
    case Tok::kVarBegin: return "begin of print statement";
    case Tok::kVarEnd: return "end of print statement";
    case Tok::kBlockBegin: return "begin of statement block";
    case Tok::kBlockEnd: return "end of statement block";
    case Tok::kName: return "name";
    case Tok::kString: return "string";
    case Tok::kInt: return "integer";
    case Tok::kFloat: return "float";
    case Tok::kOp: return "operator";
    case Tok::kEof: return "end of template";
  }
  return "token";
}

namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(unsigned char c) { return c == '_' || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') || c >= 0x80; }
bool is_name_char(unsigned char c) { return is_name_start(c) || is_digit(static_cast<char>(c)); }

// Length of the Python-whitespace code point at s[i], 0 if none.
size_t space_at(std::string_view s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) return py_isspace(c) ? 1 : 0;
  const size_t len = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : 4;
  if (i + len > s.size()) return 0;
  return py_isspace(utf8_decode(s.substr(i, len))[0]) ? len : 0;
}

size_t skip_space(std::string_view s, size_t i) {
  while (i < s.size()) {
    const size_t n = space_at(s, i);
    if (!n) break;
    i += n;
  }
  return i;
}

bool all_space(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const size_t n = space_at(s, i);
    if (!n) return false;
    i += n;
  }
  return true;
}

// Python str.rstrip() with no argument.
std::string_view rstrip_space(std::string_view s) {
  std::vector<uint32_t> cps;
  size_t end = s.size();
  while (end > 0) {
    size_t start = end - 1;
    while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
    if (space_at(s, start) != end - start) break;
    end = start;
  }
  return s.substr(0, end);
}

// Decodes a string literal body the way jinja2 does (Python's unicode-escape codec).
std::string unescape(std::string_view body, int line) {
  std::string out;
  auto hex = [&](size_t pos, size_t n, const char* what) -> uint32_t {
    if (pos + n > body.size()) fail(ErrorKind::kSyntax, fmt::format("truncated {} escape", what), line);
    uint32_t v = 0;
    for (size_t k = 0; k < n; ++k) {
      const char c = body[pos + k];
      int d = is_digit(c) ? c - '0' : (c | 0x20) >= 'a' && (c | 0x20) <= 'f' ? (c | 0x20) - 'a' + 10 : -1;
      if (d < 0) fail(ErrorKind::kSyntax, fmt::format("truncated {} escape", what), line);
      v = v * 16 + static_cast<uint32_t>(d);
    }
    return v;
  };
  auto put = [&](uint32_t cp) {
    if (cp > 0x10FFFF) fail(ErrorKind::kSyntax, "illegal Unicode character", line);
    if (cp >= 0xD800 && cp <= 0xDFFF)
      fail(ErrorKind::kUnsupported, "a lone surrogate escape in a string literal is not supported", line);
    utf8_append(out, cp);
  };
  for (size_t i = 0; i < body.size();) {
    const char c = body[i];
    if (c != '\\') { out += c; ++i; continue; }
    if (i + 1 >= body.size()) fail(ErrorKind::kSyntax, "\\ at end of string", line);
    const char e = body[i + 1];
    i += 2;
    switch (e) {
      case '\n': break;
      case '\\': out += '\\'; break;
      case '\'': out += '\''; break;
      case '"': out += '"'; break;
      case 'a': out += '\a'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'v': out += '\v'; break;
      case 'x': put(hex(i, 2, "\\xXX")); i += 2; break;
      case 'u': put(hex(i, 4, "\\uXXXX")); i += 4; break;
      case 'U': put(hex(i, 8, "\\UXXXXXXXX")); i += 8; break;
      case 'N': fail(ErrorKind::kUnsupported, "named unicode escapes (\\N{...}) are not supported", line);
      default:
        if (e >= '0' && e <= '7') {
          uint32_t v = static_cast<uint32_t>(e - '0');
          for (int k = 0; k < 2 && i < body.size() && body[i] >= '0' && body[i] <= '7'; ++k, ++i)
            v = v * 8 + static_cast<uint32_t>(body[i] - '0');
          put(v);
        } else if (static_cast<unsigned char>(e) >= 0x80) {
          // jinja2 backslash-escapes non-ASCII characters before decoding, so "\é" is "\xe9".
          size_t start = i - 1, end = i;
          while (end < body.size() && (static_cast<unsigned char>(body[end]) & 0xC0) == 0x80) ++end;
          const uint32_t cp = utf8_decode(body.substr(start, end - start))[0];
          out += '\\';
          out += cp < 0x100 ? fmt::format("x{:02x}", cp) : cp < 0x10000 ? fmt::format("u{:04x}", cp)
                                                                          : fmt::format("U{:08x}", cp);
          i = end;
        } else {
          out += '\\';
          out += e;
        }
    }
  }
  return out;
}

class Lexer {
 public:
  Lexer(std::string_view src, const LexOptions& opts) : opts_(opts) {
    // Newlines normalized to "\n"; one trailing newline dropped (keep_trailing_newline=False).
    src_.reserve(src.size());
    for (size_t i = 0; i < src.size(); ++i) {
      if (src[i] == '\r') {
        src_ += '\n';
        if (i + 1 < src.size() && src[i + 1] == '\n') ++i;
      } else {
        src_ += src[i];
      }
    }
    if (!src_.empty() && src_.back() == '\n') src_.pop_back();
  }

  std::vector<Token> run() {
    while (pos_ < src_.size()) root();
    push(Tok::kEof, "");
    return std::move(out_);
  }

 private:
  void push(Tok t, std::string text) {
    Token tok;
    tok.type = t;
    tok.text = std::move(text);
    tok.line = line_;
    out_.push_back(std::move(tok));
  }
  void advance_to(size_t p) {
    line_ += static_cast<int>(std::count(src_.begin() + static_cast<std::ptrdiff_t>(pos_),
                                         src_.begin() + static_cast<std::ptrdiff_t>(p), '\n'));
    pos_ = p;
  }
  [[noreturn]] void error(const std::string& msg) { fail(ErrorKind::kSyntax, msg, line_); }

  // Data before a tag, with `-`, `+` and lstrip_blocks applied.
  void emit_data(size_t begin, size_t end, char sign, bool lstrip_kind) {
    std::string_view text(src_.data() + begin, end - begin);
    if (sign == '-') {
      text = rstrip_space(text);
    } else if (sign != '+' && opts_.lstrip_blocks && lstrip_kind) {
      const size_t nl = text.rfind('\n');
      const size_t l_pos = nl == std::string_view::npos ? 0 : nl + 1;
      if ((l_pos > 0 || line_starting_) && l_pos < text.size() && all_space(text.substr(l_pos)))
        text = text.substr(0, l_pos);
    }
    if (!text.empty()) push(Tok::kData, std::string(text));
    advance_to(end);
  }

  void root() {
    size_t k = pos_;
    for (;;) {
      k = src_.find('{', k);
      if (k == std::string::npos || k + 1 >= src_.size()) {
        push(Tok::kData, src_.substr(pos_));
        advance_to(src_.size());
        return;
      }
      const char c = src_[k + 1];
      if (c == '{' || c == '%' || c == '#') break;
      ++k;
    }
    const char kind = src_[k + 1];
    size_t j = k + 2;
    char sign = 0;
    if (j < src_.size() && (src_[j] == '-' || src_[j] == '+')) sign = src_[j++];
    if (kind == '%' && raw_block(k, j, sign)) return;
    emit_data(pos_, k, sign, kind != '{');
    advance_to(j);
    if (kind == '#') return comment();
    push(kind == '{' ? Tok::kVarBegin : Tok::kBlockBegin, "");
    tag(kind == '%');
  }

  // Consumes the tag end at pos_ ("-%}", "+%}", "%}"...): returns false if there is none.
  bool tag_end(bool block) {
    const char close = block ? '%' : '}';
    std::string_view rest(src_.data() + pos_, src_.size() - pos_);
    size_t end = 0;
    if (block && rest.starts_with("+%}")) {
      end = pos_ + 3;
    } else if (rest.size() >= 3 && rest[0] == '-' && rest[1] == close && rest[2] == '}') {
      end = skip_space(src_, pos_ + 3);
    } else if (rest.size() >= 2 && rest[0] == close && rest[1] == '}') {
      end = pos_ + 2;
      if (block && opts_.trim_blocks && end < src_.size() && src_[end] == '\n') ++end;
    } else {
      return false;
    }
    push(block ? Tok::kBlockEnd : Tok::kVarEnd, "");
    line_starting_ = src_[end - 1] == '\n';
    advance_to(end);
    return true;
  }

  void comment() {
    for (size_t p = pos_; p + 1 < src_.size(); ++p) {
      size_t end = 0;
      if (src_.compare(p, 3, "+#}") == 0) {
        end = p + 3;
      } else if (src_.compare(p, 3, "-#}") == 0) {
        end = skip_space(src_, p + 3);
      } else if (src_.compare(p, 2, "#}") == 0) {
        end = p + 2;
        if (opts_.trim_blocks && end < src_.size() && src_[end] == '\n') ++end;
      } else {
        continue;
      }
      line_starting_ = src_[end - 1] == '\n';
      advance_to(end);
      return;
    }
    error("Missing end of comment tag");
  }

  // {% raw %}...{% endraw %}: the body is data, untouched.
  bool raw_block(size_t open, size_t j, char sign) {
    size_t p = skip_space(src_, j);
    if (src_.compare(p, 3, "raw") != 0) return false;
    p = skip_space(src_, p + 3);
    size_t body;
    if (src_.compare(p, 3, "-%}") == 0) body = skip_space(src_, p + 3);
    else if (src_.compare(p, 2, "%}") == 0) body = p + 2;
    else return false;
    emit_data(pos_, open, sign, true);
    advance_to(body);
    for (size_t q = body; q + 1 < src_.size(); ++q) {
      if (src_.compare(q, 2, "{%") != 0) continue;
      size_t r = q + 2;
      char esign = 0;
      if (r < src_.size() && (src_[r] == '-' || src_[r] == '+')) esign = src_[r++];
      r = skip_space(src_, r);
      if (src_.compare(r, 6, "endraw") != 0) continue;
      r = skip_space(src_, r + 6);
      size_t end;
      if (src_.compare(r, 3, "+%}") == 0) {
        end = r + 3;
      } else if (src_.compare(r, 3, "-%}") == 0) {
        end = skip_space(src_, r + 3);
      } else if (src_.compare(r, 2, "%}") == 0) {
        end = r + 2;
        if (opts_.trim_blocks && end < src_.size() && src_[end] == '\n') ++end;
      } else {
        continue;
      }
      line_starting_ = src_[body - 1] == '\n';  // as left by the raw-begin match
      emit_data(body, q, esign, true);
      line_starting_ = src_[end - 1] == '\n';
      advance_to(end);
      return true;
    }
    error("Missing end of raw directive");
  }

  void tag(bool block) {
    std::vector<char> balance;
    while (pos_ < src_.size()) {
      if (balance.empty() && tag_end(block)) return;
      if (size_t n = space_at(src_, pos_)) {
        advance_to(pos_ + n);
        continue;
      }
      const char c = src_[pos_];
      if (is_digit(c)) { number(); continue; }
      if (is_name_start(static_cast<unsigned char>(c))) { name(); continue; }
      if (c == '\'' || c == '"') { string_literal(c); continue; }
      op(balance);
    }
  }

  void number() {
    const size_t start = pos_;
    auto digits = [&](size_t p) {  // (\d+_)*\d+
      size_t q = p;
      while (q < src_.size() && is_digit(src_[q])) {
        ++q;
        if (q + 1 < src_.size() && src_[q] == '_' && is_digit(src_[q + 1])) ++q;
      }
      return q;
    };
    // float_re first (not right after a '.'), then integer_re.
    if (start == 0 || src_[start - 1] != '.') {
      size_t p = digits(start);
      size_t frac_end = p;
      bool has_frac = false;
      if (p + 1 < src_.size() && src_[p] == '.' && is_digit(src_[p + 1])) {
        frac_end = digits(p + 1);
        has_frac = true;
      }
      size_t e = frac_end;
      bool has_exp = false;
      if (e < src_.size() && (src_[e] | 0x20) == 'e') {
        size_t q = e + 1;
        if (q < src_.size() && (src_[q] == '+' || src_[q] == '-')) ++q;
        if (q < src_.size() && is_digit(src_[q])) { e = digits(q); has_exp = true; }
      }
      if (has_frac || has_exp) {
        const size_t end = has_exp ? e : frac_end;
        std::string text;
        for (size_t q = start; q < end; ++q)
          if (src_[q] != '_') text += src_[q];
        Token t;
        t.type = Tok::kFloat;
        t.text = text;
        t.f = std::strtod(text.c_str(), nullptr);
        t.line = line_;
        out_.push_back(std::move(t));
        advance_to(end);
        return;
      }
    }
    int base = 10;
    size_t p = start;
    auto digit_ok = [&](char ch) {
      if (base == 2) return ch == '0' || ch == '1';
      if (base == 8) return ch >= '0' && ch <= '7';
      if (base == 16) return is_digit(ch) || ((ch | 0x20) >= 'a' && (ch | 0x20) <= 'f');
      return is_digit(ch);
    };
    std::string text;
    if (src_[p] == '0' && p + 1 < src_.size() && ((src_[p + 1] | 0x20) == 'b' || (src_[p + 1] | 0x20) == 'o' ||
                                                  (src_[p + 1] | 0x20) == 'x')) {
      base = (src_[p + 1] | 0x20) == 'b' ? 2 : (src_[p + 1] | 0x20) == 'o' ? 8 : 16;
      size_t q = p + 2;
      if (q < src_.size() && src_[q] == '_') ++q;
      if (q < src_.size() && digit_ok(src_[q])) {
        p = q;
        while (p < src_.size()) {
          if (digit_ok(src_[p])) text += src_[p++];
          else if (src_[p] == '_' && p + 1 < src_.size() && digit_ok(src_[p + 1])) ++p;
          else break;
        }
      } else {
        base = 10;
      }
    }
    if (base == 10) {
      p = start;
      const bool zero = src_[p] == '0';
      text += src_[p++];
      while (p < src_.size()) {  // "0(_?0)*" or "[1-9](_?\d)*"
        auto ok = [&](char ch) { return zero ? ch == '0' : is_digit(ch); };
        if (ok(src_[p])) text += src_[p++];
        else if (src_[p] == '_' && p + 1 < src_.size() && ok(src_[p + 1])) ++p;
        else break;
      }
    }
    errno = 0;
    const long long v = std::strtoll(text.c_str(), nullptr, base);
    if (errno == ERANGE)
      fail(ErrorKind::kUnsupported, fmt::format("integer literal {} does not fit in 64 bits", text), line_);
    Token t;
    t.type = Tok::kInt;
    t.text = text;
    t.i = v;
    t.line = line_;
    out_.push_back(std::move(t));
    advance_to(p);
  }

  void name() {
    size_t p = pos_;
    while (p < src_.size() && is_name_char(static_cast<unsigned char>(src_[p]))) {
      if (static_cast<unsigned char>(src_[p]) >= 0x80) {
        // Non-ASCII: only letters are identifier characters; anything else is an error.
        size_t e = p + 1;
        while (e < src_.size() && (static_cast<unsigned char>(src_[e]) & 0xC0) == 0x80) ++e;
        const uint32_t cp = utf8_decode(std::string_view(src_).substr(p, e - p))[0];
        if (py_isspace(cp)) break;
        if (!py_isalpha(cp)) error("Invalid character in identifier");
        p = e;
        continue;
      }
      ++p;
    }
    push(Tok::kName, src_.substr(pos_, p - pos_));
    advance_to(p);
  }

  void string_literal(char quote) {
    size_t p = pos_ + 1;
    while (p < src_.size() && src_[p] != quote) p += src_[p] == '\\' ? 2 : 1;
    if (p >= src_.size()) error(fmt::format("unexpected char {} at {}", string_repr(std::string(1, quote)), pos_));
    const int line = line_;
    Token t;
    t.type = Tok::kString;
    t.text = unescape(std::string_view(src_).substr(pos_ + 1, p - pos_ - 1), line);
    t.line = line;
    out_.push_back(std::move(t));
    advance_to(p + 1);
  }

  void op(std::vector<char>& balance) {
    static const char* const kOps[] = {"//", "**", "==", "!=", ">=", "<=", "+", "-", "/", "*", "%",
                                       "~", "[", "]", "(", ")", "{", "}", "=", ".", ":", "|",
                                       ",", ";", "<", ">"};
    for (const char* o : kOps) {
      const std::string_view ov(o);
      if (src_.compare(pos_, ov.size(), ov) != 0) continue;
      const char c = ov[0];
      if (ov.size() == 1 && (c == '(' || c == '[' || c == '{')) {
        balance.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
      } else if (ov.size() == 1 && (c == ')' || c == ']' || c == '}')) {
        if (balance.empty()) error(fmt::format("unexpected '{}'", c));
        if (balance.back() != c) error(fmt::format("unexpected '{}', expected '{}'", c, balance.back()));
        balance.pop_back();
      }
      push(Tok::kOp, std::string(ov));
      advance_to(pos_ + ov.size());
      return;
    }
    const unsigned char c = static_cast<unsigned char>(src_[pos_]);
    std::string shown = c < 0x80 ? std::string(1, static_cast<char>(c)) : src_.substr(pos_, 1);
    error(fmt::format("unexpected char {} at {}", string_repr(shown), pos_));
  }

  LexOptions opts_;
  std::string src_;
  size_t pos_ = 0;
  int line_ = 1;
  bool line_starting_ = true;
  std::vector<Token> out_;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source, const LexOptions& opts) {
  if (size_t bad = utf8_invalid_at(source); bad != std::string_view::npos)
    fail(ErrorKind::kSyntax, fmt::format("template is not valid UTF-8 (byte offset {})", bad));
  return Lexer(source, opts).run();
}

}  // namespace minfer::jinja
