#include "api/fields-json.h"
#include "server/api-anthropic.h"

#include <fmt/format.h>

namespace minfer::server {
namespace {

ApiError image_unsupported(const std::string& where) {
  ApiError e;
  e.status = 500;  // llama-server's answer to media a text model cannot take
  e.type = "server_error";
  e.param = where;
  e.message = fmt::format("{}: image input is not supported by this model (minfer serves text models: no vision projector)", where);
  return e;
}

// A tool_result's content: a string, or text blocks (an image in it cannot be shown to the model).
ApiResult<std::string> tool_result_text(const json& c, const std::string& where) {
  if (c.is_null()) return std::string();
  if (c.is_string()) return c.get<std::string>();
  if (!c.is_array()) return invalid_param(where, fmt::format("'{}' must be a string or an array of blocks", where));
  std::string text;
  for (size_t i = 0; i < c.size(); ++i) {
    const json& b = c[i];
    const std::string at = fmt::format("{}[{}]", where, i);
    const std::string type = b.is_object() ? b.value("type", "") : "";
    if (type == "text" && b.contains("text") && b["text"].is_string()) {
      if (!text.empty()) text += "\n";
      text += b["text"].get<std::string>();
    } else if (type == "image") {
      return image_unsupported(at);
    } else {
      return invalid_param(at, fmt::format("'{}' must be a text block", at));
    }
  }
  return text;
}

}  // namespace

json anthropic_error_json(const ApiError& e) {
  // Anthropic's error types by status (minfer's own type goes on as "code" when it has none).
  const char* type = e.status == 400   ? "invalid_request_error"
                     : e.status == 401 ? "authentication_error"
                     : e.status == 403 ? "permission_error"
                     : e.status == 404 ? "not_found_error"
                     : e.status == 413 ? "request_too_large"
                     : e.status == 429 ? "rate_limit_error"
                     : e.status == 503 ? "overloaded_error"
                                       : "api_error";
  json inner = error_json(e)["error"];
  if (inner["code"].is_null() && e.type != type) inner["code"] = e.type;
  inner["type"] = type;
  return {{"type", "error"}, {"error", std::move(inner)}};
}

ApiResult<json> anthropic_to_chat(const json& body, bool count_only) {
  if (!body.is_object()) return invalid_param("", "the request body must be a JSON object");
  json out = json::object();
  json msgs = json::array();

  if (body.contains("system") && !body["system"].is_null()) {
    const json& sys = body["system"];
    std::string text;
    if (sys.is_string()) {
      text = sys.get<std::string>();
    } else if (sys.is_array()) {
      for (const json& b : sys) {
        if (!b.is_object() || b.value("type", "") != "text" || !b.contains("text") || !b["text"].is_string())
          return invalid_param("system", "'system' must be a string or an array of text blocks");
        if (!text.empty()) text += "\n";
        text += b["text"].get<std::string>();
      }
    } else {
      return invalid_param("system", "'system' must be a string or an array of text blocks");
    }
    msgs.push_back({{"role", "system"}, {"content", text}});
  }

  if (!body.contains("messages") || !body["messages"].is_array())
    return invalid_param("messages", "'messages' is required: an array of {role, content}");
  const json& in = body["messages"];
  for (size_t i = 0; i < in.size(); ++i) {
    const json& m = in[i];
    const std::string where = fmt::format("messages[{}]", i);
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string())
      return invalid_param(where, fmt::format("'{}' must be an object with a string 'role'", where));
    const std::string role = m["role"].get<std::string>();
    if (role != "user" && role != "assistant")
      return invalid_param(where + ".role", fmt::format("'{}.role' is '{}': Anthropic's roles are user and assistant", where, role));
    const json content = m.contains("content") ? m["content"] : json(nullptr);
    if (content.is_string() || content.is_null()) {
      msgs.push_back({{"role", role}, {"content", content.is_null() ? json("") : content}});
      continue;
    }
    if (!content.is_array()) return invalid_param(where + ".content", fmt::format("'{}.content' must be a string or an array of blocks", where));
    std::string text, reasoning;
    json calls = json::array(), results = json::array();
    for (size_t k = 0; k < content.size(); ++k) {
      const json& b = content[k];
      const std::string at = fmt::format("{}.content[{}]", where, k);
      if (!b.is_object() || !b.contains("type") || !b["type"].is_string())
        return invalid_param(at, fmt::format("'{}' must be a block with a string 'type'", at));
      const std::string type = b["type"].get<std::string>();
      if (type == "text") {
        if (!b.contains("text") || !b["text"].is_string()) return invalid_param(at + ".text", fmt::format("'{}.text' must be a string", at));
        text += b["text"].get<std::string>();
      } else if (type == "image" || type == "document") {
        if (type == "document") return invalid_param(at, fmt::format("'{}': document blocks are not supported", at));
        return image_unsupported(at);
      } else if (type == "tool_use") {
        if (role != "assistant") return invalid_param(at, fmt::format("'{}': tool_use blocks belong to assistant messages", at));
        if (!b.contains("id") || !b["id"].is_string() || !b.contains("name") || !b["name"].is_string())
          return invalid_param(at, fmt::format("'{}' needs a string 'id' and 'name'", at));
        const json input = b.contains("input") && b["input"].is_object() ? b["input"] : json::object();
        calls.push_back({{"id", b["id"]}, {"type", "function"},
                         {"function", {{"name", b["name"]}, {"arguments", tool_arguments_text(input)}}}});
      } else if (type == "tool_result") {
        if (role != "user") return invalid_param(at, fmt::format("'{}': tool_result blocks belong to user messages", at));
        if (!b.contains("tool_use_id") || !b["tool_use_id"].is_string())
          return invalid_param(at + ".tool_use_id", fmt::format("'{}' needs a string 'tool_use_id'", at));
        auto r = tool_result_text(b.contains("content") ? b["content"] : json(nullptr), at + ".content");
        if (auto* e = std::get_if<ApiError>(&r)) return *e;
        std::string result = std::get<std::string>(r);
        if (b.value("is_error", false)) result = "Error: " + result;
        results.push_back({{"role", "tool"}, {"tool_call_id", b["tool_use_id"]}, {"content", result}});
      } else if (type == "thinking") {
        if (b.contains("thinking") && b["thinking"].is_string()) reasoning += b["thinking"].get<std::string>();
      } else if (type == "redacted_thinking") {
        // Encrypted reasoning of Anthropic's models: nothing a local model can read.
      } else {
        return invalid_param(at + ".type", fmt::format("'{}.type' '{}' is not supported (text, tool_use, tool_result, thinking)", at, type));
      }
    }
    if (role == "assistant") {
      json msg = {{"role", "assistant"}, {"content", text}};
      if (!calls.empty()) msg["tool_calls"] = calls;
      if (!reasoning.empty()) msg["reasoning_content"] = reasoning;
      msgs.push_back(std::move(msg));
    } else {
      if (!text.empty() || results.empty()) msgs.push_back({{"role", "user"}, {"content", text}});
      for (json& r : results) msgs.push_back(std::move(r));
    }
  }
  out["messages"] = msgs;

