#include "runtime/chat-prompt.h"

#include <cstdio>

#include "template/chat.h"

namespace minfer {

std::string chat_template_source(const GgufFile& file, bool* fallback) {
  if (const GgufValue* v = file.find("tokenizer.chat_template"))
    if (const std::string* s = v->as_string(); s && !s->empty()) {
      if (fallback) *fallback = false;
      return *s;
    }
  if (fallback) *fallback = true;
  return jinja::kChatmlTemplate;
}

Expected<std::string> render_chat_prompt(const GgufFile& file, const Tokenizer& tok,
                                         const nlohmann::ordered_json& messages,
                                         const ChatRenderOptions& opt) {
  bool fallback = false;
  const std::string source = opt.template_source.empty() ? chat_template_source(file, &fallback) : opt.template_source;
  if (fallback && !opt.quiet)
    std::fprintf(stderr, "[template] '%s' has no tokenizer.chat_template; using ChatML\n", file.path().c_str());
  nlohmann::ordered_json args = opt.extra;
  args["messages"] = messages;
  args["add_generation_prompt"] = opt.add_generation_prompt;
  auto inputs = jinja::chat_inputs_from_json(args.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace));
  if (!inputs) return inputs.error();
  jinja::set_default_token(*inputs, "bos_token", tok.bos_id() >= 0 ? std::string(tok.token_text(tok.bos_id())) : "");
  jinja::set_default_token(*inputs, "eos_token", tok.eos_id() >= 0 ? std::string(tok.token_text(tok.eos_id())) : "");
  return jinja::render_chat(source, *inputs, {});
}

}  // namespace minfer
