// The delta rendering of `--cnv` (cli/cmd-chat-conv.h) on real chat templates: a turn is
// prefilled incrementally when the rendered history (without a generation prompt) is a prefix
// of the next prompt, and closed in place when the prompt is a prefix of the history rendered
// with the reply. Which templates allow both is a property of the template; this test pins it
// for llama.cpp's models/templates/ (so a change in the Jinja engine or in the conversation
// logic that breaks incremental prefill shows up here), and checks the token-cut search used
// to drop old turns from the cache.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>

#include "cli/cmd-chat-conv.h"
#include "template/chat.h"

namespace minfer::cli {
namespace {

std::string templates_dir() {
  const char* env = std::getenv("MINFER_TEMPLATES_DIR");
  return env ? env : MINFER_TEST_TEMPLATES_DIR;
}

std::string read_template(const std::string& name) {
  std::ifstream f(templates_dir() + "/" + name);
  EXPECT_TRUE(f) << "missing template " << templates_dir() << "/" << name << " (scripts/setup.sh fetches llama.cpp)";
  return {std::istreambuf_iterator<char>(f), {}};
}

std::string render(const std::string& source, const Messages& msgs, bool add_gen) {
  Messages args = {{"messages", msgs}, {"add_generation_prompt", add_gen}};
  auto in = jinja::chat_inputs_from_json(args.dump());
  EXPECT_TRUE(in) << in.error().message;
  if (!in) return {};
  jinja::set_default_token(*in, "bos_token", "<s>");
  jinja::set_default_token(*in, "eos_token", "</s>");
  auto out = jinja::render_chat(source, *in, {});
  EXPECT_TRUE(out) << out.error().message;
  return out ? *out : std::string();
}

struct Behaviour {
  bool closes = true;   // every prompt is a prefix of the history with its reply
  bool extends = true;  // every closed history is a prefix of the next prompt
};

// Three turns with a system prompt (or without, for templates that refuse one).
Behaviour behaviour(const std::string& source, bool with_system) {
  Messages msgs = Messages::array();
  if (with_system) msgs.push_back({{"role", "system"}, {"content", "You are a helpful assistant."}});
  const char* users[] = {"Hi there", "What is 2+2?", "Thanks!"};
  const char* replies[] = {"Hello! How can I help?", "2+2 is 4.", "You are welcome."};
  Behaviour b;
  std::string closed;
  for (int k = 0; k < 3; ++k) {
    msgs.push_back({{"role", "user"}, {"content", users[k]}});
    const std::string prompt = render(source, msgs, true);
    if (k > 0 && !prompt_delta(closed, prompt).extends) b.extends = false;
    msgs.push_back({{"role", "assistant"}, {"content", replies[k]}});
    closed = render(source, msgs, false);
    if (!prompt_delta(prompt, closed).extends) b.closes = false;
  }
  return b;
}

TEST(ChatDelta, ChatmlSuffixIsTheNewMessage) {
  Messages msgs = {{{"role", "user"}, {"content", "Hi"}}, {{"role", "assistant"}, {"content", "Hello!"}}};
  const std::string closed = render(jinja::kChatmlTemplate, msgs, false);
  msgs.push_back({{"role", "user"}, {"content", "Bye"}});
  const std::string next = render(jinja::kChatmlTemplate, msgs, true);
  const PromptDelta d = prompt_delta(closed, next);
  ASSERT_TRUE(d.extends);
  EXPECT_EQ(d.suffix, "<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_FALSE(prompt_delta(next, closed).extends);
  EXPECT_TRUE(prompt_delta("", next).extends);
}

// Pinned behaviour of real templates. closes = false or extends = false means the conversation
// falls back to a re-render (with the common token prefix kept) for those turns.
TEST(ChatDelta, RealTemplates) {
  struct Case {
    const char* file;
    bool system;
    Behaviour want;
  };
  const Case cases[] = {
      {"Qwen-Qwen2.5-7B-Instruct.jinja", true, {true, true}},
      {"meta-llama-Llama-3.1-8B-Instruct.jinja", true, {true, true}},
      {"meta-llama-Llama-3.2-3B-Instruct.jinja", true, {true, true}},
      {"meta-llama-Llama-3.3-70B-Instruct.jinja", true, {true, true}},
      {"microsoft-Phi-3.5-mini-instruct.jinja", true, {true, false}},  // the history ends with eos_token
      {"google-gemma-2-2b-it.jinja", false, {true, true}},
      {"HuggingFaceTB-SmolLM3-3B.jinja", true, {true, true}},
      {"ibm-granite-granite-3.3-2B-Instruct.jinja", true, {true, true}},
      {"LFM2.5-Instruct.jinja", true, {true, true}},
      {"ibm-granite-granite-4.0.jinja", true, {true, true}},
      {"openai-gpt-oss-120b.jinja", true, {true, false}},  // the last reply ends <|return|>, earlier ones <|end|>
      {"moonshotai-Kimi-K2.jinja", true, {true, true}},
      {"mistralai-Mistral-Nemo-Instruct-2407.jinja", true, {false, true}},  // system goes to the last user message
      {"Qwen-Qwen3-0.6B.jinja", true, {true, false}},  // the last reply gets empty <think> tags
      {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", true, {false, true}},  // the prompt opens <think>
  };
  for (const Case& c : cases) {
    const Behaviour b = behaviour(read_template(c.file), c.system);
    std::printf("[delta] %-52s closes %-5s extends %s\n", c.file, b.closes ? "yes" : "no", b.extends ? "yes" : "no");
    EXPECT_EQ(b.closes, c.want.closes) << c.file;
    EXPECT_EQ(b.extends, c.want.extends) << c.file;
  }
}

// The built-in Gemma fallback (system folded into the first user turn): both incremental.
TEST(ChatDelta, BuiltinGemmaTemplate) {
  const Behaviour b = behaviour(jinja::kGemmaTemplate, true);
  EXPECT_TRUE(b.closes);
  EXPECT_TRUE(b.extends);
}

TEST(ChatDelta, TokenCutRemovesWholeTokens) {
  // Tokens: "<S>" "sys" "|" "<U>" "q1" "|" "<A>" "a1" "|" "<U>" "q2" "|"
  const std::vector<std::string> pieces = {"<S>", "sys", "|", "<U>", "q1", "|", "<A>", "a1", "|", "<U>", "q2", "|"};
  std::string cached;
  std::vector<size_t> ends;
  for (const std::string& p : pieces) ends.push_back((cached += p).size());
  // Drop the first question and answer. The kept text shares "<U>" with the dropped turn: the
  // cut keeps the earliest copy (its rows were computed without the dropped turn in context,
  // as a fresh prefill would) and removes "q1| <A> a1 | <U>".
  auto cut = find_token_cut(cached, ends, "<S>sys|<U>q2|");
  ASSERT_TRUE(cut);
  EXPECT_EQ(cut->first, 4);
  EXPECT_EQ(cut->last, 10);
  // Drop everything but the end.
  cut = find_token_cut(cached, ends, "<U>q2|");
  ASSERT_TRUE(cut);
  EXPECT_EQ(cut->first, 0);
  EXPECT_EQ(cut->last, 9);
  // A target that is not the cached text minus one range, or that splits a token.
  EXPECT_FALSE(find_token_cut(cached, ends, "<S>sys|<U>q3|"));
  EXPECT_FALSE(find_token_cut(cached, ends, "<S>sy|<U>q2|"));
  EXPECT_FALSE(find_token_cut(cached, ends, cached));
  EXPECT_FALSE(find_token_cut(cached, {}, "x"));
}

}  // namespace
}  // namespace minfer::cli
