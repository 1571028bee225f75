#include "server/api-responses.h"

#include <fmt/format.h>

namespace minfer::server {
namespace {

bool has_string(const json& j, const char* key) { return j.contains(key) && j[key].is_string(); }

// A message's content: a string, or input_text / output_text parts (joined as chat text parts).
ApiResult<json> message_content(const json& content, const std::string& where) {
  if (content.is_string()) return content;
  if (content.is_null()) return json("");
  if (!content.is_array()) return invalid_param(where, fmt::format("'{}' must be a string or an array of input_text parts", where));
  json parts = json::array();
  for (size_t k = 0; k < content.size(); ++k) {
    const json& p = content[k];
    const std::string at = fmt::format("{}[{}]", where, k);
    const std::string type = p.is_object() ? p.value("type", "") : "";
    if (type == "input_text" || type == "output_text") {
      if (!has_string(p, "text")) return invalid_param(at + ".text", fmt::format("'{}.text' must be a string", at));
      parts.push_back({{"type", "text"}, {"text", p["text"]}});
    } else if (type == "refusal") {
      if (!has_string(p, "refusal")) return invalid_param(at + ".refusal", fmt::format("'{}.refusal' must be a string", at));
      parts.push_back({{"type", "text"}, {"text", p["refusal"]}});
    } else if (type == "input_image" || type == "input_file") {
      return invalid_param(at, fmt::format("'{}': {} is not supported (minfer serves text models)", at, type));
    } else {
      return invalid_param(at + ".type", fmt::format("'{}.type' '{}' is not one of input_text, output_text, refusal", at, type));
    }
  }
  return parts;
}

// `msgs` (the instructions' system message, if any) and the messages of "input".
ApiResult<json> input_messages(const json& input, json msgs) {
  if (input.is_string()) {
    msgs.push_back({{"role", "user"}, {"content", input}});
    return msgs;
  }
  if (!input.is_array()) return invalid_param("input", "'input' must be a string or an array of items");
  // Function calls, their outputs and reasoning items follow one another as separate items: the
  // calls and reasoning of one assistant turn merge into one assistant message.
  auto assistant = [&]() -> json& {
    if (msgs.empty() || msgs.back().value("role", "") != "assistant") msgs.push_back({{"role", "assistant"}, {"content", ""}});
    return msgs.back();
  };
  for (size_t i = 0; i < input.size(); ++i) {
    const json& item = input[i];
    const std::string where = fmt::format("input[{}]", i);
    if (!item.is_object()) return invalid_param(where, fmt::format("'{}' must be an object", where));
    const std::string type = item.value("type", has_string(item, "role") ? "message" : "");
    if (type == "message") {
      if (!has_string(item, "role")) return invalid_param(where + ".role", fmt::format("'{}.role' must be a string", where));
      const std::string role = item["role"].get<std::string>();
      if (role != "user" && role != "system" && role != "developer" && role != "assistant")
        return invalid_param(where + ".role", fmt::format("'{}.role' is '{}': not one of user, system, developer, assistant", where, role));
      auto content = message_content(item.contains("content") ? item["content"] : json(nullptr), where + ".content");
      if (auto* e = std::get_if<ApiError>(&content)) return *e;
      json& c = std::get<json>(content);
      if (role == "assistant" && !msgs.empty() && msgs.back().value("role", "") == "assistant" &&
          msgs.back()["content"] == json("")) {
        msgs.back()["content"] = std::move(c);  // text after this turn's reasoning item
      } else {
        msgs.push_back({{"role", role}, {"content", std::move(c)}});
      }
    } else if (type == "function_call") {
      for (const char* k : {"call_id", "name", "arguments"})
        if (!has_string(item, k)) return invalid_param(where + "." + k, fmt::format("'{}.{}' must be a string", where, k));
      json& m = assistant();
      if (!m.contains("tool_calls")) m["tool_calls"] = json::array();
      m["tool_calls"].push_back({{"id", item["call_id"]}, {"type", "function"},
                                 {"function", {{"name", item["name"]}, {"arguments", item["arguments"]}}}});
    } else if (type == "function_call_output") {
      if (!has_string(item, "call_id")) return invalid_param(where + ".call_id", fmt::format("'{}.call_id' must be a string", where));
      auto out = message_content(item.contains("output") ? item["output"] : json(nullptr), where + ".output");
      if (auto* e = std::get_if<ApiError>(&out)) return *e;
      msgs.push_back({{"role", "tool"}, {"tool_call_id", item["call_id"]}, {"content", std::get<json>(out)}});
    } else if (type == "reasoning") {
      std::string text;
      for (const char* key : {"content", "summary"}) {  // the reasoning text, else its summary
        if (!text.empty() || !item.contains(key) || !item[key].is_array()) continue;
        for (const json& p : item[key])
          if (p.is_object() && has_string(p, "text")) text += p["text"].get<std::string>();
      }
      if (!text.empty()) assistant()["reasoning_content"] = text;
    } else if (type == "item_reference") {
      return invalid_param(where, fmt::format("'{}': item_reference needs stored responses, which minfer does not keep", where));
    } else {
      return invalid_param(where + ".type", fmt::format("'{}.type' '{}' is not one of message, function_call, "
                                                        "function_call_output, reasoning", where, type));
    }
  }
  return msgs;
}

}  // namespace

ApiResult<json> responses_to_chat(const json& body) {
  if (!body.is_object()) return invalid_param("", "the request body must be a JSON object");
  if (!body.contains("input")) return invalid_param("input", "'input' is required: a string or an array of items");
  if (body.contains("previous_response_id") && !body["previous_response_id"].is_null())
    return invalid_param("previous_response_id", "'previous_response_id': minfer stores no responses; send the whole conversation as 'input'");
  // Every field the chat request shares (temperature, top_p, stream, seed, llama-server's ...);
  // parse reads max_output_tokens by the Responses names of the field table.
  json out = body;
  for (const char* k : {"input", "instructions", "tools", "tool_choice", "text", "reasoning", "messages",
                        "previous_response_id", "store", "metadata", "include", "truncation", "background", "prompt", "n",
                        "response_format", "service_tier", "user", "top_logprobs"})
    out.erase(k);
  json msgs = json::array();
  if (body.contains("instructions") && !body["instructions"].is_null()) {
    if (!body["instructions"].is_string()) return invalid_param("instructions", "'instructions' must be a string");
    msgs.push_back({{"role", "system"}, {"content", body["instructions"]}});
  }
  auto messages = input_messages(body["input"], std::move(msgs));
  if (!messages) return messages.error();
  out["messages"] = std::move(*messages);

  if (body.contains("tools") && !body["tools"].is_null()) {
    if (!body["tools"].is_array()) return invalid_param("tools", "'tools' must be an array");
    json tools = json::array();
    for (size_t i = 0; i < body["tools"].size(); ++i) {
      const json& t = body["tools"][i];
      const std::string at = fmt::format("tools[{}]", i);
      if (!t.is_object() || !has_string(t, "type")) return invalid_param(at, fmt::format("'{}' must be an object with a string 'type'", at));
      if (t["type"] != "function") continue;  // web_search, file_search ...: OpenAI's hosted tools, nothing to run here
      if (!has_string(t, "name")) return invalid_param(at + ".name", fmt::format("'{}.name' must be a string", at));
      json fn = {{"name", t["name"]}, {"parameters", t.contains("parameters") ? t["parameters"] : json{{"type", "object"}}}};
      for (const char* k : {"description", "strict"})
        if (t.contains(k) && !t[k].is_null()) fn[k] = t[k];
      tools.push_back({{"type", "function"}, {"function", std::move(fn)}});
    }
    if (!tools.empty()) out["tools"] = std::move(tools);
  }
  if (body.contains("tool_choice") && !body["tool_choice"].is_null()) {
    const json& tc = body["tool_choice"];
    if (tc.is_string()) {
      out["tool_choice"] = tc;
    } else if (tc.is_object() && tc.value("type", "") == "function" && has_string(tc, "name")) {
      out["tool_choice"] = {{"type", "function"}, {"function", {{"name", tc["name"]}}}};
    } else {
      return invalid_param("tool_choice", "'tool_choice' must be auto, none, required or {\"type\": \"function\", \"name\": NAME}");
    }
  }
  if (body.contains("text") && body["text"].is_object() && body["text"].contains("format")) {
    const json& f = body["text"]["format"];
    const std::string type = f.is_object() ? f.value("type", "") : "";
    if (type == "json_schema") {
      json js = {{"schema", f.contains("schema") ? f["schema"] : json(nullptr)}};
      for (const char* k : {"name", "strict"})
        if (f.contains(k)) js[k] = f[k];
      out["response_format"] = {{"type", "json_schema"}, {"json_schema", std::move(js)}};
    } else if (type == "json_object" || type == "text") {
      out["response_format"] = {{"type", type}};
    } else {
      return invalid_param("text.format.type", "'text.format.type' must be text, json_object or json_schema");
    }
  }
  return out;
}

json response_usage_json(int n_prompt, int n_gen, int n_cached) {
  return {{"input_tokens", n_prompt}, {"input_tokens_details", {{"cached_tokens", n_cached}}}, {"output_tokens", n_gen},
          {"output_tokens_details", {{"reasoning_tokens", 0}}}, {"total_tokens", n_prompt + n_gen}};
}

json response_json(const ResponseMeta& m, const std::string& status, json output, json usage) {
  const json& q = m.request;
  auto echo = [&](const char* k, json dflt) { return q.contains(k) && !q[k].is_null() ? q[k] : dflt; };
  json r = {{"id", m.id}, {"object", "response"}, {"created_at", m.created_at}, {"status", status}, {"error", nullptr},
            {"incomplete_details", status == "incomplete" ? json{{"reason", "max_output_tokens"}} : json(nullptr)},
            {"instructions", echo("instructions", nullptr)}, {"max_output_tokens", echo("max_output_tokens", nullptr)},
            {"model", m.model}, {"output", std::move(output)}, {"parallel_tool_calls", echo("parallel_tool_calls", true)},
            {"previous_response_id", nullptr}, {"temperature", echo("temperature", nullptr)},
            {"tool_choice", echo("tool_choice", "auto")}, {"tools", echo("tools", json::array())}, {"top_p", echo("top_p", nullptr)},
            {"text", echo("text", json{{"format", {{"type", "text"}}}})}, {"metadata", echo("metadata", json::object())},
            {"usage", std::move(usage)}};
  return r;
}

json output_text_part(const std::string& text) {
  return {{"type", "output_text"}, {"text", text}, {"annotations", json::array()}, {"logprobs", json::array()}};
}

json message_item(const std::string& id, const std::string& status, const std::string& text) {
  json content = json::array();
  if (status != "in_progress" || !text.empty()) content.push_back(output_text_part(text));
  return {{"type", "message"}, {"id", id}, {"status", status}, {"role", "assistant"}, {"content", std::move(content)}};
}

json reasoning_item(const std::string& id, const std::string& status, const std::string& text) {
  json content = json::array();
  if (!text.empty()) content.push_back({{"type", "reasoning_text"}, {"text", text}});
  return {{"type", "reasoning"}, {"id", id}, {"status", status}, {"summary", json::array()}, {"content", std::move(content)}};
}

json function_call_item(const std::string& id, const std::string& status, const std::string& call_id, const std::string& name,
                        const std::string& arguments) {
  return {{"type", "function_call"}, {"id", id}, {"status", status}, {"call_id", call_id}, {"name", name}, {"arguments", arguments}};
}

}  // namespace minfer::server
