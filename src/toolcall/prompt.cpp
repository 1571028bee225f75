// Messages for the template when tools are in play (tools.h): history calls in the shape the
// template renders, and for templates without tool support a system message that describes the
// tools and the JSON reply format, with history calls and results written as that JSON.
#include <string>

#include "toolcall/tools.h"

namespace minfer::toolcall {
namespace {

// OpenAI sends arguments as a JSON string; templates that apply tojson want the object.
json arguments_object(const json& args) {
  if (!args.is_string()) return args;
  try {
    json v = json::parse(args.get<std::string>());
    if (v.is_object()) return v;
  } catch (const json::exception&) {
  }
  return args;
}

std::string generic_system_text(const ToolRequest& req) {
  std::string s = "You can call these tools. Each is given as its name, what it does, and a JSON Schema of its arguments:\n";
  for (const Tool& t : req.tools) {
    if (req.choice == ToolChoice::kNamed && t.name != req.named) continue;
    json d = {{"name", t.name}, {"description", t.description}, {"parameters", t.parameters}};
    s += d.dump() + "\n";
  }
  const bool forced = req.choice == ToolChoice::kRequired || req.choice == ToolChoice::kNamed;
  s += "\nReply with one JSON object and nothing else. To call tools: {\"tool_calls\": [{\"name\": \"<tool name>\", "
       "\"arguments\": {<arguments>}}]}";
  s += req.parallel ? " (one or more calls)." : " (exactly one call).";
  if (!forced) s += " To answer without a tool: {\"response\": \"<your answer>\"}.";
  return s;
}

}  // namespace

json prepare_messages(const TemplateTools& tt, const ToolRequest& req, json messages) {
  if (!messages.is_array()) return messages;
  if (tt.syntax != Syntax::kGeneric) {
    if (tt.object_arguments)
      for (json& m : messages)
        if (m.contains("tool_calls") && m["tool_calls"].is_array())
          for (json& c : m["tool_calls"])
            if (c.is_object() && c.contains("function") && c["function"].is_object() && c["function"].contains("arguments"))
              c["function"]["arguments"] = arguments_object(c["function"]["arguments"]);
    return messages;
  }
  // Generic: calls and results as JSON text, which any template renders.
  json out = json::array();
  for (const json& m : messages) {
    json msg = m;
    const std::string role = m.value("role", "");
    if (role == "assistant" && m.contains("tool_calls") && m["tool_calls"].is_array() && !m["tool_calls"].empty()) {
      json calls = json::array();
      for (const json& c : m["tool_calls"]) {
        if (!c.is_object()) continue;
        const json f = c.value("function", json::object());
        json call = {{"name", f.value("name", "")}, {"arguments", arguments_object(f.value("arguments", json::object()))}};
        if (c.contains("id")) call["id"] = c["id"];
        calls.push_back(std::move(call));
      }
      msg.erase("tool_calls");
      msg["content"] = json{{"tool_calls", calls}}.dump();
    } else if (role == "tool") {
      json result = {{"tool_response", {{"content", m.value("content", json(""))}}}};
      if (m.contains("tool_call_id")) result["tool_response"]["tool_call_id"] = m["tool_call_id"];
      if (m.contains("name")) result["tool_response"]["name"] = m["name"];
      msg = {{"role", "user"}, {"content", result.dump()}};
    }
    out.push_back(std::move(msg));
  }
  if (req.choice == ToolChoice::kNone || req.tools.empty()) return out;
  const std::string text = generic_system_text(req);
  if (!out.empty() && out[0].value("role", "") == "system" && out[0]["content"].is_string()) {
    out[0]["content"] = out[0]["content"].get<std::string>() + "\n\n" + text;
  } else {
    out.insert(out.begin(), json{{"role", "system"}, {"content", text}});
  }
  return out;
}

}  // namespace minfer::toolcall
