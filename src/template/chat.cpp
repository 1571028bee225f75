#include "template/chat.h"

namespace minfer::jinja {

const char* const kChatmlTemplate =
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + (message['content'] if message['content'] is string else '') + '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";

Expected<Value> chat_inputs_from_json(std::string_view json_text) {
  auto parsed = value_from_json(json_text);
  if (!parsed) return make_error("chat input: {}", parsed.error().message);
  Value in = *parsed;
  if (!in.is_dict()) return make_error("chat input: expected a JSON object, got {}", in.type_name());
  DictObj& d = in.dict_obj();
  const Value* messages = d.find(std::string_view("messages"));
  if (!messages) {
    d.set("messages", Value::list());
  } else {
    if (!messages->is_list()) return make_error("chat input: 'messages' must be a list, got {}", messages->type_name());
    size_t i = 0;
    for (const Value& m : messages->items()) {
      if (!m.is_dict()) return make_error("chat input: messages[{}] must be an object, got {}", i, m.type_name());
      const Value* role = m.dict_obj().find(std::string_view("role"));
      if (!role || !role->is_string()) return make_error("chat input: messages[{}] has no string 'role'", i);
      ++i;
    }
  }
  // transformers always passes these three (render_jinja_template's signature).
  if (!d.find(std::string_view("tools"))) d.set("tools", Value::none());
  if (!d.find(std::string_view("documents"))) d.set("documents", Value::none());
  if (!d.find(std::string_view("add_generation_prompt"))) d.set("add_generation_prompt", Value(false));
  return in;
}

void set_default_token(Value& inputs, const std::string& name, const std::string& text) {
  if (!inputs.is_dict() || inputs.dict_obj().find(std::string_view(name))) return;
  inputs.dict_obj().set(name, Value(text));
}

Expected<std::string> render_chat(std::string_view template_source, const Value& inputs, const RenderOptions& opts) {
  auto t = Template::parse(template_source);
  if (!t) return t.error();
  return t->render(inputs, opts);
}

}  // namespace minfer::jinja
