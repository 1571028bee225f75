#include "server/api.h"

#include <algorithm>

#include <cmath>
#include <ctime>
#include <optional>

#include "api/fields-json.h"
#include "grammar/json-schema.h"
#include "sampling/order.h"
#include "server/api-tools.h"
#include "runtime/chat-prompt.h"
#include "template/chat.h"

namespace minfer::server {

json bytes_array(std::string_view s) {
  json a = json::array();
  for (unsigned char c : s) a.push_back(static_cast<int>(c));
  return a;
}

namespace {

// A present, non-null field of `body`, or nullptr.
const json* field(const json& body, const char* name) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

// Reads a number field into `out` when present; checks [lo, hi].
std::optional<ApiError> number(const json& body, const char* name, double lo, double hi, double& out) {
  const json* v = field(body, name);
  if (!v) return std::nullopt;
  if (!v->is_number()) return invalid_param(name, fmt::format("'{}' must be a number, got {}", name, v->dump()));
  const double x = v->get<double>();
  if (!std::isfinite(x) || x < lo || x > hi)
    return invalid_param(name, fmt::format("'{}' is {}, outside [{}, {}]", name, v->dump(), lo, hi));
  out = x;
  return std::nullopt;
}

std::optional<ApiError> integer(const json& body, const char* name, int64_t lo, int64_t hi, int64_t& out) {
  const json* v = field(body, name);
  if (!v) return std::nullopt;
  if (!v->is_number_integer() && !(v->is_number_float() && std::floor(v->get<double>()) == v->get<double>()))
    return invalid_param(name, fmt::format("'{}' must be an integer, got {}", name, v->dump()));
  const double x = v->get<double>();
  if (x < static_cast<double>(lo) || x > static_cast<double>(hi))
    return invalid_param(name, fmt::format("'{}' is {}, outside [{}, {}]", name, v->dump(), lo, hi));
  out = static_cast<int64_t>(x);
  return std::nullopt;
}

std::optional<ApiError> boolean(const json& body, const char* name, bool& out) {
  const json* v = field(body, name);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) return invalid_param(name, fmt::format("'{}' must be a boolean, got {}", name, v->dump()));
  out = v->get<bool>();
  return std::nullopt;
}

// OpenAI content: a string, or an array of parts of which only {"type": "text"} is supported.
std::optional<ApiError> normalize_messages(const json& in, json& out, bool allow_empty = false) {
  if (!in.is_array() || (in.empty() && !allow_empty)) return invalid_param("messages", "'messages' must be a non-empty array");
  out = json::array();
  for (size_t i = 0; i < in.size(); ++i) {
    const json& m = in[i];
    const std::string where = fmt::format("messages[{}]", i);
    if (!m.is_object()) return invalid_param(where, fmt::format("'{}' must be an object", where));
    auto role = m.find("role");
    if (role == m.end() || !role->is_string()) return invalid_param(where + ".role", fmt::format("'{}.role' must be a string", where));
    {
      // OpenAI's roles; anything else is a 400 there too (a template would silently drop it).
      static constexpr std::string_view kRoles[] = {"system", "developer", "user", "assistant", "tool", "function"};
      const std::string r = role->get<std::string>();
      if (std::find(std::begin(kRoles), std::end(kRoles), r) == std::end(kRoles))
        return invalid_param(where + ".role", fmt::format("Invalid value for '{}.role': '{}'. Supported values are: 'system', "
                                                "'developer', 'user', 'assistant', 'tool' and 'function'.",
                                                where, r));
    }
    json msg = m;
    auto content = m.find("content");
    if (content != m.end() && content->is_array()) {
      std::string text;
      for (const json& part : *content) {
        if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") || !part["text"].is_string())
          return invalid_param(where + ".content", fmt::format("'{}.content': only text parts are supported", where));
        // Parts are paragraphs (llama-server joins them so too).
        if (!text.empty()) text += "\n\n";
        text += part["text"].get<std::string>();
      }
      msg["content"] = text;
    } else if (content != m.end() && !content->is_string() && !content->is_null()) {
      return invalid_param(where + ".content", fmt::format("'{}.content' must be a string, an array of text parts or null", where));
    } else if (content == m.end() || content->is_null()) {
      // An assistant turn that only called tools has content null: templates concatenate and
      // search it as a string (as llama-server does, it becomes "").
      msg["content"] = "";
    }
    out.push_back(std::move(msg));
  }
  return std::nullopt;
}

// llama-server's per-request speculative settings: {"speculative": {"n_max", "n_min", "p_min",
// "type"}} or the flat keys "speculative.n_max" ... A request without them gets the server's.
// type: "none" (off), "ngram", "draft" (the draft model), "draft+ngram" (both, the better one
// per step); without a type the server's sources are kept.
std::optional<ApiError> parse_speculative(const json& body, const ParseContext& ctx, std::optional<SpecParams>& out) {
  out.reset();
  if (ctx.spec) out = *ctx.spec;
  const json* obj = field(body, "speculative");
  if (obj && !obj->is_object()) return invalid_param("speculative", "'speculative' must be an object");
  json flat = obj ? *obj : json::object();
  for (const char* k : {"n_max", "n_min", "p_min", "type"}) {
    const std::string key = std::string("speculative.") + k;
    if (const json* v = field(body, key.c_str())) flat[k] = *v;
  }
  if (flat.empty()) return std::nullopt;
  for (auto it = flat.begin(); it != flat.end(); ++it)
    if (it.key() != "n_max" && it.key() != "n_min" && it.key() != "p_min" && it.key() != "type")
      return invalid_param("speculative." + it.key(), fmt::format("unknown field 'speculative.{}' (n_max, n_min, p_min, type)", it.key()));
  // The numbers are checked whether or not this request ends up speculating.
  double d = 0;
  int64_t i = 0;
  std::optional<int> n_max, n_min;
  std::optional<float> p_min;
  if (auto e = integer(flat, "n_max", 1, kSpecMaxDraft, i)) return invalid_param("speculative.n_max", e->message);
  if (field(flat, "n_max")) n_max = static_cast<int>(i);
  if (auto e = integer(flat, "n_min", 0, kSpecMaxDraft, i)) return invalid_param("speculative.n_min", e->message);
  if (field(flat, "n_min")) n_min = static_cast<int>(i);
  if (auto e = number(flat, "p_min", 0, 1, d)) return invalid_param("speculative.p_min", e->message);
  if (field(flat, "p_min")) p_min = static_cast<float>(d);
  if (const json* t = field(flat, "type")) {
    if (!t->is_string()) return invalid_param("speculative.type", "'speculative.type' must be a string");
    const std::string type = t->get<std::string>();
    if (type == "none") {
      out.reset();
      return std::nullopt;
    }
    if (type != "ngram" && type != "draft" && type != "draft+ngram" && type != "ngram+draft")
      return invalid_param("speculative.type", fmt::format("speculative.type '{}' is not one of none, ngram, draft, draft+ngram", type));
    const bool model = type != "ngram";
    if (model && !ctx.has_draft_model)
      return invalid_param("speculative.type", fmt::format("speculative.type '{}' needs a draft model: start the server with --spec-draft MODEL", type));
    if (!out) out = SpecParams{};
    out->model = model;
    out->ngram = type != "draft";
  }
  if (!out) return std::nullopt;  // settings without a source: the server does not speculate
  if (n_max) out->n_max = *n_max;
  if (n_min) out->n_min = *n_min;
  if (p_min) out->p_min = *p_min;
  out->n_min = std::min(out->n_min, out->n_max);
  if (Status st = validate(*out); !st) return invalid_param("speculative", st.error().message);
  return std::nullopt;
}

// A JSON Schema field -> GBNF, errors naming the field and the schema's JSON pointer.
std::optional<ApiError> schema_gbnf(const json& schema, const char* param, std::string& out) {
  if (!schema.is_object() && !schema.is_boolean()) return invalid_param(param, fmt::format("'{}' must be a JSON Schema object", param));
  auto g = json_schema_to_gbnf(schema.dump());
  if (!g) return invalid_param(param, fmt::format("{}: {}", param, g.error().message));
  out = std::move(*g);
  return std::nullopt;
}

// The grammar the reply must match: llama-server's `grammar` (GBNF) and `json_schema`, or
// OpenAI's response_format (json_object; json_schema {name, schema, strict}); at most one.
// llama-server's lazy grammars: "grammar_lazy": true with "grammar_triggers": [{"type": 1
// (word) or 0 (token), "value": TEXT}]; the grammar matches from the trigger's text on.
std::optional<ApiError> parse_triggers(const json& body, std::vector<GrammarTrigger>& out) {
  bool lazy = false;
  if (const json* l = field(body, "grammar_lazy")) {
    if (!l->is_boolean()) return invalid_param("grammar_lazy", "'grammar_lazy' must be a boolean");
    lazy = l->get<bool>();
  }
  if (!lazy) return std::nullopt;
  const json* ts = field(body, "grammar_triggers");
  if (!ts || !ts->is_array() || ts->empty())
    return invalid_param("grammar_triggers", "'grammar_lazy' needs 'grammar_triggers': [{\"type\": 1, \"value\": WORD}, ...]");
  for (size_t i = 0; i < ts->size(); ++i) {
    const json& t = (*ts)[i];
    const std::string at = fmt::format("grammar_triggers[{}]", i);
    if (!t.is_object() || !t.contains("type") || !t["type"].is_number_integer() || !t.contains("value") || !t["value"].is_string() ||
        t["value"].get<std::string>().empty())
      return invalid_param(at, fmt::format("'{}' must be {{\"type\": 0 or 1, \"value\": non-empty text}}", at));
    const int type = t["type"].get<int>();
    if (type != 0 && type != 1)
      return invalid_param(at + ".type", fmt::format("'{}.type' is {}: only words (1) and tokens (0) are supported, not patterns", at, type));
    out.push_back({.text = t["value"].get<std::string>(), .at_start = false, .include = true});
  }
  return std::nullopt;
}

std::optional<ApiError> parse_output_grammar(const json& body, std::shared_ptr<const Grammar>& out) {
  std::string gbnf;
  std::vector<std::string> given;
  std::string param;
  if (const json* g = field(body, "grammar")) {
    if (!g->is_string()) return invalid_param("grammar", "'grammar' must be a string of GBNF");
    if (!g->get<std::string>().empty()) {
      gbnf = g->get<std::string>();
      given.push_back(param = "grammar");
    }
  }
  if (const json* js = field(body, "json_schema")) {
    if (auto e = schema_gbnf(*js, "json_schema", gbnf)) return e;
    given.push_back(param = "json_schema");
  }
  if (const json* rf = field(body, "response_format")) {
    if (!rf->is_object() || !rf->contains("type") || !(*rf)["type"].is_string())
      return invalid_param("response_format", "'response_format' must be an object with a string 'type'");
    const std::string type = (*rf)["type"].get<std::string>();
    if (type == "json_object") {
      if (const json* sc = field(*rf, "schema")) {  // llama-server's extension
        if (auto e = schema_gbnf(*sc, "response_format.schema", gbnf)) return e;
      } else {
        gbnf = json_value_gbnf(/*object_only=*/true);
      }
      given.push_back(param = "response_format");
    } else if (type == "json_schema") {
      const json* js = field(*rf, "json_schema");
      if (!js || !js->is_object()) return invalid_param("response_format.json_schema", "response_format type json_schema needs a 'json_schema' object {name, schema, strict}");
      if (const json* n = field(*js, "name"); n && !n->is_string()) return invalid_param("response_format.json_schema.name", "'name' must be a string");
      if (const json* st = field(*js, "strict"); st && !st->is_boolean()) return invalid_param("response_format.json_schema.strict", "'strict' must be a boolean");
      const json* sc = field(*js, "schema");
      if (!sc) return invalid_param("response_format.json_schema.schema", "response_format.json_schema needs a 'schema'");
      if (auto e = schema_gbnf(*sc, "response_format.json_schema.schema", gbnf)) return e;
      given.push_back(param = "response_format");
    } else if (type != "text") {
      return invalid_param("response_format.type", fmt::format("response_format type '{}' is not one of text, json_object, json_schema", type));
    }
  }
  if (given.size() > 1)
    return invalid_param(given[1], fmt::format("'{}' and '{}' both constrain the reply: give one", given[0], given[1]));
  if (given.empty()) return std::nullopt;
  auto g = parse_gbnf(gbnf);
  if (!g) return invalid_param(param, fmt::format("{}: {}", param, g.error().message));
  out = std::make_shared<const Grammar>(std::move(*g));
  return std::nullopt;
}

std::string token_bytes_string(const Tokenizer& tok, int32_t id) { return std::string(tok.piece(id)); }

}  // namespace

