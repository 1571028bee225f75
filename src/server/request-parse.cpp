#include "server/request-parse.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <string_view>
#include <utility>

#include <fmt/format.h>

#include "api/fields-json.h"
#include "grammar/json-schema.h"
#include "server/api-tools.h"

namespace minfer::server {
namespace {

// Sets `out` to the value of an ApiResult expression, or returns its error.
#define MINFER_SET(out, expr)   \
  do {                          \
    auto v_ = (expr);           \
    if (!v_) return v_.error(); \
    out = *std::move(v_);       \
  } while (0)

// A present, non-null field of `obj`, or nullptr.
const json* field(const json& obj, const char* name) {
  auto it = obj.find(name);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

// A number field in [lo, hi]; `absent` when the field is absent or null.
ApiResult<double> read_number(const json& obj, const char* name, double lo, double hi, double absent) {
  const json* v = field(obj, name);
  if (!v) return absent;
  if (!v->is_number()) return invalid_param(name, fmt::format("'{}' must be a number, got {}", name, v->dump()));
  const double x = v->get<double>();
  if (!std::isfinite(x) || x < lo || x > hi)
    return invalid_param(name, fmt::format("'{}' is {}, outside [{}, {}]", name, v->dump(), lo, hi));
  return x;
}

// An integer field (2.0 counts) in [lo, hi]; `absent` when the field is absent or null.
ApiResult<int64_t> read_integer(const json& obj, const char* name, int64_t lo, int64_t hi, int64_t absent) {
  const json* v = field(obj, name);
  if (!v) return absent;
  if (!api::is_integral(*v))
    return invalid_param(name, fmt::format("'{}' must be an integer, got {}", name, v->dump()));
  const double x = v->get<double>();
  if (x < static_cast<double>(lo) || x > static_cast<double>(hi))
    return invalid_param(name, fmt::format("'{}' is {}, outside [{}, {}]", name, v->dump(), lo, hi));
  return static_cast<int64_t>(x);
}

ApiResult<bool> read_boolean(const json& obj, const char* name, bool absent) {
  const json* v = field(obj, name);
  if (!v) return absent;
  if (!v->is_boolean()) return invalid_param(name, fmt::format("'{}' must be a boolean, got {}", name, v->dump()));
  return v->get<bool>();
}

// An error about a field of the object `parent`, named as its member: "speculative.n_max".
ApiError member_error(const char* parent, ApiError e) {
  e.param = fmt::format("{}.{}", parent, e.param);
  return e;
}

// OpenAI content: a string, or an array of parts of which only {"type": "text"} is supported.
ApiResult<json> normalize_messages(const json& in, bool allow_empty) {
  if (!in.is_array() || (in.empty() && !allow_empty)) return invalid_param("messages", "'messages' must be a non-empty array");
  json out = json::array();
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
  return out;
}

// llama-server's per-request speculative settings: {"speculative": {"n_max", "n_min", "p_min",
// "type"}} or the flat keys "speculative.n_max" ... A request without them gets the server's.
// type: "none" (off), "ngram", "draft" (the draft model), "draft+ngram" (both, the better one
// per step); without a type the server's sources are kept.
ApiResult<std::optional<SpecParams>> parse_speculative(const json& body, const ParseContext& ctx) {
  std::optional<SpecParams> out;
  if (ctx.spec) out = *ctx.spec;
  const json* obj = field(body, "speculative");
  if (obj && !obj->is_object()) return invalid_param("speculative", "'speculative' must be an object");
  json flat = obj ? *obj : json::object();
  for (const char* k : {"n_max", "n_min", "p_min", "type"}) {
    const std::string key = std::string("speculative.") + k;
    if (const json* v = field(body, key.c_str())) flat[k] = *v;
  }
  if (flat.empty()) return out;
  for (auto it = flat.begin(); it != flat.end(); ++it)
    if (it.key() != "n_max" && it.key() != "n_min" && it.key() != "p_min" && it.key() != "type")
      return invalid_param("speculative." + it.key(), fmt::format("unknown field 'speculative.{}' (n_max, n_min, p_min, type)", it.key()));
  // The numbers are checked whether or not this request ends up speculating (-1: not given).
  const auto n_max = read_integer(flat, "n_max", 1, kSpecMaxDraft, -1);
  if (!n_max) return member_error("speculative", n_max.error());
  const auto n_min = read_integer(flat, "n_min", 0, kSpecMaxDraft, -1);
  if (!n_min) return member_error("speculative", n_min.error());
  const auto p_min = read_number(flat, "p_min", 0, 1, -1);
  if (!p_min) return member_error("speculative", p_min.error());
  if (const json* t = field(flat, "type")) {
    if (!t->is_string()) return invalid_param("speculative.type", "'speculative.type' must be a string");
    const std::string type = t->get<std::string>();
    if (type == "none") return std::optional<SpecParams>();
    if (type != "ngram" && type != "draft" && type != "draft+ngram" && type != "ngram+draft")
      return invalid_param("speculative.type", fmt::format("speculative.type '{}' is not one of none, ngram, draft, draft+ngram", type));
    const bool model = type != "ngram";
    if (model && !ctx.has_draft_model)
      return invalid_param("speculative.type", fmt::format("speculative.type '{}' needs a draft model: start the server with --spec-draft MODEL", type));
    if (!out) out = SpecParams{};
    out->model = model;
    out->ngram = type != "draft";
  }
  if (!out) return out;  // settings without a source: the server does not speculate
  if (*n_max >= 0) out->n_max = static_cast<int>(*n_max);
  if (*n_min >= 0) out->n_min = static_cast<int>(*n_min);
  if (*p_min >= 0) out->p_min = static_cast<float>(*p_min);
  out->n_min = std::min(out->n_min, out->n_max);
  if (Status st = validate(*out); !st) return invalid_param("speculative", st.error().message);
  return out;
}

// A JSON Schema field -> GBNF, errors naming the field and the schema's JSON pointer.
ApiResult<std::string> schema_gbnf(const json& schema, const char* param) {
  if (!schema.is_object() && !schema.is_boolean()) return invalid_param(param, fmt::format("'{}' must be a JSON Schema object", param));
  auto g = json_schema_to_gbnf(schema.dump());
  if (!g) return invalid_param(param, fmt::format("{}: {}", param, g.error().message));
  return std::move(*g);
}

// The grammar the reply must match: llama-server's `grammar` (GBNF) and `json_schema`, or
// OpenAI's response_format (json_object; json_schema {name, schema, strict}); at most one.
ApiResult<GrammarText> parse_output_grammar(const json& body) {
  GrammarText out;
  std::vector<std::string> given;
  if (const json* g = field(body, "grammar")) {
    if (!g->is_string()) return invalid_param("grammar", "'grammar' must be a string of GBNF");
    if (!g->get<std::string>().empty()) {
      out.gbnf = g->get<std::string>();
      given.push_back("grammar");
    }
  }
  if (const json* js = field(body, "json_schema")) {
    MINFER_SET(out.gbnf, schema_gbnf(*js, "json_schema"));
    given.push_back("json_schema");
  }
  if (const json* rf = field(body, "response_format")) {
    if (!rf->is_object() || !rf->contains("type") || !(*rf)["type"].is_string())
      return invalid_param("response_format", "'response_format' must be an object with a string 'type'");
    const std::string type = (*rf)["type"].get<std::string>();
    if (type == "json_object") {
      if (const json* sc = field(*rf, "schema")) {  // llama-server's extension
        MINFER_SET(out.gbnf, schema_gbnf(*sc, "response_format.schema"));
      } else {
        out.gbnf = json_value_gbnf(/*object_only=*/true);
      }
      given.push_back("response_format");
    } else if (type == "json_schema") {
      const json* js = field(*rf, "json_schema");
      if (!js || !js->is_object()) return invalid_param("response_format.json_schema", "response_format type json_schema needs a 'json_schema' object {name, schema, strict}");
      if (const json* n = field(*js, "name"); n && !n->is_string()) return invalid_param("response_format.json_schema.name", "'name' must be a string");
      if (const json* st = field(*js, "strict"); st && !st->is_boolean()) return invalid_param("response_format.json_schema.strict", "'strict' must be a boolean");
      const json* sc = field(*js, "schema");
      if (!sc) return invalid_param("response_format.json_schema.schema", "response_format.json_schema needs a 'schema'");
      MINFER_SET(out.gbnf, schema_gbnf(*sc, "response_format.json_schema.schema"));
      given.push_back("response_format");
    } else if (type != "text") {
      return invalid_param("response_format.type", fmt::format("response_format type '{}' is not one of text, json_object, json_schema", type));
    }
  }
  if (given.size() > 1)
    return invalid_param(given[1], fmt::format("'{}' and '{}' both constrain the reply: give one", given[0], given[1]));
  if (given.empty()) return GrammarText{};
  out.param = given[0];
  return out;
}

// llama-server's lazy grammars: "grammar_lazy": true with "grammar_triggers": [{"type": 1
// (word) or 0 (token), "value": TEXT}]; the grammar matches from the trigger's text on.
ApiResult<std::vector<GrammarTrigger>> parse_triggers(const json& body) {
  std::vector<GrammarTrigger> out;
  bool lazy = false;
  if (const json* l = field(body, "grammar_lazy")) {
    if (!l->is_boolean()) return invalid_param("grammar_lazy", "'grammar_lazy' must be a boolean");
    lazy = l->get<bool>();
  }
  if (!lazy) return out;
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
  return out;
}

}  // namespace

ApiResult<ParsedChat> parse_chat(const json& body, bool allow_empty_messages, bool has_grammar) {
  const json* msgs = field(body, "messages");
  if (!msgs) return invalid_param("messages", "'messages' is required");
  ParsedChat c;
  MINFER_SET(c.messages, normalize_messages(*msgs, allow_empty_messages));
  // continue_final_message (vLLM's, transformers') continues the last message, and excludes
  // add_generation_prompt.
  if (const json* v = field(body, "continue_final_message")) {
    if (!v->is_boolean()) return invalid_param("continue_final_message", "'continue_final_message' must be a boolean");
    c.continue_final = v->get<bool>();
  }
  if (const json* g = field(body, "add_generation_prompt")) {
    if (!g->is_boolean()) return invalid_param("add_generation_prompt", "'add_generation_prompt' must be a boolean");
    if (g->get<bool>() && c.continue_final)
      return invalid_param("continue_final_message", "'continue_final_message' and 'add_generation_prompt' cannot both be true");
    c.add_generation_prompt = g->get<bool>();
  }
  MINFER_SET(c.tools, parse_tool_fields(body));
  if (!c.tools.tools.empty() && has_grammar && c.tools.choice != toolcall::ToolChoice::kNone)
    return invalid_param("tools", "'tools' cannot be combined with 'grammar', 'json_schema' or a JSON 'response_format' (unless tool_choice is 'none')");
  if (const json* kw = field(body, "chat_template_kwargs"); kw && kw->is_object()) c.template_kwargs = *kw;
  return c;
}

ApiResult<ParsedRequest> parse_request(const json& body, bool chat, const ParseContext& ctx) {
  if (!body.is_object()) return invalid_param("", "the request body must be a JSON object");
  ParsedRequest p;
  CompletionRequest& o = p.options;
  o.chat = chat;
  // Every generation and sampling field, from the one table (sampling/fields.h), over the
  // server's defaults (serve's --temp, -n ...; else SamplerParams' own, llama.cpp's).
  GenerationSettings gs;
  if (ctx.sampling) gs.sampling = *ctx.sampling;
  gs.n_predict = ctx.default_n_predict;
  if (auto e = api::read_fields(body, ctx.api, *ctx.tok, gs)) return invalid_param(e->param, e->message);
  o.sampling = std::move(gs.sampling);
  o.n_predict = gs.n_predict;
  o.stop = std::move(gs.stop);
  o.ignore_eos = gs.ignore_eos;
  if (!api::find_field_value(body, *find_field("n_predict"), ctx.api, &p.n_predict_name)) p.n_predict_name.clear();

  MINFER_SET(o.n, read_integer(body, "n", 1, 16, o.n));
  MINFER_SET(o.stream, read_boolean(body, "stream", o.stream));
  MINFER_SET(o.return_tokens, read_boolean(body, "return_tokens", o.return_tokens));
  MINFER_SET(o.cache_prompt, read_boolean(body, "cache_prompt", ctx.cache_prompt));
  MINFER_SET(o.timings_per_token, read_boolean(body, "timings_per_token", o.timings_per_token));
  MINFER_SET(o.return_progress, read_boolean(body, "return_progress", o.return_progress));
  MINFER_SET(o.verbose, read_boolean(body, "verbose", o.verbose));
  MINFER_SET(o.id_slot, read_integer(body, "id_slot", -1, 1 << 20, o.id_slot));
  MINFER_SET(o.n_keep, read_integer(body, "n_keep", -1, 1 << 24, o.n_keep));
  MINFER_SET(o.n_discard, read_integer(body, "n_discard", 0, 1 << 24, o.n_discard));
  MINFER_SET(o.n_probs, read_integer(body, "n_probs", 0, 100, o.n_probs));
  MINFER_SET(o.post_sampling_probs, read_boolean(body, "post_sampling_probs", o.post_sampling_probs));
  if (o.n_probs > 0 && !chat && !field(body, "logprobs")) {  // llama-server's completion_probabilities
    o.logprobs = true;
    o.top_logprobs = o.n_probs;
  }

  if (const json* so = field(body, "stream_options")) {
    if (!so->is_object()) return invalid_param("stream_options", "'stream_options' must be an object");
    const auto v = read_boolean(*so, "include_usage", o.include_usage);
    if (!v) return member_error("stream_options", v.error());
    o.include_usage = *v;
  }

  // logprobs: a boolean (+ top_logprobs 0..20) for chat, an integer 0..5 for completions.
  if (const json* lp = field(body, "logprobs")) {
    if (chat) {
      if (!lp->is_boolean()) return invalid_param("logprobs", "'logprobs' must be a boolean");
      o.logprobs = lp->get<bool>();
      const auto top = read_integer(body, "top_logprobs", 0, 20, -1);  // -1: not given
      if (!top) return top.error();
      if (*top >= 0) {
        if (!o.logprobs) return invalid_param("top_logprobs", "'top_logprobs' needs 'logprobs': true");
        o.top_logprobs = static_cast<int>(*top);
      }
    } else {
      MINFER_SET(o.top_logprobs, read_integer(body, "logprobs", 0, 5, 0));
      o.logprobs = true;
    }
  }

  MINFER_SET(o.spec, parse_speculative(body, ctx));
  MINFER_SET(p.grammar, parse_output_grammar(body));
  MINFER_SET(o.grammar_triggers, parse_triggers(body));
  if (!o.grammar_triggers.empty() && p.grammar.param.empty())
    return invalid_param("grammar_lazy", "'grammar_lazy' needs a 'grammar' (or 'json_schema') to start");

  if (chat) {
    MINFER_SET(p.chat, parse_chat(body, ctx.allow_empty_messages, !p.grammar.param.empty()));
  } else {
    const json* prompt = field(body, "prompt");
    if (!prompt) return invalid_param("prompt", "'prompt' is required");
    p.prompt = *prompt;
  }
  return p;
}

#undef MINFER_SET

}  // namespace minfer::server
