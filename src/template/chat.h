// Chat rendering: the arguments of transformers' apply_chat_template turned into template
// variables, and the built-in templates (ChatML, Gemma) for models without a template.
//
//   auto in = jinja::chat_inputs_from_json(R"({"messages": [{"role": "user", "content": "Hi"}],
//                                             "add_generation_prompt": true})");
//   auto prompt = jinja::render_chat(template_source, *in, {});
//
// Variables the template sees (as transformers passes them): messages, tools (None when not
// given), documents (None when not given), add_generation_prompt (False when not given),
// bos_token / eos_token when given, and every other top-level field as an extra keyword
// argument (enable_thinking, reasoning_effort...). Message fields are passed through as they
// are: role, content (string, null or a list of parts), tool_calls, reasoning_content,
// tool_call_id, name...
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"
#include "template/template.h"
#include "template/value.h"

namespace minfer::jinja {

// ChatML, for a model file without `tokenizer.chat_template` (other than the Gemma family).
extern const char* const kChatmlTemplate;

// Gemma's turn format (written for minfer, not copied from a model): `bos_token`, then
// `<start_of_turn>user\n...<end_of_turn>\n` / `<start_of_turn>model\n...<end_of_turn>\n`
// turns (assistant is rendered as `model`, every other role as `user`), a leading system
// message folded into the first user turn as Gemma 3's template does (system text, a blank
// line, the user text), each content trimmed (a string, or the texts of a list of
// {type: text} parts joined as they are; other parts are left out), and
// `<start_of_turn>model\n` for add_generation_prompt.
extern const char* const kGemmaTemplate;

// A template minfer ships: `name` is what `serve --chat-template NAME` and
// `chat-template --builtin NAME` take, `title` what notices print ("the built-in Gemma template").
struct BuiltinTemplate {
  std::string_view name;   // "chatml", "gemma"
  std::string_view title;  // "ChatML", "Gemma"
  const char* source;
};

// The built-in called `name`, or nullptr.
const BuiltinTemplate* find_builtin_template(std::string_view name);
// "chatml, gemma, llama3, ...": the names find_builtin_template knows (these two, and the
// legacy names of builtin-legacy.h), for help and error texts.
std::string builtin_template_names();
// The one rule for a GGUF without `tokenizer.chat_template`, by general.architecture:
// gemma, gemma2, gemma3, gemma3n get Gemma; every other architecture (or none) ChatML.
const BuiltinTemplate& fallback_template_for_arch(std::string_view architecture);

// CASE.json: a JSON object with the render arguments (see above). `messages` must be a list
// of objects with a string `role`.
Expected<Value> chat_inputs_from_json(std::string_view json_text);

// Sets `name` to a string unless the inputs already carry it (bos_token from the model...).
void set_default_token(Value& inputs, const std::string& name, const std::string& text);

Expected<std::string> render_chat(std::string_view template_source, const Value& inputs,
                                  const RenderOptions& opts);

}  // namespace minfer::jinja