ApiError context_size_error(int64_t n_prompt, int64_t n_predict, bool count_predict, int n_ctx, const std::string& param) {
  ApiError e = invalid_param(param, "");
  e.type = "exceed_context_size_error";  // llama-server's type; OpenAI's code below
  e.code = "context_length_exceeded";
  const int64_t want = n_prompt + (count_predict ? n_predict : 0);
  if (n_prompt >= n_ctx)
    e.message = fmt::format("the request exceeds the available context size: the prompt has {} tokens, the context of a slot "
                            "holds {} (This model's maximum context length is {} tokens. Please reduce the length of the {}.)",
                            n_prompt, n_ctx, n_ctx, param);
  else
    e.message = fmt::format("This model's maximum context length is {} tokens. However, you requested {} tokens ({} in the {}, "
                            "{} in the completion). Please reduce the length of the {} or completion.",
                            n_ctx, want, n_prompt, param, n_predict, param);
  e.extra = {{"n_prompt_tokens", n_prompt}, {"n_ctx", n_ctx}};
  return e;
}

namespace {

// Thinking markers of the template families that have them: a prompt ending in `open` has its
// thinking forced open by the template; with thinking off it is closed right away (llama.cpp's
// handling of DeepSeek-R1, QwQ); `both_when_off` families (Command R7B) get an empty block.
struct ThinkTags {
  std::string_view open, close;
  bool both_when_off;
};
constexpr ThinkTags kThinkTags[] = {{"<think>", "</think>", false}, {"<|START_THINKING|>", "<|END_THINKING|>", true}};

}  // namespace

