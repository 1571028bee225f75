// What a chat template does with tools: its call syntax by the markers it writes, and two
// rendering probes (are the tools written; does a history call need object arguments).
#include <string>

#include "template/chat.h"
#include "toolcall/tools.h"

namespace minfer::toolcall {
namespace {

constexpr const char* kProbeName = "minfer_probe_fn";
constexpr const char* kProbeKey = "minfer_probe_key";

json probe_tools() {
  return json::array({{{"type", "function"},
                       {"function",
                        {{"name", kProbeName},
                         {"description", "probe"},
                         {"parameters", {{"type", "object"}, {"properties", {{kProbeKey, {{"type", "string"}}}}}}}}}}});
}

// The template's text for these render arguments, or "" when it fails (raise_exception...).
std::string render(std::string_view source, json args) {
  args["add_generation_prompt"] = true;
  auto inputs = jinja::chat_inputs_from_json(args.dump());
  if (!inputs) return {};
  jinja::set_default_token(*inputs, "bos_token", "");
  jinja::set_default_token(*inputs, "eos_token", "");
  auto text = jinja::render_chat(source, *inputs, {});
  return text ? *text : std::string();
}

}  // namespace

const char* syntax_name(Syntax s) {
  switch (s) {
    case Syntax::kHermes: return "hermes";
    case Syntax::kLlama3: return "llama3";
    case Syntax::kMistral: return "mistral";
    case Syntax::kMistralArgs: return "mistral-args";
    case Syntax::kGeneric: return "generic";
  }
  return "?";
}

TemplateTools probe_template(std::string_view source) {
  TemplateTools tt;
  const auto has = [&](std::string_view s) { return source.find(s) != std::string_view::npos; };
  if (has("<tool_call>")) {
    tt.syntax = Syntax::kHermes;
  } else if (has("[TOOL_CALLS]")) {
    tt.syntax = has("[ARGS]") ? Syntax::kMistralArgs : Syntax::kMistral;
    tt.call_id_marker = has("[CALL_ID]");
  } else if (has("<|start_header_id|>") && (has("\"parameters\"") || has("ipython"))) {
    tt.syntax = Syntax::kLlama3;
  }
  tt.nine_char_ids = has("length != 9") || has("length == 9");
  const json user = {{"role", "user"}, {"content", "minfer probe"}};
  tt.renders_tools = render(source, {{"messages", json::array({user})}, {"tools", probe_tools()}}).find(kProbeName) != std::string::npos;
  if (!tt.renders_tools) tt.syntax = Syntax::kGeneric;  // the model could not know the tools
  const json call = {{"id", "probe0001"},
                     {"type", "function"},
                     {"function", {{"name", kProbeName}, {"arguments", {{kProbeKey, "v"}}}}}};
  const json msgs = json::array({user,
                                 {{"role", "assistant"}, {"content", ""}, {"tool_calls", json::array({call})}},
                                 {{"role", "tool"}, {"tool_call_id", "probe0001"}, {"name", kProbeName}, {"content", "ok"}}});
  const std::string text = render(source, {{"messages", msgs}, {"tools", probe_tools()}});
  const std::string key = std::string("\"") + kProbeKey + "\"";
  const size_t at = text.find(key);
  if (at != std::string::npos) {
    size_t i = at + key.size();
    while (i < text.size() && text[i] == ' ') ++i;
    tt.object_arguments = i < text.size() && text[i] == ':';
  }
  return tt;
}

bool template_gets_tools(const TemplateTools& tt, const ToolRequest& req) {
  return tt.syntax != Syntax::kGeneric && req.choice != ToolChoice::kNone && !req.tools.empty();
}

}  // namespace minfer::toolcall
