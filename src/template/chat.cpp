#include "template/chat.h"

#include "template/builtin-legacy.h"

namespace minfer::jinja {

const char* const kChatmlTemplate =
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + (message['content'] if message['content'] is string else '') + '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";

// Every tag strips the whitespace around it, so the layout below renders nothing by itself.
// The oracle test (tests/oracle/template/test_builtin_templates_vs_jinja2.py) renders this
// text with jinja2 too.
const char* const kGemmaTemplate = R"jinja({#- minfer's built-in Gemma template (Gemma's turn format). -#}
{%- macro gemma_text(content) -%}
  {%- if content is string -%}
    {{- content | trim -}}
  {%- elif content is iterable and content is not mapping -%}
    {%- set parts = namespace(text='') -%}
    {%- for part in content -%}
      {%- if part is mapping and part['type'] == 'text' and part['text'] is string -%}
        {%- set parts.text = parts.text + part['text'] -%}
      {%- endif -%}
    {%- endfor -%}
    {{- parts.text | trim -}}
  {%- endif -%}
{%- endmacro -%}
{{- bos_token -}}
{%- set fold_system = messages | length > 1 and messages[0]['role'] == 'system' and messages[1]['role'] == 'user' -%}
{%- for message in (messages[1:] if fold_system else messages) -%}
  {{- '<start_of_turn>' + ('model' if message['role'] == 'assistant' else 'user') + '\n' -}}
  {%- if loop.first and fold_system -%}
    {{- gemma_text(messages[0]['content']) + '\n\n' -}}
  {%- endif -%}
  {{- gemma_text(message['content']) + '<end_of_turn>\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
  {{- '<start_of_turn>model\n' -}}
{%- endif -%})jinja";

namespace {

const BuiltinTemplate kBuiltins[] = {
    {"chatml", "ChatML", kChatmlTemplate},
    {"gemma", "Gemma", kGemmaTemplate},
};

}  // namespace

const BuiltinTemplate* find_builtin_template(std::string_view name) {
  for (const BuiltinTemplate& b : kBuiltins)
    if (b.name == name) return &b;
  for (const BuiltinTemplate& b : legacy_builtin_templates())
    if (b.name == name) return &b;
  return nullptr;
}

std::string builtin_template_names() {
  std::string names;
  auto add = [&](const BuiltinTemplate& b) {
    if (!names.empty()) names += ", ";
    names += b.name;
  };
  for (const BuiltinTemplate& b : kBuiltins) add(b);
  for (const BuiltinTemplate& b : legacy_builtin_templates()) add(b);
  return names;
}

const BuiltinTemplate& fallback_template_for_arch(std::string_view architecture) {
  for (std::string_view gemma : {"gemma", "gemma2", "gemma3", "gemma3n"})
    if (architecture == gemma) return *find_builtin_template("gemma");
  return *find_builtin_template("chatml");
}

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
