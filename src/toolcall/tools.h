// OpenAI function calling over a chat template: what the template does with tools, the grammar
// that keeps a model's calls well formed, and the prompt changes that go with it. The parser of
// the calls is in parser.h.
//
//   TemplateTools tt = probe_template(template_source);          // once per template
//   ToolRequest req{.tools = {{"get_weather", "", params}}, .choice = ToolChoice::kAuto};
//   auto plan = plan_tool_calls(tt, req);                        // Expected<ToolPlan>
//   json msgs = prepare_messages(tt, req, messages);             // arguments, generic prompt
//   prompt = render(msgs, tools) + plan->prompt_suffix;
//   // generate with plan->gbnf (lazy when plan->triggers is not empty), then
//   ToolCallParser p(*plan); p.feed(text); p.finish();
//
// The syntax of the calls follows the template's family:
//   kHermes   <tool_call>\n{"name": N, "arguments": {...}}\n</tool_call>   (Qwen 2.5/3, Hermes)
//   kLlama3   {"name": N, "parameters": {...}}                             (Llama 3.1-3.3; one call)
//   kMistral  [TOOL_CALLS][{"name": N, "arguments": {...}}, ...]           (Mistral Nemo and kin)
//   kMistralArgs  [TOOL_CALLS]N[ARGS]{...}, each call so (Mistral Small 3.x, Devstral,
//             Ministral 3; [TOOL_CALLS]N[CALL_ID]id[ARGS]{...} where the template writes ids)
//   kGeneric  {"tool_calls": [{"name": N, "arguments": {...}}]} or {"response": "..."}, for a
//             template without tool support: the tools and this format are described in a
//             system message, and the whole reply is constrained (also in `auto` mode).
// tool_choice: auto (prose or calls: the grammar starts at the call marker; Llama 3: at a reply
// that opens with {"name"), required (calls only: the marker ends the prompt), a named function
// (required, that function only), none (no tools in the prompt, no grammar).
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "grammar/trigger.h"

namespace minfer::toolcall {

using json = nlohmann::ordered_json;

enum class Syntax { kHermes, kLlama3, kMistral, kMistralArgs, kGeneric };
const char* syntax_name(Syntax s);  // "hermes", "llama3", "mistral", "mistral-args", "generic"

struct Tool {
  std::string name;
  std::string description;
  json parameters = json::object();  // a JSON Schema of the arguments object
};

enum class ToolChoice { kAuto, kNone, kRequired, kNamed };

struct ToolRequest {
  std::vector<Tool> tools;
  ToolChoice choice = ToolChoice::kAuto;
  std::string named;     // kNamed: the function
  bool parallel = false;  // parallel_tool_calls: more than one call per reply (llama-server's default: off)
  json tools_json = json::array();  // the request's `tools` as given (what the template renders)
};

// What a template does with tools, found by rendering probes once.
struct TemplateTools {
  Syntax syntax = Syntax::kGeneric;
  bool renders_tools = false;     // the template writes the tools it is given
  bool object_arguments = false;  // history tool_calls need `arguments` as an object (tojson)
  bool nine_char_ids = false;     // the template refuses tool call ids that are not 9 characters (Mistral)
  bool call_id_marker = false;    // kMistralArgs: the template writes [CALL_ID]id before [ARGS]
};
TemplateTools probe_template(std::string_view template_source);

// What one request generates with.
struct ToolPlan {
  Syntax syntax = Syntax::kGeneric;
  std::string gbnf;                      // the grammar of the reply
  std::vector<GrammarTrigger> triggers;  // lazy: free text until one appears (empty: from the start)
  std::string prompt_suffix;             // appended to the rendered prompt (the call marker)
  bool starts_in_calls = false;          // the reply starts inside the calls (after prompt_suffix)
  bool parallel = true;
  bool nine_char_ids = false;            // call ids of 9 letters and digits
  bool call_id_marker = false;           // kMistralArgs: [CALL_ID]id may come before [ARGS]
};
// Errors name the tool and the schema pointer ("tools[1].function.parameters: json-schema
// #/properties/x: unsupported keyword 'not'").
Expected<ToolPlan> plan_tool_calls(const TemplateTools& tt, const ToolRequest& req);

// The messages as the template wants them: history tool_calls with object arguments where the
// template needs them; for kGeneric, a system message describing the tools and the reply format,
// history calls as that JSON, and tool results as user messages.
json prepare_messages(const TemplateTools& tt, const ToolRequest& req, json messages);

// Whether the template should be given `tools` (not for kGeneric, nor tool_choice none).
bool template_gets_tools(const TemplateTools& tt, const ToolRequest& req);

}  // namespace minfer::toolcall