std::string apply_reasoning_mode(std::string prompt, const std::string& template_source, const std::string& reasoning) {
  if (reasoning != "off") return prompt;
  for (const ThinkTags& t : kThinkTags) {
    std::string_view tail(prompt);
    while (!tail.empty() && (tail.back() == '\n' || tail.back() == ' ')) tail.remove_suffix(1);
    if (tail.ends_with(t.open)) return prompt + std::string(t.close);
    if (t.both_when_off && template_source.find(t.open) != std::string::npos && !tail.ends_with(t.close))
      return prompt + std::string(t.open) + std::string(t.close);
  }
  return prompt;
}

std::variant<RenderedChat, ApiError> render_chat_request(const json& body, const ParseContext& ctx, bool add_generation_prompt,
                                                         bool has_grammar) {
  const json* msgs = field(body, "messages");
  if (!msgs) return invalid_param("messages", "'messages' is required");
  json norm;
  if (auto e = normalize_messages(*msgs, norm, ctx.allow_empty_messages)) return *e;
  // A conversation ending with an assistant message continues that message (a prefill): the
  // rest is rendered with the generation prompt and its text follows. continue_final_message
  // (vLLM's, transformers') asks for the same explicitly, and excludes add_generation_prompt.
  bool continue_final = false;
  if (const json* c = field(body, "continue_final_message")) {
    if (!c->is_boolean()) return invalid_param("continue_final_message", "'continue_final_message' must be a boolean");
    continue_final = c->get<bool>();
  }
  if (const json* g = field(body, "add_generation_prompt")) {
    if (!g->is_boolean()) return invalid_param("add_generation_prompt", "'add_generation_prompt' must be a boolean");
    if (g->get<bool>() && continue_final)
      return invalid_param("continue_final_message", "'continue_final_message' and 'add_generation_prompt' cannot both be true");
    if (!continue_final) add_generation_prompt = g->get<bool>();
  }
  const auto is_assistant = [](const json& m) { return m.value("role", "") == "assistant"; };
  std::string prefill;
  if (!norm.empty() && is_assistant(norm.back()) && (add_generation_prompt || continue_final)) {
    if (norm.size() >= 2 && is_assistant(norm[norm.size() - 2]))
      return invalid_param("messages", "the conversation ends with two assistant messages: there is one reply to continue");
    if (norm.back().contains("tool_calls") && !norm.back()["tool_calls"].empty()) {
      // A reply that called tools is closed, not continued.
    } else {
      prefill = norm.back()["content"].is_string() ? norm.back()["content"].get<std::string>() : std::string();
      norm.erase(norm.size() - 1);
      add_generation_prompt = true;
    }
  }
  RenderedChat out;
  json extra = json::object();
  toolcall::ToolRequest treq;
  if (auto e = parse_tool_fields(body, treq)) return *e;
  std::string suffix;
  if (!treq.tools.empty()) {
    const toolcall::TemplateTools tt = ctx.template_tools ? *ctx.template_tools : toolcall::TemplateTools{};
    if (has_grammar && treq.choice != toolcall::ToolChoice::kNone)
      return invalid_param("tools", "'tools' cannot be combined with 'grammar', 'json_schema' or a JSON 'response_format' (unless tool_choice is 'none')");
    auto plan = toolcall::plan_tool_calls(tt, treq);
    if (!plan) {
      const std::string& m = plan.error().message;  // "tools[i].function.parameters: ..." names its field
      const size_t colon = m.find(": ");
      return invalid_param(m.starts_with("tools[") && colon != std::string::npos ? m.substr(0, colon) : "tools", m);
    }
    if (!plan->gbnf.empty()) {
      auto g = parse_gbnf(plan->gbnf);
      if (!g) return invalid_param("tools", "tool-call grammar: " + g.error().message);
      out.grammar = std::make_shared<const Grammar>(std::move(*g));
      out.triggers = plan->triggers;
      out.tools = std::make_shared<const toolcall::ToolPlan>(*plan);
    }
    if (add_generation_prompt) suffix = plan->prompt_suffix;
    norm = toolcall::prepare_messages(tt, treq, std::move(norm));
    if (toolcall::template_gets_tools(tt, treq)) extra["tools"] = treq.tools_json;
  }
  // --reasoning: the templates' thinking switch, on unless "off" (as llama-server passes it); a
  // request's chat_template_kwargs win.
  extra["enable_thinking"] = ctx.reasoning != "off";
  // Today's date, as llama-server gives templates (Llama 3.x prints "Today Date: ...").
  {
    const std::time_t t = std::time(nullptr);
    std::tm tm{};
    localtime_r(&t, &tm);
    char buf[64];
    std::strftime(buf, sizeof buf, "%d %b %Y", &tm);
    extra["date_string"] = buf;
    std::strftime(buf, sizeof buf, "%b %d %Y", &tm);
    extra["datetime"] = buf;
  }
  // FireFunction v2's template reads the tools as a JSON text named `functions` (llama-server
  // passes it so); other templates ignore it.
  extra["functions"] = treq.tools.empty() ? std::string() : treq.tools_json.dump(2);
  if (const json* kw = field(body, "chat_template_kwargs"); kw && kw->is_object())
    for (auto it = kw->begin(); it != kw->end(); ++it) extra[it.key()] = it.value();
  std::string reasoning = ctx.reasoning;
  if (extra.contains("enable_thinking") && extra["enable_thinking"].is_boolean())
    reasoning = extra["enable_thinking"].get<bool>() ? "on" : "off";
  const std::string tmpl = ctx.chat_template ? *ctx.chat_template : std::string();
  ChatRenderOptions opt;
  opt.quiet = true;
  opt.template_source = tmpl;
  opt.add_generation_prompt = add_generation_prompt;
  opt.extra = nlohmann::ordered_json::parse(extra.dump(-1, ' ', false, json::error_handler_t::replace));
  auto rendered = render_chat_prompt(*ctx.file, *ctx.tok,
                                     nlohmann::ordered_json::parse(norm.dump(-1, ' ', false, json::error_handler_t::replace)), opt);
  if (!rendered) return invalid_param("messages", "chat template: " + rendered.error().message);
  out.text = *rendered;
  if (add_generation_prompt) out.text = apply_reasoning_mode(std::move(out.text), tmpl.empty() ? chat_template_source(*ctx.file) : tmpl, reasoning);
  out.text += suffix + prefill;
  bool add_bos = ctx.tok->add_bos();
  if (add_bos && ctx.tok->bos_id() >= 0 && out.text.starts_with(ctx.tok->token_text(ctx.tok->bos_id()))) add_bos = false;
  out.tokens = ctx.tok->encode(out.text, add_bos, /*parse_special=*/true);
  return out;
}

