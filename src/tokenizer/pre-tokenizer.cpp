// Hand-written scanners for the pre-tokenizer regular expressions (see pre-tokenizer.h).
// Each scanner follows the regex's leftmost-first alternation: at a position, the first
// alternative that matches decides the word, with the same greedy/backtracking outcome.
#include "tokenizer/pre-tokenizer.h"

#include <algorithm>
#include <iterator>

#include "tokenizer/unicode.h"

namespace minfer {
namespace {

// Code point view of one piece [a, b) of the decoded text.
struct Cps {
  const uint32_t* cp;
  const uint8_t* cls;

  bool ws(uint32_t i) const { return unicode_is_ws(cls[i]); }
  bool letter(uint32_t i) const { return unicode_is_letter(cls[i]); }
  bool number(uint32_t i) const { return unicode_is_number(cls[i]); }
  bool punct(uint32_t i) const { return unicode_is_punct(cls[i]); }
  bool mark(uint32_t i) const { return unicode_is_mark(cls[i]); }
  bool newline(uint32_t i) const { return cp[i] == '\r' || cp[i] == '\n'; }
};

uint32_t ascii_lower(uint32_t c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

// 's 't 'm 'd 're 've 'll at i (the apostrophe): length of the contraction, 0 if none.
// `fold` makes the letters ASCII case-insensitive, as (?i:...) does for these letters.
uint32_t contraction(const Cps& t, uint32_t i, uint32_t b, bool fold) {
  if (t.cp[i] != '\'' || i + 1 >= b) return 0;
  const uint32_t c1 = fold ? ascii_lower(t.cp[i + 1]) : t.cp[i + 1];
  if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return 2;
  if (i + 2 >= b) return 0;
  const uint32_t c2 = fold ? ascii_lower(t.cp[i + 2]) : t.cp[i + 2];
  if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) return 3;
  return 0;
}

// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
void split_gpt2(const Cps& t, uint32_t a, uint32_t b, std::vector<uint32_t>& ends) {
  // 0 letter, 1 number, 2 other non-space: the three " ?X+" alternatives.
  auto kind = [&](uint32_t j) { return t.letter(j) ? 0 : t.number(j) ? 1 : 2; };
  uint32_t i = a;
  while (i < b) {
    uint32_t end;
    if (uint32_t n = contraction(t, i, b, false)) {
      end = i + n;
    } else if (!t.ws(i) || (t.cp[i] == ' ' && i + 1 < b && !t.ws(i + 1))) {
      const uint32_t s = t.ws(i) ? i + 1 : i;  // the optional leading space
      const int k = kind(s);
      end = s + 1;
      while (end < b && !t.ws(end) && kind(end) == k) ++end;
    } else {
      uint32_t j = i + 1;
      while (j < b && t.ws(j)) ++j;
      // \s+(?!\S) leaves the last space to the next word when a non-space follows.
      end = (j < b && j - i >= 2) ? j - 1 : j;
    }
    ends.push_back(end);
    i = end;
  }
}

// Llama 3 / Qwen 2 / Qwen 3.5 family:
// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?L+|\p{N}{1,kMaxDigits}| ?S+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// where L = \p{L} (or [\p{L}\p{M}] with kMarks) and S = [^\s\p{L}\p{N}] (also minus \p{M}).
template <uint32_t kMaxDigits, bool kMarks>
void split_llama3(const Cps& t, uint32_t a, uint32_t b, std::vector<uint32_t>& ends) {
  auto letter = [&](uint32_t j) { return t.letter(j) || (kMarks && t.mark(j)); };
  auto symbol = [&](uint32_t j) { return !t.ws(j) && !letter(j) && !t.number(j); };
  uint32_t i = a;
  while (i < b) {
    uint32_t end;
    if (uint32_t n = contraction(t, i, b, true)) {
      end = i + n;
    } else if (letter(i) || (!t.newline(i) && !t.number(i) && i + 1 < b && letter(i + 1))) {
      end = i + 1;  // the letter, or the one-character prefix before the letters
      while (end < b && letter(end)) ++end;
    } else if (t.number(i)) {
      end = i + 1;
      while (end < b && end - i < kMaxDigits && t.number(end)) ++end;
    } else if (symbol(i) || (t.cp[i] == ' ' && i + 1 < b && symbol(i + 1))) {
      end = i + 1;
      while (end < b && symbol(end)) ++end;
      while (end < b && t.newline(end)) ++end;
    } else if (t.ws(i)) {
      uint32_t j = i, last_newline = 0;
      for (; j < b && t.ws(j); ++j) {
        if (t.newline(j)) last_newline = j + 1;
      }
      if (last_newline) end = last_newline;        // \s*[\r\n]+
      else if (j < b && j - i >= 2) end = j - 1;   // \s+(?!\S)
      else end = j;                                // \s+
    } else {
      end = i + 1;  // a mark outside kMarks' letter class that no alternative covers
    }
    ends.push_back(end);
    i = end;
  }
}

bool in_ranges(uint32_t c, const uint32_t (*ranges)[2], size_t n) {
  for (size_t k = 0; k < n; ++k) {
    if (c >= ranges[k][0] && c <= ranges[k][1]) return true;
  }
  return false;
}

// DeepSeek LLM's cased-letter class (from its tokenizer.json), as code point ranges.
constexpr uint32_t kCasedLetters[][2] = {
    {0x0041, 0x005A}, {0x0061, 0x007A}, {0x00B5, 0x00B5}, {0x00C0, 0x00D6}, {0x00D8, 0x00F6},
    {0x00F8, 0x01BA}, {0x01BC, 0x01BF}, {0x01C4, 0x0293}, {0x0295, 0x02AF}, {0x0370, 0x0373},
    {0x0376, 0x0377}, {0x037B, 0x037D}, {0x037F, 0x037F}, {0x0386, 0x0386}, {0x0388, 0x038A},
    {0x038C, 0x038C}, {0x038E, 0x03A1}, {0x03A3, 0x03F5}, {0x03F7, 0x0481}, {0x048A, 0x052F},
    {0x0531, 0x0556}, {0x10A0, 0x10C5}, {0x13A0, 0x13F5}, {0x13F8, 0x13FD}, {0x1C90, 0x1CBA},
    {0x1CBD, 0x1CBF}, {0x1D00, 0x1D2B}, {0x1D6B, 0x1D77}, {0x1D79, 0x1D9A}, {0x1E00, 0x1F15},
    {0x1F18, 0x1F1D}, {0x1F20, 0x1F45}, {0x1F48, 0x1F4D}, {0x1F50, 0x1F57}, {0x1F59, 0x1F59},
    {0x1F5B, 0x1F5B}, {0x1F5D, 0x1F5D}, {0x1F5F, 0x1F7D}, {0x1F80, 0x1FB4}, {0x1FB6, 0x1FBC},
    {0x1FBE, 0x1FBE}, {0x1FC2, 0x1FC4}, {0x1FC6, 0x1FCC}, {0x1FD0, 0x1FD3}, {0x1FD6, 0x1FDB},
    {0x1FE0, 0x1FEC}, {0x1FF2, 0x1FF4}, {0x1FF6, 0x1FFC}, {0x2102, 0x2102}, {0x2107, 0x2107},
    {0x210A, 0x2113}, {0x2115, 0x2115}, {0x2119, 0x211D}, {0x2124, 0x2124}, {0x2126, 0x2126},
    {0x2128, 0x2128}, {0x212A, 0x212D}, {0x212F, 0x2134}, {0x2139, 0x2139}, {0x213C, 0x213F},
    {0x2145, 0x2149}, {0x214E, 0x214E}, {0x2183, 0x2184}, {0x2C00, 0x2C7B}, {0x2C7E, 0x2CE4},
    {0x2CEB, 0x2CEE}, {0x2CF2, 0x2CF3}, {0xA640, 0xA66D}, {0xA680, 0xA69B}, {0xA722, 0xA76F},
    {0xA771, 0xA787}, {0xA78B, 0xA78E}, {0xAB70, 0xABBF}, {0xFB00, 0xFB06}, {0xFB13, 0xFB17},
    {0xFF21, 0xFF3A}, {0xFF41, 0xFF5A}, {0x10400, 0x1044F}, {0x104B0, 0x104D3},
    {0x104D8, 0x104FB}, {0x10C80, 0x10CB2}, {0x10CC0, 0x10CF2}, {0x118A0, 0x118DF},
    {0x1E900, 0x1E943},
};
// DeepSeek LLM's punctuation class: ASCII punctuation/symbols, fullwidth forms, quotes and
// CJK marks. U+3000 is inside the last range but is whitespace, so it never matches here.
constexpr uint32_t kDeepseekPunct[][2] = {
    {0x21, 0x2F}, {0x3A, 0x7E}, {0xFF01, 0xFF0F}, {0xFF1A, 0xFF5E}, {0x2018, 0x201F}, {0x3000, 0x3002},
};
// 一-龥, ࠀ-一, 가-퟿ (whitespace inside U+0800..U+4E00 excluded, as in llama.cpp).
constexpr uint32_t kCjk[][2] = {{0x4E00, 0x9FA5}, {0x0800, 0x4E00}, {0xAC00, 0xD7FF}};

bool is_punct_extra(uint32_t c, bool backtick) {
  return c == '$' || c == '+' || c == '<' || c == '=' || c == '>' || c == '^' || c == '~' ||
         c == '|' || (backtick && c == '`');
}

// Length of the match of an "isolate" rule starting exactly at i (0: none).
uint32_t match_at(SplitRule r, const Cps& t, uint32_t i, uint32_t b) {
  auto run = [&](uint32_t j, auto&& pred) {
    while (j < b && pred(j)) ++j;
    return j;
  };
  // \s?X+ : an optional whitespace, then a run of X.
  auto ws_run = [&](auto&& pred) -> uint32_t {
    if (t.ws(i) && i + 1 < b && pred(i + 1)) return run(i + 1, pred) - i;
    return pred(i) ? run(i, pred) - i : 0;
  };
  switch (r) {
    case SplitRule::kEachNumber: return t.number(i) ? 1 : 0;
    case SplitRule::kNumberRuns: return run(i, [&](uint32_t j) { return t.number(j); }) - i;
    case SplitRule::kEachNewline: return t.newline(i) ? 1 : 0;
    case SplitRule::kAsciiDigits3: {
      auto digit = [&](uint32_t j) { return j < b && t.cp[j] >= '0' && t.cp[j] <= '9'; };
      return digit(i) && digit(i + 1) && digit(i + 2) ? 3 : 0;
    }
    case SplitRule::kPunctRuns:
    case SplitRule::kPunctRunsTick: {
      const bool tick = r == SplitRule::kPunctRunsTick;
      return run(i, [&](uint32_t j) { return t.punct(j) || is_punct_extra(t.cp[j], tick); }) - i;
    }
    case SplitRule::kWsLetters: return ws_run([&](uint32_t j) { return t.letter(j); });
    case SplitRule::kWsPuncts: return ws_run([&](uint32_t j) { return t.punct(j); });
    case SplitRule::kCjkRuns:
      return run(i, [&](uint32_t j) { return !t.ws(j) && in_ranges(t.cp[j], kCjk, std::size(kCjk)); }) - i;
    case SplitRule::kWsCasedLetters:
      return ws_run([&](uint32_t j) { return in_ranges(t.cp[j], kCasedLetters, std::size(kCasedLetters)); });
    case SplitRule::kWsAsciiPunct:
      return ws_run([&](uint32_t j) {
        return !t.ws(j) && in_ranges(t.cp[j], kDeepseekPunct, std::size(kDeepseekPunct));
      });
    case SplitRule::kTrailingWs: {
      const uint32_t j = run(i, [&](uint32_t k) { return t.ws(k); });
      return j == b ? j - i : 0;
    }
    default: return 0;
  }
}

// Splits [a, b) at every match of an isolate rule: matches and the gaps become pieces.
void split_isolate(SplitRule r, const Cps& t, uint32_t a, uint32_t b, std::vector<uint32_t>& ends) {
  uint32_t gap = a;
  for (uint32_t i = a; i < b;) {
    const uint32_t n = match_at(r, t, i, b);
    if (n == 0) {
      ++i;
      continue;
    }
    if (i > gap) ends.push_back(i);
    ends.push_back(i + n);
    i += n;
    gap = i;
  }
  if (b > gap) ends.push_back(b);
}

void split_piece(SplitRule r, const Cps& t, uint32_t a, uint32_t b, std::vector<uint32_t>& ends) {
  switch (r) {
    case SplitRule::kGpt2: return split_gpt2(t, a, b, ends);
    case SplitRule::kLlama3: return split_llama3<3, false>(t, a, b, ends);
    case SplitRule::kQwen2: return split_llama3<1, false>(t, a, b, ends);
    case SplitRule::kQwen35: return split_llama3<1, true>(t, a, b, ends);
    default: return split_isolate(r, t, a, b, ends);
  }
}

}  // namespace

void PreTokenizer::split(std::string_view text, PreTokenizeScratch& s,
                         std::vector<uint32_t>& ends) const {
  if (text.empty()) return;
  s.cp.clear();
  s.cls.clear();
  s.off.clear();
  for (size_t i = 0; i < text.size();) {
    size_t len;
    const uint32_t c = utf8_decode(text.data() + i, text.size() - i, &len);
    s.cp.push_back(c);
    s.cls.push_back(unicode_class(c));
    s.off.push_back(static_cast<uint32_t>(i));
    i += len;
  }
  const uint32_t n = static_cast<uint32_t>(s.cp.size());
  s.off.push_back(static_cast<uint32_t>(text.size()));
  const Cps t{s.cp.data(), s.cls.data()};

  // Pieces as code point end indices; each rule refines the previous rule's pieces.
  s.a.assign(1, n);
  for (SplitRule r : rules_) {
    s.b.clear();
    uint32_t start = 0;
    for (uint32_t end : s.a) {
      split_piece(r, t, start, end, s.b);
      start = end;
    }
    std::swap(s.a, s.b);
  }
  for (uint32_t end : s.a) ends.push_back(s.off[end]);
}

namespace {

struct PreName {
  const char* name;
  std::vector<SplitRule> rules;
  bool ignore_merges = false;
  bool add_bos = false;
};

const std::vector<PreName>& pre_names() {
  using R = SplitRule;
  static const std::vector<PreName> names = [] {
    std::vector<PreName> v;
    const std::vector<R> llama3 = {R::kLlama3};
    for (const char* n : {"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2"})
      v.push_back({n, llama3, true, true});
    for (const char* n : {"dbrx", "smaug-bpe"}) v.push_back({n, llama3});
    for (const char* n : {"qwen2", "deepseek-r1-qwen", "stablelm2", "hunyuan", "solar-open", "kormo", "f2llmv2"})
      v.push_back({n, {R::kQwen2}});
    v.push_back({"qwen35", {R::kQwen35}});
    for (const char* n : {"gpt-2", "phi-2", "mpt", "olmo", "jais", "gigachat", "exaone4", "a.x-4.0", "mellum"})
      v.push_back({n, {R::kGpt2}});
    for (const char* n : {"starcoder", "smollm", "refact", "command-r", "codeshell", "exaone", "minerva-7b", "mellum2"})
      v.push_back({n, {R::kEachNumber, R::kGpt2}});
    v.push_back({"falcon", {R::kPunctRunsTick, R::kGpt2, R::kAsciiDigits3}});
    v.push_back({"deepseek-llm",
                 {R::kEachNewline, R::kWsCasedLetters, R::kWsAsciiPunct, R::kTrailingWs, R::kCjkRuns,
                  R::kNumberRuns}});
    v.push_back({"deepseek-coder", {R::kEachNewline, R::kWsLetters, R::kWsPuncts, R::kCjkRuns, R::kEachNumber}});
    v.push_back({"default", {R::kPunctRuns, R::kGpt2, R::kNumberRuns, R::kAsciiDigits3}});
    return v;
  }();
  return names;
}

}  // namespace

Expected<PreTokenizer> PreTokenizer::from_name(std::string_view pre) {
  for (const PreName& p : pre_names()) {
    if (pre == p.name) return PreTokenizer(p.rules, p.ignore_merges, p.add_bos);
  }
  return make_error("tokenizer: pre-tokenizer '{}' (tokenizer.ggml.pre) is not supported; supported: {}",
                    pre, pre_tokenizer_names());
}

std::string pre_tokenizer_names() {
  std::string s;
  for (const PreName& p : pre_names()) s += std::string(s.empty() ? "" : ", ") + p.name;
  return s;
}

}  // namespace minfer
