// libFuzzer target for the grammar layer: any byte string must parse as GBNF (then match a text
// and mask a small vocabulary step by step) or fail with an error value; a JSON Schema (input
// starting with '{') must convert to a grammar that parses, or fail with an error value. Never
// a crash, hang or leak. Input: GRAMMAR-or-SCHEMA ["\0" TEXT].
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/gbnf.h"
#include "grammar/json-schema.h"
#include "grammar/matcher.h"
#include "grammar/token-mask.h"

namespace {

std::shared_ptr<const minfer::TokenTrie> vocab() {
  static const auto trie = [] {
    minfer::GrammarVocab v;
    for (const char* p : {"a", "b", "ab", "{", "}", "\"", ":", ",", " ", "\n", "1", "12", "-", "true", "null", "\xc3", "\xa9", "\xc3\xa9", "x\"", ""})
      v.pieces.emplace_back(p);
    v.eog = {static_cast<int32_t>(v.pieces.size() - 1)};
    return std::make_shared<const minfer::TokenTrie>(v);
  }();
  return trie;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size), text;
  if (size_t nul = input.find('\0'); nul != std::string_view::npos) {
    text = input.substr(nul + 1);
    input = input.substr(0, nul);
  }
  std::string gbnf(input);
  if (!input.empty() && input[0] == '{') {
    auto converted = minfer::json_schema_to_gbnf(input);
    if (!converted) {
      if (converted.error().message.starts_with("json-schema: internal error:")) std::abort();
      return 0;
    }
    gbnf = std::move(*converted);
  }
  auto g = minfer::parse_gbnf(gbnf);
  if (!g) {
    if (input[0] == '{') std::abort();  // json_schema_to_gbnf checked it parses
    return 0;
  }
  const auto grammar = std::make_shared<const minfer::Grammar>(std::move(*g));
  minfer::GrammarMatcher m(grammar);
  for (size_t i = 0; i < text.size() && i < 256; ++i)
    if (!m.accept(text.substr(i, 1))) break;
  (void)m.can_end();
  // Mask and take tokens: the first allowed one after a text-chosen offset, 32 steps.
  minfer::GrammarConstraint c(grammar, vocab());
  std::vector<float> logits(static_cast<size_t>(vocab()->n_vocab()));
  for (int step = 0; step < 32; ++step) {
    std::fill(logits.begin(), logits.end(), 0.0f);
    c.apply(logits);
    const size_t n = logits.size();
    const size_t off = text.empty() ? 0 : static_cast<uint8_t>(text[static_cast<size_t>(step) % text.size()]) % n;
    int32_t pick = -1;
    for (size_t k = 0; k < n && pick < 0; ++k)
      if (std::isfinite(logits[(off + k) % n])) pick = static_cast<int32_t>((off + k) % n);
    if (pick < 0) break;
    if (!c.allows(pick) || !c.accept(pick)) std::abort();  // the mask and the matcher disagree
    if (pick == vocab()->eog()[0]) break;
  }
  return 0;
}
