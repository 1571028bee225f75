// A reply's reasoning ("<think> ... </think>" at its start, or after a prompt whose template
// opened the block) split from its content as it streams: OpenAI's reasoning_content and
// Anthropic's thinking blocks (--reasoning-format, docs/server-api.md#reasoning).
//
//   ReasoningSplitter r(/*open=*/prompt_ends_in_think);
//   for (auto& piece : pieces) { auto d = r.feed(piece); send(d.reasoning, d.content); }
//   auto rest = r.finish();
//
// Only a block at the very start counts (leading whitespace allowed); a tag split across pieces
// is held back until it is whole; the whitespace after "</think>" is dropped.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "toolcall/parser.h"

namespace minfer::server {

class ReasoningSplitter {
 public:
  // open: the prompt ended inside a thinking block, so the reply starts with reasoning.
  ReasoningSplitter(bool open, std::string open_tag = "<think>", std::string close_tag = "</think>");

  struct Delta {
    std::string reasoning, content;
  };
  Delta feed(std::string_view text);
  Delta finish();  // the end of the reply: what was held back

 private:
  enum class State { kStart, kReasoning, kAfter, kContent };
  State state_;
  std::string open_, close_, held_;
};

// --reasoning off on a prompt whose template opens a thinking block: the block is closed
// ("<think>\n" -> "<think>\n</think>"), or, for templates with Command R7B's markers, an empty
// one is added. on/auto: the prompt as it is. It and thinking_tags() read one table of the
// template families' markers (reasoning.cpp).
std::string apply_reasoning_mode(std::string prompt, const std::string& template_source, const std::string& reasoning);

// The thinking tags a template uses ("<think>"/"</think>", Command R7B's markers), or empty
// strings when it has none; *forced_open: the prompt ends inside an opened block.
struct ThinkingTags {
  std::string open, close;
  bool forced_open = false;
  bool any() const { return !open.empty(); }
};
ThinkingTags thinking_tags(const std::string& template_source, const std::string& prompt);

// A chat reply read as it streams: its reasoning (when the template thinks and the server's
// --reasoning-format is not "none"), then content that may hold tool calls (when the request
// has tools). OpenAI's chat routes and Anthropic's share it.
struct ReplyReader {
  std::optional<ReasoningSplitter> reasoning;
  std::optional<toolcall::ToolCallParser> tools;
  struct Out {
    std::string thinking, text;
    std::vector<toolcall::CallDelta> calls;
  };
  // `last`: the reply's final piece; what was held back comes out too.
  Out feed(std::string_view piece, bool last);
  bool called() const { return tools && !tools->result().calls.empty(); }
};
// reasoning_format: --reasoning-format; template and prompt decide the tags; plan: the
// request's tools (null: none).
ReplyReader make_reply_reader(const std::string& reasoning_format, const std::string& template_source, const std::string& prompt,
                              const toolcall::ToolPlan* plan);

}  // namespace minfer::server
