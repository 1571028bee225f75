#include "runtime/chat-prompt.h"

#include <cstdio>

#include "template/chat.h"

namespace minfer {

namespace {

std::string architecture(const GgufFile& file) {
  auto arch = file.get_string("general.architecture");
  return arch ? std::string(*arch) : std::string();
}

}  // namespace

ChatTemplateChoice choose_chat_template(const GgufFile& file) {
  if (const GgufValue* v = file.find("tokenizer.chat_template"))
    if (const std::string* s = v->as_string(); s && !s->empty()) return {*s, nullptr};
  const jinja::BuiltinTemplate& b = jinja::fallback_template_for_arch(architecture(file));
  return {b.source, &b};
}

std::string chat_template_source(const GgufFile& file, bool* fallback) {
  ChatTemplateChoice c = choose_chat_template(file);
  if (fallback) *fallback = c.fallback != nullptr;
  return std::move(c.source);
}

std::string chat_template_notice(const GgufFile& file, const ChatTemplateChoice& choice) {
  if (!choice.fallback) return {};
  const std::string arch = architecture(file);
  std::string n = "'" + file.path() + "' has no tokenizer.chat_template; using the built-in " +
                  std::string(choice.fallback->title) + " template";
  n += arch.empty() ? std::string(" (no general.architecture)") : " (architecture " + arch + ")";
  return n;
}

Expected<std::string> render_chat_prompt(const GgufFile& file, const Tokenizer& tok,
                                         const nlohmann::ordered_json& messages,
                                         const ChatRenderOptions& opt) {
  ChatTemplateChoice choice;
  if (opt.template_source.empty()) {
    choice = choose_chat_template(file);
    if (choice.fallback && !opt.quiet) std::fprintf(stderr, "[template] %s\n", chat_template_notice(file, choice).c_str());
  } else {
    choice.source = opt.template_source;
  }
  const std::string& source = choice.source;
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
