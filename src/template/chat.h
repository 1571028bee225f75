// Chat rendering: the arguments of transformers' apply_chat_template turned into template
// variables, and the ChatML fallback for models without a template.
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

// ChatML, for a model file without `tokenizer.chat_template`.
extern const char* const kChatmlTemplate;

// CASE.json: a JSON object with the render arguments (see above). `messages` must be a list
// of objects with a string `role`.
Expected<Value> chat_inputs_from_json(std::string_view json_text);

// Sets `name` to a string unless the inputs already carry it (bos_token from the model...).
void set_default_token(Value& inputs, const std::string& name, const std::string& text);

Expected<std::string> render_chat(std::string_view template_source, const Value& inputs,
                                  const RenderOptions& opts);

}  // namespace minfer::jinja
