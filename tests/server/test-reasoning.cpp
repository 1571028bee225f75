// ReasoningSplitter (server/reasoning.h) on every split of a reply into two pieces, and the
// Anthropic request conversion (server/api-anthropic.h).
#include <gtest/gtest.h>

#include <string>

#include "server/api-anthropic.h"
#include "server/reasoning.h"

namespace minfer::server {
namespace {

struct Split {
  std::string reasoning, content;
};

Split run(const std::string& reply, bool open, size_t cut) {
  ReasoningSplitter r(open);
  Split out;
  for (const std::string& piece : {reply.substr(0, cut), reply.substr(cut)}) {
    auto d = r.feed(piece);
    out.reasoning += d.reasoning;
    out.content += d.content;
  }
  auto d = r.finish();
  out.reasoning += d.reasoning;
  out.content += d.content;
  return out;
}

TEST(Reasoning, EverySplitGivesTheSameParts) {
  struct Case {
    std::string reply;
    bool open;
    std::string reasoning, content;
  };
  const Case cases[] = {
      {"<think>Let me see.</think>\n\nParis.", false, "Let me see.", "Paris."},
      {"  <think>a<b</think>answer", false, "a<b", "answer"},
      {"Let me see.</think>\nParis.", true, "Let me see.", "Paris."},
      {"Paris, <think>not reasoning</think>", false, "", "Paris, <think>not reasoning</think>"},
      {"<thi", false, "", "<thi"},
      {"<think>cut off in the middle", false, "cut off in the middle", ""},
      {"plain answer", false, "", "plain answer"},
      {"", false, "", ""},
  };
  for (const Case& c : cases)
    for (size_t cut = 0; cut <= c.reply.size(); ++cut) {
      const Split s = run(c.reply, c.open, cut);
      EXPECT_EQ(s.reasoning, c.reasoning) << c.reply << " cut at " << cut;
      EXPECT_EQ(s.content, c.content) << c.reply << " cut at " << cut;
    }
}

TEST(Reasoning, ThinkingTagsOfTemplates) {
  EXPECT_FALSE(thinking_tags("{{ messages }}", "<|im_start|>assistant\n").any());
  const ThinkingTags q = thinking_tags("{% if enable_thinking %}<think>{% endif %}", "<|im_start|>assistant\n");
  EXPECT_TRUE(q.any());
  EXPECT_FALSE(q.forced_open);
  EXPECT_TRUE(thinking_tags("...", "<｜Assistant｜><think>\n").forced_open);
  EXPECT_EQ(thinking_tags("<|START_THINKING|>", "x").close, "<|END_THINKING|>");
}

TEST(Anthropic, BlocksBecomeChatMessages) {
  const json body = json::parse(R"({
    "max_tokens": 10, "system": [{"type": "text", "text": "Be terse."}],
    "stop_sequences": ["END"], "thinking": {"type": "disabled"},
    "tools": [{"name": "f", "input_schema": {"type": "object"}}], "tool_choice": {"type": "tool", "name": "f"},
    "messages": [
      {"role": "user", "content": "Hi"},
      {"role": "assistant", "content": [{"type": "thinking", "thinking": "hmm"}, {"type": "text", "text": "Calling."},
                                        {"type": "tool_use", "id": "t1", "name": "f", "input": {"a": 1}}]},
      {"role": "user", "content": [{"type": "text", "text": "Results:"},
                                   {"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "42"}]},
                                   {"type": "tool_result", "tool_use_id": "t1", "is_error": true, "content": "bad"}]}]})");
  auto r = anthropic_to_chat(body, false);
  ASSERT_TRUE(std::holds_alternative<json>(r)) << std::get<ApiError>(r).message;
  const json& c = std::get<json>(r);
  const json& m = c["messages"];
  ASSERT_EQ(m.size(), 6u);
  EXPECT_EQ(m[0], json({{"role", "system"}, {"content", "Be terse."}}));
  EXPECT_EQ(m[2]["content"], "Calling.");
  EXPECT_EQ(m[2]["reasoning_content"], "hmm");
  EXPECT_EQ(m[2]["tool_calls"][0]["function"]["arguments"], "{\"a\":1}");
  EXPECT_EQ(m[3], json({{"role", "user"}, {"content", "Results:"}}));
  EXPECT_EQ(m[4], json({{"role", "tool"}, {"tool_call_id", "t1"}, {"content", "42"}}));
  EXPECT_EQ(m[5]["content"], "Error: bad");
  EXPECT_EQ(c["stop_sequences"], json::array({"END"}));  // read by Anthropic's name (the field table), with ctx.api
  EXPECT_EQ(c["tool_choice"]["function"]["name"], "f");
  EXPECT_EQ(c["tools"][0]["function"]["parameters"], json({{"type", "object"}}));
  EXPECT_EQ(c["chat_template_kwargs"]["enable_thinking"], false);
}

TEST(Anthropic, RefusalsNameTheField) {
  auto err = [](const char* text, bool count_only = false) {
    auto r = anthropic_to_chat(json::parse(text), count_only);
    return std::holds_alternative<ApiError>(r) ? std::get<ApiError>(r) : ApiError{0, "", "", "", ""};
  };
  EXPECT_EQ(err(R"({"messages": []})").param, "max_tokens");
  EXPECT_EQ(err(R"({"messages": []})", true).status, 0);  // counting needs no max_tokens
  EXPECT_EQ(err(R"({"max_tokens": 5})").param, "messages");
  EXPECT_EQ(err(R"({"max_tokens": 5, "messages": [{"role": "system", "content": "x"}]})").param, "messages[0].role");
  const ApiError img = err(R"({"max_tokens": 5, "messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]})");
  EXPECT_EQ(img.status, 500);
  EXPECT_NE(img.message.find("image input is not supported"), std::string::npos);
  EXPECT_EQ(err(R"({"max_tokens": 5, "messages": [], "tools": [{"type": "web_search_20250305", "name": "w"}]})").param, "tools[0].type");
}

}  // namespace
}  // namespace minfer::server
