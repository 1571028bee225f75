// The grammar of a reply with tool calls (tools.h), built from the tools' argument schemas by
// the JSON Schema converter: one schema for "a call of one of these tools", wrapped in the
// family's markers.
#include <fmt/format.h>

#include "grammar/gbnf.h"
#include "grammar/json-schema.h"
#include "toolcall/tools.h"

namespace minfer::toolcall {
namespace {

// Rule names the converter must leave to us.
const std::vector<std::string> kReserved = {"root", "tool-call", "tool-reply", "tool-sp", "tool-body", "tool-one", "tool-id"};

// "json-schema #/$defs/<prefix>N/..." -> "tools[N].function.parameters: json-schema #/..."
std::string name_the_tool(std::string msg, const std::string& prefix, const std::vector<size_t>& index) {
  const std::string at_text = "#/$defs/" + prefix;
  const size_t at = msg.find(at_text);
  if (at == std::string::npos) return msg;
  size_t i = at + at_text.size(), n = 0;
  while (i < msg.size() && std::isdigit(static_cast<unsigned char>(msg[i]))) n = n * 10 + static_cast<size_t>(msg[i++] - '0');
  const size_t tool = n < index.size() ? index[n] : n;
  return fmt::format("tools[{}].function.parameters: {}", tool, msg.substr(0, at) + "#" + msg.substr(i));
}

// A GBNF literal of a tool name.
std::string gbnf_quote(const std::string& s) {
  std::string out = "\"";
  for (const unsigned char c : s) {
    if (c == '"' || c == '\\') out += '\\', out += static_cast<char>(c);
    else if (c < 0x20) out += fmt::format("\\x{:02X}", c);
    else out += static_cast<char>(c);
  }
  return out + "\"";
}

json params_schema(const Tool& t) {
  return t.parameters.is_null() || (t.parameters.is_object() && t.parameters.empty())
             ? json{{"type", "object"}, {"properties", json::object()}}
             : t.parameters;
}

// [TOOL_CALLS]NAME[ARGS]{...}: the names are not JSON, so each tool's arguments get their own rule.
Expected<std::string> mistral_args_rules(const ToolRequest& req, bool id_marker) {
  std::vector<std::string> schemas, roots;
  std::vector<size_t> index;
  std::string one = "tool-one ::= ";
  for (size_t i = 0; i < req.tools.size(); ++i) {
    const Tool& t = req.tools[i];
    if (req.choice == ToolChoice::kNamed && t.name != req.named) continue;
    schemas.push_back(params_schema(t).dump());
    roots.push_back(fmt::format("tool-args-{}", i));
    one += fmt::format("{}{} tool-id \"[ARGS]\" {}", index.empty() ? "" : " | ", gbnf_quote(t.name), roots.back());
    index.push_back(i);
  }
  if (index.empty()) return make_error("tool_choice names '{}', which is not one of the tools", req.named);
  std::vector<std::string> reserved = kReserved;
  auto rules = json_schema_rules_many(schemas, roots, reserved);
  if (!rules) return Error{name_the_tool(rules.error().message, "s", index)};
  const std::string id = id_marker ? "tool-id ::= (\"[CALL_ID]\" [a-zA-Z0-9]{9})?\n" : "tool-id ::= \"\"\n";
  return one + "\n" + id + *rules;
}

std::string args_key(Syntax s) { return s == Syntax::kLlama3 ? "parameters" : "arguments"; }

// {"anyOf": [{"name": const, <args>: $ref}...], "$defs": {...}} -> the rules of `tool-call`,
// or of `tool-reply` for the generic format's whole reply.
Expected<std::string> call_rules(Syntax syntax, const ToolRequest& req, bool calls_only) {
  json defs = json::object();
  json calls = json::array();
  for (size_t i = 0; i < req.tools.size(); ++i) {
    const Tool& t = req.tools[i];
    if (req.choice == ToolChoice::kNamed && t.name != req.named) continue;
    const std::string def = fmt::format("tool{}", i);
    json params = params_schema(t);
    rebase_schema_refs(params, def);
    defs[def] = params;
    json call = {{"type", "object"},
                 {"properties", {{"name", {{"const", t.name}}}, {args_key(syntax), {{"$ref", "#/$defs/" + def}}}}},
                 {"required", json::array({"name", args_key(syntax)})}};
    // Mistral's templates write the call's id after its arguments: the model may too.
    if (syntax == Syntax::kMistral) call["properties"]["id"] = {{"type", "string"}, {"pattern", "^[a-zA-Z0-9]{9}$"}};
    calls.push_back(std::move(call));
  }
  if (calls.empty()) return make_error("tool_choice names '{}', which is not one of the tools", req.named);
  json call = calls.size() == 1 ? calls[0] : json{{"anyOf", calls}};
  json schema;
  std::string root = "tool-call";
  if (syntax == Syntax::kGeneric) {
    json list = {{"type", "array"}, {"items", call}, {"minItems", 1}};
    if (!req.parallel) list["maxItems"] = 1;
    json with_calls = {{"type", "object"}, {"properties", {{"tool_calls", list}}}, {"required", json::array({"tool_calls"})}};
    json reply = {{"type", "object"}, {"properties", {{"response", {{"type", "string"}}}}}, {"required", json::array({"response"})}};
    schema = calls_only ? with_calls : json{{"anyOf", json::array({with_calls, reply})}};
    root = "tool-reply";
  } else {
    schema = call;
  }
  schema["$defs"] = defs;
  auto rules = json_schema_rules(schema.dump(), root, kReserved);
  if (!rules) return Error{name_the_tool(rules.error().message, "tool", {})};  // defs are named by the tool's index
  return rules;
}

}  // namespace

Expected<ToolPlan> plan_tool_calls(const TemplateTools& tt, const ToolRequest& req) {
  ToolPlan p;
  p.syntax = tt.syntax;
  p.nine_char_ids = tt.nine_char_ids;
  p.parallel = req.parallel && tt.syntax != Syntax::kLlama3;  // Llama 3's template takes one call per message
  if (req.choice == ToolChoice::kNone || req.tools.empty()) return p;
  ToolRequest r = req;
  r.parallel = p.parallel;
  const bool forced = req.choice == ToolChoice::kRequired || req.choice == ToolChoice::kNamed;
  auto rules = tt.syntax == Syntax::kMistralArgs ? mistral_args_rules(r, tt.call_id_marker) : call_rules(tt.syntax, r, forced);
  if (!rules) return rules.error();
  p.call_id_marker = tt.call_id_marker;
  std::string root;
  const char* sp = "tool-sp ::= [ \\t\\n]{0,4}\n";
  switch (tt.syntax) {
    case Syntax::kHermes:
      root = "root ::= tool-body" + std::string(p.parallel ? " (tool-sp \"<tool_call>\" tool-body)*" : "") + "\n" +
             "tool-body ::= tool-sp tool-call tool-sp \"</tool_call>\"\n";
      if (forced) p.prompt_suffix = "<tool_call>";
      else p.triggers = {{.text = "<tool_call>"}};
      break;
    case Syntax::kMistral:
      root = "root ::= tool-sp \"[\" tool-sp tool-call" + std::string(p.parallel ? " (tool-sp \",\" tool-sp tool-call)*" : "") +
             " tool-sp \"]\"\n";
      if (forced) p.prompt_suffix = "[TOOL_CALLS]";
      else p.triggers = {{.text = "[TOOL_CALLS]"}};
      break;
    case Syntax::kMistralArgs:
      root = "root ::= tool-one" + std::string(p.parallel ? " (tool-sp \"[TOOL_CALLS]\" tool-one)*" : "") + "\n";
      if (forced) p.prompt_suffix = "[TOOL_CALLS]";
      else p.triggers = {{.text = "[TOOL_CALLS]"}};
      break;
    case Syntax::kLlama3:
      root = "root ::= tool-sp tool-call\n";
      // A reply opening with {"name" (as the template asks; a few spacings) is a call; other
      // JSON stays prose.
      if (!forced)
        for (const char* t : {"{\"name\"", "{ \"name\"", "{\n\"name\"", "{\n  \"name\"", "{\n    \"name\""})
          p.triggers.push_back({.text = t, .at_start = true, .include = true});
      break;
    case Syntax::kGeneric:
      root = "root ::= tool-sp tool-reply\n";
      break;
  }
  p.starts_in_calls = p.triggers.empty();
  p.gbnf = root + sp + *rules;
  if (auto g = parse_gbnf(p.gbnf); !g) return make_error("tools: internal error: the tool-call grammar does not parse ({})", g.error().message);
  return p;
}

}  // namespace minfer::toolcall
