// Renders a conversation into prompt text with the model's chat template
// (tokenizer.chat_template), or ChatML with a one-line notice when the GGUF has none. Shared by
// the one-shot CLI, the chat REPL, the server and viz.
//
//   nlohmann::ordered_json msgs = {{{"role","user"},{"content","Hi"}}};
//   auto text = render_chat_prompt(file, tok, msgs, {.add_generation_prompt = true});
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "core/status.h"
#include "gguf/reader.h"
#include "tokenizer/tokenizer.h"

namespace minfer {

struct ChatRenderOptions {
  bool add_generation_prompt = true;
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();  // tools, enable_thinking...
  bool quiet = false;  // no notice on stderr for the ChatML fallback
  std::string template_source = {};  // a template to use instead of the model's (empty: the model's)
};

// The template source of a GGUF, or ChatML (and *fallback = true) when it has none.
std::string chat_template_source(const GgufFile& file, bool* fallback = nullptr);

Expected<std::string> render_chat_prompt(const GgufFile& file, const Tokenizer& tok,
                                         const nlohmann::ordered_json& messages,
                                         const ChatRenderOptions& opt = {});

}  // namespace minfer
