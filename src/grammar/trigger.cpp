#include "grammar/trigger.h"

#include <algorithm>

namespace minfer {
namespace {

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

size_t leading_ws(std::string_view text) {
  size_t i = 0;
  while (i < text.size() && is_ws(text[i])) ++i;
  return i;
}

}  // namespace

std::optional<TriggerHit> find_grammar_trigger(std::string_view text, const std::vector<GrammarTrigger>& triggers,
                                               size_t grown_from) {
  std::optional<TriggerHit> best;
  for (const GrammarTrigger& t : triggers) {
    if (t.text.empty()) continue;
    size_t at = std::string_view::npos;
    if (t.at_start) {
      const size_t ws = leading_ws(text);
      if (text.substr(ws).starts_with(t.text)) at = ws;
    } else {
      const size_t from = grown_from >= t.text.size() ? grown_from - (t.text.size() - 1) : 0;
      at = text.find(t.text, std::min(from, text.size()));
    }
    if (at == std::string_view::npos || (best && best->begin <= at)) continue;
    best = TriggerHit{at, t.include ? at : at + t.text.size()};
  }
  return best;
}

size_t trigger_prefix_len(std::string_view text, const std::vector<GrammarTrigger>& triggers) {
  size_t hold = 0;
  for (const GrammarTrigger& t : triggers) {
    if (t.text.empty()) continue;
    if (t.at_start) {
      const size_t ws = leading_ws(text);
      const std::string_view rest = text.substr(ws);
      if (rest.size() < t.text.size() && std::string_view(t.text).starts_with(rest)) hold = std::max(hold, text.size());
      continue;
    }
    // The longest suffix of text that is a proper prefix of the trigger.
    const size_t most = std::min(text.size(), t.text.size() - 1);
    for (size_t n = most; n > 0; --n)
      if (std::string_view(t.text).starts_with(text.substr(text.size() - n))) {
        hold = std::max(hold, n);
        break;
      }
  }
  return hold;
}

}  // namespace minfer
