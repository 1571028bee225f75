// libFuzzer target for the grammar layer: any byte string must parse as GBNF (then match a text
// and mask a small vocabulary step by step) or fail with an error value; a JSON Schema (input
// starting with '{') must convert to a grammar that parses, or fail with an error value. Never
// a crash, hang or leak. Input: GRAMMAR-or-SCHEMA ["\0" TEXT].
// Input starting with 0x01: the tool-call parser (toolcall/parser.h) on model text, byte 2
// choosing the syntax and the split: any text, fed whole or in pieces, gives the same calls.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/gbnf.h"
#include "grammar/json-schema.h"
#include "grammar/matcher.h"
#include "grammar/token-mask.h"
#include "toolcall/parser.h"
#include "toolcall/tools.h"

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

int fuzz_tool_parser(std::string_view in) {
  using namespace minfer::toolcall;
  if (in.size() < 2) return 0;
  const auto mode = static_cast<uint8_t>(in[1]);
  const std::string_view text = in.substr(2);
  static const Syntax kSyntax[] = {Syntax::kHermes, Syntax::kLlama3, Syntax::kMistral, Syntax::kMistralArgs, Syntax::kGeneric};
  static std::map<int, ToolPlan> plans;  // made once per mode
  const int key = (mode % 5) | (mode & 56);
  if (!plans.count(key)) {
    TemplateTools tt;
    tt.syntax = kSyntax[mode % 5];
    tt.call_id_marker = (mode & 8) != 0;
    ToolRequest req;
    req.tools = {{"f", "", {{"type", "object"}}}, {"g_2", "", {}}};
    req.choice = (mode & 16) ? ToolChoice::kRequired : ToolChoice::kAuto;
    req.parallel = (mode & 32) != 0;
    auto made = plan_tool_calls(tt, req);
    if (!made) std::abort();  // fixed, valid tools
    plans[key] = *made;
  }
  const ToolPlan* plan = &plans[key];
  int n = 0;
  const auto id = [&n] { return std::to_string(n++); };
  ToolCallParser whole(*plan, id);
  whole.feed(text);
  whole.finish();
  n = 0;
  ToolCallParser pieces(*plan, id);
  const size_t step = 1 + (mode >> 6);
  for (size_t i = 0; i < text.size(); i += step) pieces.feed(text.substr(i, step));
  pieces.finish();
  const ParsedReply& a = whole.result();
  const ParsedReply& b = pieces.result();
  if (a.content != b.content || a.calls.size() != b.calls.size()) std::abort();
  for (size_t i = 0; i < a.calls.size(); ++i)
    if (a.calls[i].name != b.calls[i].name || a.calls[i].arguments != b.calls[i].arguments || a.calls[i].id != b.calls[i].id) std::abort();
  return 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 0 && data[0] == 1) return fuzz_tool_parser(std::string_view(reinterpret_cast<const char*>(data), size));
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