namespace {

// One prompt: a string, token ids, ids mixed with strings, or llama-server's
// {"prompt_string": ...} (its "multimodal_data" needs a vision model).
std::variant<std::pair<std::vector<int32_t>, std::string>, ApiError> parse_prompt(const json& p, const Tokenizer& tok, bool add_bos,
                                                                              const std::string& where) {
  const int32_t n_vocab = tok.n_vocab();
  std::vector<int32_t> ids;
  if (p.is_string()) {
    ids = tok.encode(p.get<std::string>(), add_bos, /*parse_special=*/true);
    return std::pair{std::move(ids), p.get<std::string>()};
  }
  if (p.is_object() && p.contains("prompt_string")) {
    if (p.contains("multimodal_data"))
      return invalid_param(where + ".multimodal_data", fmt::format("'{}.multimodal_data': this model takes no media (minfer serves text models)", where));
    return parse_prompt(p["prompt_string"], tok, add_bos, where + ".prompt_string");
  }
  if (!p.is_array() || p.empty())
    return invalid_param(where, fmt::format("'{}' must be a string, token ids (and strings), or {{\"prompt_string\": ...}}", where));
  for (const json& t : p) {
    if (t.is_string()) {
      std::vector<int32_t> more = tok.encode(t.get<std::string>(), add_bos && ids.empty(), /*parse_special=*/true);
      ids.insert(ids.end(), more.begin(), more.end());
      continue;
    }
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= n_vocab)
      return invalid_param(where, fmt::format("'{}' token {} is not in [0, {})", where, t.dump(), n_vocab));
    ids.push_back(t.get<int32_t>());
  }
  std::string text = tok.decode(ids);
  return std::pair{std::move(ids), std::move(text)};
}

}  // namespace

