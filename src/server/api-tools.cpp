#include "server/api-tools.h"

#include <fmt/format.h>

namespace minfer::server {
namespace {

bool valid_name(const std::string& n) {
  if (n.empty() || n.size() > 64) return false;
  for (const char c : n)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-')) return false;
  return true;
}

}  // namespace

ApiResult<toolcall::ToolRequest> parse_tool_fields(const json& body) {
  using toolcall::ToolChoice;
  toolcall::ToolRequest out;
  auto tools = body.find("tools");
  if (tools != body.end() && !tools->is_null()) {
    if (!tools->is_array()) return invalid_param("tools", "'tools' must be an array of {\"type\": \"function\", \"function\": {...}}");
    for (size_t i = 0; i < tools->size(); ++i) {
      const json& t = (*tools)[i];
      const std::string at = fmt::format("tools[{}]", i);
      if (!t.is_object()) return invalid_param(at, fmt::format("'{}' must be an object", at));
      if (t.value("type", "") != "function")
        return invalid_param(at + ".type", fmt::format("'{}.type' must be 'function' (the only tool type supported), got {}", at,
                                             t.contains("type") ? t["type"].dump() : "nothing"));
      auto f = t.find("function");
      if (f == t.end() || !f->is_object()) return invalid_param(at + ".function", fmt::format("'{}.function' must be an object", at));
      toolcall::Tool tool;
      auto name = f->find("name");
      if (name == f->end() || !name->is_string() || !valid_name(name->get<std::string>()))
        return invalid_param(at + ".function.name", fmt::format("'{}.function.name' must be 1 to 64 letters, digits, '_' or '-', got {}", at,
                                                      name == f->end() ? "nothing" : name->dump()));
      tool.name = name->get<std::string>();
      for (const auto& prev : out.tools)
        if (prev.name == tool.name) return invalid_param(at + ".function.name", fmt::format("two tools are named '{}'", tool.name));
      if (auto d = f->find("description"); d != f->end() && !d->is_null()) {
        if (!d->is_string()) return invalid_param(at + ".function.description", fmt::format("'{}.function.description' must be a string", at));
        tool.description = d->get<std::string>();
      }
      if (auto p = f->find("parameters"); p != f->end() && !p->is_null()) {
        if (!p->is_object()) return invalid_param(at + ".function.parameters", fmt::format("'{}.function.parameters' must be a JSON Schema object", at));
        tool.parameters = *p;
      }
      if (auto st = f->find("strict"); st != f->end() && !st->is_null() && !st->is_boolean())
        return invalid_param(at + ".function.strict", fmt::format("'{}.function.strict' must be a boolean", at));
      out.tools.push_back(std::move(tool));
    }
    out.tools_json = *tools;
  }
  auto choice = body.find("tool_choice");
  if (choice != body.end() && !choice->is_null()) {
    if (out.tools.empty()) return invalid_param("tool_choice", "'tool_choice' is only allowed when 'tools' are given");
    if (choice->is_string()) {
      const std::string c = choice->get<std::string>();
      if (c == "auto") out.choice = ToolChoice::kAuto;
      else if (c == "none") out.choice = ToolChoice::kNone;
      else if (c == "required") out.choice = ToolChoice::kRequired;
      else return invalid_param("tool_choice", fmt::format("'tool_choice' is '{}', not one of auto, none, required or {{\"type\": \"function\", \"function\": {{\"name\": ...}}}}", c));
    } else if (choice->is_object()) {
      auto f = choice->find("function");
      if (choice->value("type", "") != "function" || f == choice->end() || !f->is_object() || !f->contains("name") || !(*f)["name"].is_string())
        return invalid_param("tool_choice", "'tool_choice' as an object must be {\"type\": \"function\", \"function\": {\"name\": NAME}}");
      out.choice = ToolChoice::kNamed;
      out.named = (*f)["name"].get<std::string>();
      bool found = false;
      for (const auto& t : out.tools) found = found || t.name == out.named;
      if (!found) return invalid_param("tool_choice", fmt::format("'tool_choice' names the function '{}', which is not in 'tools'", out.named));
    } else {
      return invalid_param("tool_choice", "'tool_choice' must be a string or an object");
    }
  }
  auto par = body.find("parallel_tool_calls");
  if (par != body.end() && !par->is_null()) {
    if (!par->is_boolean()) return invalid_param("parallel_tool_calls", "'parallel_tool_calls' must be a boolean");
    out.parallel = par->get<bool>();
  }
  return out;
}

}  // namespace minfer::server
