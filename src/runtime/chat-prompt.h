// Renders a conversation into prompt text with the model's chat template
// (tokenizer.chat_template), or, when the GGUF has none, a built-in one chosen by its
// architecture (Gemma for gemma/gemma2/gemma3/gemma3n, ChatML otherwise) with a one-line
// notice. Shared by the one-shot CLI, the chat REPL, `chat-template`, `info`, the server and viz.
//
//   nlohmann::ordered_json msgs = {{{"role","user"},{"content","Hi"}}};
//   auto text = render_chat_prompt(file, tok, msgs, {.add_generation_prompt = true});
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "core/status.h"
#include "gguf/reader.h"
#include "template/chat.h"
#include "tokenizer/tokenizer.h"

namespace minfer {

struct ChatRenderOptions {
  bool add_generation_prompt = true;
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();  // tools, enable_thinking...
  bool quiet = false;  // no notice on stderr for the built-in fallback
  std::string template_source = {};  // a template to use instead of the model's (empty: the model's)
};

// The template a GGUF is rendered with: its tokenizer.chat_template, or (fallback set) the
// built-in jinja::fallback_template_for_arch picks for its general.architecture.
struct ChatTemplateChoice {
  std::string source;
  const jinja::BuiltinTemplate* fallback = nullptr;  // null: the GGUF's own template
};
ChatTemplateChoice choose_chat_template(const GgufFile& file);

// The template source of a GGUF (choose_chat_template), *fallback = whether it is a built-in.
std::string chat_template_source(const GgufFile& file, bool* fallback = nullptr);

// "'PATH' has no tokenizer.chat_template; using the built-in Gemma template (architecture
// gemma3)", the notice every front end prints (with its own prefix) for a fallback.
std::string chat_template_notice(const GgufFile& file, const ChatTemplateChoice& choice);

Expected<std::string> render_chat_prompt(const GgufFile& file, const Tokenizer& tok,
                                         const nlohmann::ordered_json& messages,
                                         const ChatRenderOptions& opt = {});

}  // namespace minfer