std::variant<std::vector<ParsedPrompt>, ApiError> parse_prompts(const json& p, const Tokenizer& tok, bool add_bos,
                                                                const std::string& field_name) {
  // A string, token ids, ids mixed with strings, an object {"prompt_string"}, or an array of
  // those (without bare ids): one prompt each.
  const bool has_ids = p.is_array() && std::any_of(p.begin(), p.end(), [](const json& x) { return x.is_number(); });
  std::vector<const json*> subs;
  if (p.is_array() && !has_ids) {
    for (const json& x : p) subs.push_back(&x);
    if (subs.empty()) return invalid_param(field_name, fmt::format("'{}' is an empty array", field_name));
  } else {
    subs.push_back(&p);
  }
  std::vector<ParsedPrompt> out;
  for (size_t k = 0; k < subs.size(); ++k) {
    auto one = parse_prompt(*subs[k], tok, add_bos, subs.size() > 1 ? fmt::format("{}[{}]", field_name, k) : field_name);
    if (auto* e = std::get_if<ApiError>(&one)) return *e;
    auto& [ids, text] = std::get<std::pair<std::vector<int32_t>, std::string>>(one);
    out.push_back({std::move(ids), std::move(text)});
  }
  return out;
}

std::variant<CompletionRequest, ApiError> parse_completion_request(const json& body, bool chat, const ParseContext& ctx) {
  if (!body.is_object()) return invalid_param("", "the request body must be a JSON object");
  CompletionRequest r;
  r.chat = chat;
  // Every generation and sampling field, from the one table (sampling/fields.h), over the
  // server's defaults (serve's --temp, -n ...; else SamplerParams' own, llama.cpp's).
  GenerationSettings gs;
  if (ctx.sampling) gs.sampling = *ctx.sampling;
  gs.n_predict = ctx.default_n_predict;
  if (auto e = api::read_fields(body, ctx.api, *ctx.tok, gs)) return invalid_param(e->param, e->message);
  SamplerParams& sp = r.sampling;
  sp = std::move(gs.sampling);
  r.n_predict = gs.n_predict;
  r.stop = std::move(gs.stop);
  r.ignore_eos = gs.ignore_eos;
  if (r.ignore_eos)  // llama-server's way: the end-of-generation tokens are banned (shown in logit_bias)
    for (int32_t id : ctx.tok->eog_ids()) sp.logit_bias[id] = -INFINITY;

  int64_t i = 0;
  if (auto e = integer(body, "n", 1, 16, i)) return *e;
  if (field(body, "n")) r.n = static_cast<int>(i);
  if (auto e = boolean(body, "stream", r.stream)) return *e;
  if (auto e = boolean(body, "return_tokens", r.return_tokens)) return *e;
  r.cache_prompt = ctx.cache_prompt;
  if (auto e = boolean(body, "cache_prompt", r.cache_prompt)) return *e;
  if (auto e = boolean(body, "timings_per_token", r.timings_per_token)) return *e;
  if (auto e = boolean(body, "return_progress", r.return_progress)) return *e;
  if (auto e = boolean(body, "verbose", r.verbose)) return *e;
  if (auto e = integer(body, "id_slot", -1, 1 << 20, i)) return *e;
  if (field(body, "id_slot")) r.id_slot = static_cast<int>(i);
  if (auto e = integer(body, "n_keep", -1, 1 << 24, i)) return *e;
  if (field(body, "n_keep")) r.n_keep = static_cast<int>(i);
  if (auto e = integer(body, "n_discard", 0, 1 << 24, i)) return *e;
  if (field(body, "n_discard")) r.n_discard = static_cast<int>(i);
  if (auto e = integer(body, "n_probs", 0, 100, i)) return *e;
  if (field(body, "n_probs")) r.n_probs = static_cast<int>(i);
  if (auto e = boolean(body, "post_sampling_probs", r.post_sampling_probs)) return *e;
  if (r.n_probs > 0 && !chat && !field(body, "logprobs")) {  // llama-server's completion_probabilities
    r.logprobs = true;
    r.top_logprobs = r.n_probs;
  }

  if (const json* so = field(body, "stream_options")) {
    if (!so->is_object()) return invalid_param("stream_options", "'stream_options' must be an object");
    if (auto e = boolean(*so, "include_usage", r.include_usage)) return invalid_param("stream_options.include_usage", e->message);
  }

  // logprobs: a boolean (+ top_logprobs 0..20) for chat, an integer 0..5 for completions.
  if (const json* lp = field(body, "logprobs")) {
    if (chat) {
      if (!lp->is_boolean()) return invalid_param("logprobs", "'logprobs' must be a boolean");
      r.logprobs = lp->get<bool>();
      if (auto e = integer(body, "top_logprobs", 0, 20, i)) return *e;
      if (field(body, "top_logprobs")) {
        if (!r.logprobs) return invalid_param("top_logprobs", "'top_logprobs' needs 'logprobs': true");
        r.top_logprobs = static_cast<int>(i);
      }
    } else {
      if (auto e = integer(body, "logprobs", 0, 5, i)) return *e;
      r.logprobs = true;
      r.top_logprobs = static_cast<int>(i);
    }
  }

  if (auto e = parse_speculative(body, ctx, r.spec)) return *e;

  if (auto e = parse_output_grammar(body, r.grammar)) return *e;
  if (auto e = parse_triggers(body, r.grammar_triggers)) return *e;
  if (!r.grammar_triggers.empty() && !r.grammar) return invalid_param("grammar_lazy", "'grammar_lazy' needs a 'grammar' (or 'json_schema') to start");

  bool add_bos = ctx.tok->add_bos();
  if (chat) {
    auto rc = render_chat_request(body, ctx, /*add_generation_prompt=*/true, r.grammar != nullptr);
    if (auto* e = std::get_if<ApiError>(&rc)) return *e;
    RenderedChat& c = std::get<RenderedChat>(rc);
    if (c.grammar) {
      r.grammar = std::move(c.grammar);
      r.grammar_triggers = std::move(c.triggers);
    }
    r.tools = std::move(c.tools);
    r.prompt = std::move(c.tokens);
    r.prompt_text = std::move(c.text);
  } else {
    const json* p = field(body, "prompt");
    if (!p) return invalid_param("prompt", "'prompt' is required");
    // llama-server's and OpenAI's forms (parse_prompts): one completion per prompt.
    auto parsed = parse_prompts(*p, *ctx.tok, add_bos, "prompt");
    if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
    auto& prompts = std::get<std::vector<ParsedPrompt>>(parsed);
    for (size_t k = 0; k < prompts.size(); ++k) {
      auto& [ids, ptext] = prompts[k];
      if (ids.empty()) return invalid_param("prompt", prompts.size() > 1 ? fmt::format("prompt[{}] is empty", k) : "the prompt is empty");
      if (k == 0) {
        r.prompt = std::move(ids);
        r.prompt_text = std::move(ptext);
      } else {
        r.extra_prompts.emplace_back(std::move(ids), std::move(ptext));
      }
    }
  }
  if (r.prompt.empty()) return invalid_param(chat ? "messages" : "prompt", "the prompt is empty");
  // serve's --grammar / --json-schema: the output of requests that constrain nothing themselves.
  if (!r.grammar && !r.tools && ctx.default_grammar) r.grammar = ctx.default_grammar;

  // A prompt that does not fit is refused, and (OpenAI's rule) so is an explicit max_tokens
  // beyond the context; llama-server's native /completion instead stops at the context's end.
  int64_t n_prompt = static_cast<int64_t>(r.prompt.size());
  for (const auto& [ids, t] : r.extra_prompts) n_prompt = std::max<int64_t>(n_prompt, static_cast<int64_t>(ids.size()));
  // With context shift a generation goes past the context's end: only the prompt must fit.
  std::string length_name;  // max_tokens & co (OpenAI's names, Anthropic's, Responses'), not llama-server's n_predict
  const bool explicit_max = !ctx.context_shift && api::find_field_value(body, *find_field("n_predict"), ctx.api, &length_name) &&
                            length_name != "n_predict";
  const int64_t want = n_prompt + (explicit_max ? std::max<int64_t>(r.n_predict, 0) : 0);
  if (n_prompt >= ctx.n_ctx_slot || want > ctx.n_ctx_slot) {
    ApiError e = context_size_error(n_prompt, std::max<int64_t>(r.n_predict, 0), explicit_max, ctx.n_ctx_slot, chat ? "messages" : "prompt");
    return e;
  }
  if (Status st = validate(sp, ctx.tok->n_vocab()); !st) return invalid_param("", st.error().message);
  return r;
}