  if (body.contains("tools") && !body["tools"].is_null()) {
    if (!body["tools"].is_array()) return invalid_param("tools", "'tools' must be an array");
    json tools = json::array();
    for (size_t i = 0; i < body["tools"].size(); ++i) {
      const json& t = body["tools"][i];
      const std::string at = fmt::format("tools[{}]", i);
      if (!t.is_object() || !t.contains("name") || !t["name"].is_string())
        return invalid_param(at, fmt::format("'{}' must be {{name, description, input_schema}}", at));
      if (t.contains("type") && t["type"].is_string() && t["type"].get<std::string>() != "custom")
        return invalid_param(at + ".type", fmt::format("'{}': Anthropic's server tools ({}) are not available here", at, t["type"].get<std::string>()));
      json fn = {{"name", t["name"]}, {"parameters", t.contains("input_schema") ? t["input_schema"] : json{{"type", "object"}}}};
      if (t.contains("description") && t["description"].is_string()) fn["description"] = t["description"];
      tools.push_back({{"type", "function"}, {"function", fn}});
    }
    if (!tools.empty()) out["tools"] = tools;
  }
  if (body.contains("tool_choice") && !body["tool_choice"].is_null()) {
    const json& tc = body["tool_choice"];
    const std::string type = tc.is_object() ? tc.value("type", "") : "";
    if (type == "auto") out["tool_choice"] = "auto";
    else if (type == "any") out["tool_choice"] = "required";
    else if (type == "none") out["tool_choice"] = "none";
    else if (type == "tool" && tc.contains("name") && tc["name"].is_string())
      out["tool_choice"] = {{"type", "function"}, {"function", {{"name", tc["name"]}}}};
    else return invalid_param("tool_choice", "'tool_choice' must be {\"type\": auto|any|none} or {\"type\": \"tool\", \"name\": NAME}");
    if (tc.value("disable_parallel_tool_use", false)) out["parallel_tool_calls"] = false;
  }
  // Anthropic's default lets a reply use several tools (OpenAI's parallel_tool_calls).
  if (out.contains("tools") && !out.contains("parallel_tool_calls")) out["parallel_tool_calls"] = true;

  // Anthropic's rule: a reply says how long it may be. Its value, and every other generation field
  // (temperature, top_p, top_k, stop_sequences), parse reads by Anthropic's names from the table.
  if (!count_only && (!body.contains("max_tokens") || body["max_tokens"].is_null()))
    return invalid_param("max_tokens", "'max_tokens' is required");
  api::copy_fields(body, Api::kAnthropic, out);
  if (body.contains("stream") && !body["stream"].is_null()) out["stream"] = body["stream"];
  if (body.contains("thinking") && body["thinking"].is_object()) {
    const std::string type = body["thinking"].value("type", "");
    if (type == "enabled") out["chat_template_kwargs"] = {{"enable_thinking", true}};
    else if (type == "disabled") out["chat_template_kwargs"] = {{"enable_thinking", false}};
    else return invalid_param("thinking.type", "'thinking.type' must be enabled or disabled");
  }
  return out;
}

}  // namespace minfer::server
