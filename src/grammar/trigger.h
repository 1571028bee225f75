// Lazy grammars: the output is free until a trigger appears in it, then a grammar constrains
// the rest (tool calls in `auto` mode: the model may answer in prose or start a call).
//
//   std::vector<GrammarTrigger> t = {{.text = "<tool_call>"}};      // fed what follows the marker
//   auto at = find_grammar_trigger("Sure. <tool_call>\n{", t);   // at->feed_from == 17
//   matcher.accept(text.substr(at->feed_from));
//
// A trigger with `at_start` fires only when nothing but whitespace comes before it (a reply that
// opens with a JSON call); `include` feeds the trigger's own text to the grammar too.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace minfer {

struct GrammarTrigger {
  std::string text;
  bool at_start = false;  // only after leading whitespace
  bool include = false;   // the grammar starts at the trigger (else right after it)
};

struct TriggerHit {
  size_t begin = 0;      // where the trigger starts in the text
  size_t feed_from = 0;  // where the grammar's text starts
};

// The earliest trigger in `text`, or nullopt. A caller that appends to `text` and searched it
// before passes the old size as `grown_from`: only triggers that end in the new bytes are
// looked for (no rescan of a long reply on every token).
std::optional<TriggerHit> find_grammar_trigger(std::string_view text, const std::vector<GrammarTrigger>& triggers,
                                               size_t grown_from = 0);

// How many bytes at the end of `text` could still grow into a trigger (text that must be held
// back before it is shown as prose). 0 when no trigger can start there; for an at_start trigger
// the whole text while it is whitespace and a prefix of the trigger.
size_t trigger_prefix_len(std::string_view text, const std::vector<GrammarTrigger>& triggers);

}  // namespace minfer
