// Built-in chat templates named as llama.cpp's legacy templates (llama-server's --chat-template
// NAME), written for minfer from each family's published prompt format (not copied from a
// model or from llama.cpp). Like llama.cpp's, they leave the BOS token to the tokenizer. Each
// message's content is a string, or a list of parts whose texts are joined.
#include "template/builtin-legacy.h"

namespace minfer::jinja {
namespace {

// {{ text(content) }}: a string, or the texts of a list of {type: text} parts, joined.
#define MINFER_TEXT_MACRO                                                                        \
  "{%- macro text(content) -%}"                                                                  \
  "{%- if content is string -%}{{- content -}}"                                                  \
  "{%- elif content is iterable and content is not mapping -%}"                                  \
  "{%- for part in content -%}{%- if part is mapping and part['type'] == 'text' -%}{{- part['text'] -}}{%- endif -%}{%- endfor -%}" \
  "{%- endif -%}"                                                                                \
  "{%- endmacro -%}"

// Llama 3: <|start_header_id|>ROLE<|end_header_id|>\n\n CONTENT <|eot_id|>, contents trimmed.
const char* const kLlama3 = MINFER_TEXT_MACRO
    "{%- for message in messages -%}"
    "{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + text(message['content']) | trim + '<|eot_id|>' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' -}}{%- endif -%}";

// Llama 2: [INST] <<SYS>>\nSYSTEM\n<</SYS>>\n\nUSER [/INST] ASSISTANT </s><s>[INST] ...
const char* const kLlama2 = MINFER_TEXT_MACRO
    "{%- set ns = namespace(system='', first=true) -%}"
    "{%- for message in messages -%}"
    "{%- if message['role'] == 'system' -%}{%- set ns.system = text(message['content']) | trim -%}"
    "{%- elif message['role'] == 'assistant' -%}{{- ' ' + text(message['content']) | trim + ' </s>' -}}"
    "{%- else -%}"
    "{{- ('' if ns.first else '<s>') + '[INST] ' -}}"
    "{%- if ns.system -%}{{- '<<SYS>>\\n' + ns.system + '\\n<</SYS>>\\n\\n' -}}{%- set ns.system = '' -%}{%- endif -%}"
    "{{- text(message['content']) | trim + ' [/INST]' -}}"
    "{%- set ns.first = false -%}"
    "{%- endif -%}"
    "{%- endfor -%}";

// Mistral (v1): [INST] USER [/INST] ASSISTANT</s>[INST] ..., a system prompt before the first
// user message.
const char* const kMistral = MINFER_TEXT_MACRO
    "{%- set ns = namespace(system='') -%}"
    "{%- for message in messages -%}"
    "{%- if message['role'] == 'system' -%}{%- set ns.system = text(message['content']) | trim -%}"
    "{%- elif message['role'] == 'assistant' -%}{{- ' ' + text(message['content']) | trim + '</s>' -}}"
    "{%- else -%}"
    "{{- '[INST] ' + (ns.system + '\\n\\n' if ns.system else '') + text(message['content']) | trim + ' [/INST]' -}}"
    "{%- set ns.system = '' -%}"
    "{%- endif -%}"
    "{%- endfor -%}";

// Phi-3: <|ROLE|>\nCONTENT<|end|>\n; generation prompt <|assistant|>\n.
const char* const kPhi3 = MINFER_TEXT_MACRO
    "{%- for message in messages -%}"
    "{{- '<|' + message['role'] + '|>\\n' + text(message['content']) + '<|end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|assistant|>\\n' -}}{%- endif -%}";

// Zephyr: <|ROLE|>\nCONTENT</s>\n; generation prompt <|assistant|>\n.
const char* const kZephyr = MINFER_TEXT_MACRO
    "{%- for message in messages -%}"
    "{{- '<|' + message['role'] + '|>\\n' + text(message['content']) + '</s>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|assistant|>\\n' -}}{%- endif -%}";

// Vicuna: SYSTEM\n\nUSER: ...\nASSISTANT: ...</s>\n; generation prompt ASSISTANT:.
const char* const kVicuna = MINFER_TEXT_MACRO
    "{%- for message in messages -%}"
    "{%- if message['role'] == 'system' -%}{{- text(message['content']) + '\\n\\n' -}}"
    "{%- elif message['role'] == 'assistant' -%}{{- 'ASSISTANT: ' + text(message['content']) + '</s>\\n' -}}"
    "{%- else -%}{{- 'USER: ' + text(message['content']) + '\\n' -}}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- 'ASSISTANT:' -}}{%- endif -%}";

// Command R: <|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|> (USER_TOKEN, CHATBOT_TOKEN) CONTENT
// <|END_OF_TURN_TOKEN|>; generation prompt opens a CHATBOT turn.
const char* const kCommandR = MINFER_TEXT_MACRO
    "{%- set tags = {'system': 'SYSTEM', 'assistant': 'CHATBOT'} -%}"
    "{%- for message in messages -%}"
    "{{- '<|START_OF_TURN_TOKEN|><|' + tags.get(message['role'], 'USER') + '_TOKEN|>' + text(message['content']) + '<|END_OF_TURN_TOKEN|>' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>' -}}{%- endif -%}";

// Granite: <|start_of_role|>ROLE<|end_of_role|>CONTENT<|end_of_text|>\n.
const char* const kGranite = MINFER_TEXT_MACRO
    "{%- for message in messages -%}"
    "{{- '<|start_of_role|>' + message['role'] + '<|end_of_role|>' + text(message['content']) + '<|end_of_text|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|start_of_role|>assistant<|end_of_role|>' -}}{%- endif -%}";

#undef MINFER_TEXT_MACRO

const BuiltinTemplate kLegacy[] = {
    {"llama3", "Llama 3", kLlama3},     {"llama2", "Llama 2", kLlama2},         {"mistral", "Mistral", kMistral},
    {"phi3", "Phi-3", kPhi3},           {"zephyr", "Zephyr", kZephyr},          {"vicuna", "Vicuna", kVicuna},
    {"command-r", "Command R", kCommandR}, {"granite", "Granite", kGranite},
};

}  // namespace

std::span<const BuiltinTemplate> legacy_builtin_templates() { return kLegacy; }

}  // namespace minfer::jinja
