#include "server/reasoning.h"

namespace minfer::server {
namespace {

// The longest suffix of s that is a proper prefix of tag.
size_t partial_tag(std::string_view s, std::string_view tag) {
  for (size_t n = std::min(s.size(), tag.size() - 1); n > 0; --n)
    if (tag.starts_with(s.substr(s.size() - n))) return n;
  return 0;
}

}  // namespace

ReasoningSplitter::ReasoningSplitter(bool open, std::string open_tag, std::string close_tag)
    : state_(open ? State::kReasoning : State::kStart), open_(std::move(open_tag)), close_(std::move(close_tag)) {}

ReasoningSplitter::Delta ReasoningSplitter::feed(std::string_view text) {
  Delta d;
  held_.append(text);
  for (;;) {
    if (state_ == State::kStart) {
      const size_t first = held_.find_first_not_of(" \t\r\n");
      if (first == std::string::npos) return d;  // only whitespace so far
      const std::string_view rest = std::string_view(held_).substr(first);
      if (rest.starts_with(open_)) {
        held_.erase(0, first + open_.size());
        state_ = State::kReasoning;
        continue;
      }
      if (open_.starts_with(rest)) return d;  // maybe the tag, not whole yet
      state_ = State::kContent;
      continue;
    }
    if (state_ == State::kReasoning) {
      const size_t end = held_.find(close_);
      if (end != std::string::npos) {
        d.reasoning += held_.substr(0, end);
        held_.erase(0, end + close_.size());
        state_ = State::kAfter;
        continue;
      }
      const size_t keep = partial_tag(held_, close_);
      d.reasoning += held_.substr(0, held_.size() - keep);
      held_.erase(0, held_.size() - keep);
      return d;
    }
    if (state_ == State::kAfter) {  // drop the whitespace between the block and the answer
      const size_t first = held_.find_first_not_of(" \t\r\n");
      if (first == std::string::npos) {
        held_.clear();
        return d;
      }
      held_.erase(0, first);
      state_ = State::kContent;
      continue;
    }
    d.content += held_;
    held_.clear();
    return d;
  }
}

ReasoningSplitter::Delta ReasoningSplitter::finish() {
  Delta d;
  if (state_ == State::kReasoning) d.reasoning = held_;  // a reply cut inside its reasoning
  else if (state_ == State::kStart || state_ == State::kContent) d.content = held_;
  held_.clear();
  return d;
}

namespace {

// The thinking markers of the template families that have them (DeepSeek-R1 / QwQ / Qwen3's
// <think>, Command R7B's): `both_when_off`, with thinking off such a template gets an empty block.
struct ThinkFamily {
  std::string_view open, close;
  bool both_when_off;
};
constexpr ThinkFamily kThinkFamilies[] = {{"<think>", "</think>", false}, {"<|START_THINKING|>", "<|END_THINKING|>", true}};

// The prompt without its trailing blanks: what a template's opened block ends with.
std::string_view trimmed_tail(std::string_view prompt) {
  while (!prompt.empty() && (prompt.back() == '\n' || prompt.back() == ' ')) prompt.remove_suffix(1);
  return prompt;
}

}  // namespace

std::string apply_reasoning_mode(std::string prompt, const std::string& template_source, const std::string& reasoning) {
  if (reasoning != "off") return prompt;
  for (const ThinkFamily& t : kThinkFamilies) {
    const std::string_view tail = trimmed_tail(prompt);
    if (tail.ends_with(t.open)) return prompt + std::string(t.close);
    if (t.both_when_off && template_source.find(t.open) != std::string::npos && !tail.ends_with(t.close))
      return prompt + std::string(t.open) + std::string(t.close);
  }
  return prompt;
}

ThinkingTags thinking_tags(const std::string& template_source, const std::string& prompt) {
  ThinkingTags t;
  for (const ThinkFamily& f : kThinkFamilies) {
    const std::string_view tail = trimmed_tail(prompt);
    if (template_source.find(f.open) == std::string::npos && !tail.ends_with(f.open)) continue;
    t.open = f.open;
    t.close = f.close;
    t.forced_open = tail.ends_with(f.open);
    break;
  }
  return t;
}

ReplyReader::Out ReplyReader::feed(std::string_view piece, bool last) {
  Out o;
  ReasoningSplitter::Delta d{std::string(), std::string(piece)};
  if (reasoning) {
    d = reasoning->feed(piece);
    if (last) {
      ReasoningSplitter::Delta rest = reasoning->finish();
      d.reasoning += rest.reasoning;
      d.content += rest.content;
    }
  }
  o.thinking = std::move(d.reasoning);
  if (tools) {
    toolcall::ReplyDelta t = tools->feed(d.content);
    if (last) {
      toolcall::ReplyDelta rest = tools->finish();
      t.content += rest.content;
      t.calls.insert(t.calls.end(), rest.calls.begin(), rest.calls.end());
    }
    o.text = std::move(t.content);
    o.calls = std::move(t.calls);
  } else {
    o.text = std::move(d.content);
  }
  return o;
}

ReplyReader make_reply_reader(const std::string& reasoning_format, const std::string& template_source, const std::string& prompt,
                              const toolcall::ToolPlan* plan) {
  ReplyReader rr;
  if (reasoning_format != "none") {
    const ThinkingTags t = thinking_tags(template_source, prompt);
    if (t.any()) rr.reasoning.emplace(t.forced_open, t.open, t.close);
  }
  if (plan) rr.tools.emplace(*plan);
  return rr;
}

}  // namespace minfer::server