json chat_logprobs_json(const Tokenizer& tok, const std::vector<TokenLogprob>& lps) {
  json content = json::array();
  for (const TokenLogprob& lp : lps) {
    const std::string s = token_bytes_string(tok, lp.id);
    json top = json::array();
    for (const auto& [id, v] : lp.top) {
      const std::string ts = token_bytes_string(tok, id);
      top.push_back({{"token", ts}, {"logprob", v}, {"bytes", bytes_array(ts)}});
    }
    content.push_back({{"token", s}, {"logprob", lp.logprob}, {"bytes", bytes_array(s)}, {"top_logprobs", top}});
  }
  return content;
}

void append_completion_logprobs(const Tokenizer& tok, const std::vector<TokenLogprob>& lps, json& lp, size_t& text_offset) {
  if (!lp.is_object()) lp = {{"tokens", json::array()}, {"token_logprobs", json::array()},
                             {"top_logprobs", json::array()}, {"text_offset", json::array()}};
  for (const TokenLogprob& t : lps) {
    const std::string s = token_bytes_string(tok, t.id);
    lp["tokens"].push_back(s);
    lp["token_logprobs"].push_back(t.logprob);
    json top = json::object();
    for (const auto& [id, v] : t.top) top[token_bytes_string(tok, id)] = v;
    lp["top_logprobs"].push_back(top);
    lp["text_offset"].push_back(text_offset);
    text_offset += s.size();
  }
}

}  // namespace minfer::server
