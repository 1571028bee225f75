#include "server/request-prepare.h"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <string_view>
#include <utility>

#include <fmt/format.h>

#include "runtime/chat-prompt.h"
#include "server/reasoning.h"

namespace minfer::server {
namespace {

// GBNF text -> a grammar; an error is a 400 naming `param`, its message after `what`.
ApiResult<std::shared_ptr<const Grammar>> compile_grammar(const std::string& gbnf, const std::string& param, const std::string& what) {
  auto g = parse_gbnf(gbnf);
  if (!g) return invalid_param(param, what + g.error().message);
  return std::make_shared<const Grammar>(std::move(*g));
}

// The tools' plan for this template: the grammar of their calls, the prompt's suffix, the
// messages as the template takes them.
ApiResult<toolcall::ToolPlan> plan_tools(const toolcall::TemplateTools& tt, const toolcall::ToolRequest& treq) {
  auto plan = toolcall::plan_tool_calls(tt, treq);
  if (!plan) {
    const std::string& m = plan.error().message;  // "tools[i].function.parameters: ..." names its field
    const size_t colon = m.find(": ");
    return invalid_param(m.starts_with("tools[") && colon != std::string::npos ? m.substr(0, colon) : "tools", m);
  }
  return std::move(*plan);
}

// Template variables besides the messages, as llama-server gives them; the request's
// chat_template_kwargs win.
json template_extra(const ParsedChat& chat, const ParseContext& ctx) {
  json extra = json::object();
  if (!chat.tools.tools.empty() &&
      toolcall::template_gets_tools(ctx.template_tools ? *ctx.template_tools : toolcall::TemplateTools{}, chat.tools))
    extra["tools"] = chat.tools.tools_json;
  // --reasoning: the templates' thinking switch, on unless "off" (as llama-server passes it).
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
  extra["functions"] = chat.tools.tools.empty() ? std::string() : chat.tools.tools_json.dump(2);
  for (auto it = chat.template_kwargs.begin(); it != chat.template_kwargs.end(); ++it) extra[it.key()] = it.value();
  return extra;
}

// One prompt: a string, token ids, ids mixed with strings, or llama-server's
// {"prompt_string": ...} (its "multimodal_data" needs a vision model).
ApiResult<ParsedPrompt> parse_prompt(const json& p, const Tokenizer& tok, bool add_bos, const std::string& where) {
  const int32_t n_vocab = tok.n_vocab();
  if (p.is_string()) return ParsedPrompt{tok.encode(p.get<std::string>(), add_bos, /*parse_special=*/true), p.get<std::string>()};
  if (p.is_object() && p.contains("prompt_string")) {
    if (p.contains("multimodal_data"))
      return invalid_param(where + ".multimodal_data", fmt::format("'{}.multimodal_data': this model takes no media (minfer serves text models)", where));
    return parse_prompt(p["prompt_string"], tok, add_bos, where + ".prompt_string");
  }
  if (!p.is_array() || p.empty())
    return invalid_param(where, fmt::format("'{}' must be a string, token ids (and strings), or {{\"prompt_string\": ...}}", where));
  std::vector<int32_t> ids;
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
  return ParsedPrompt{std::move(ids), std::move(text)};
}

}  // namespace

ApiResult<std::vector<ParsedPrompt>> parse_prompts(const json& p, const Tokenizer& tok, bool add_bos, const std::string& field_name) {
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
    if (!one) return one.error();
    out.push_back(std::move(*one));
  }
  return out;
}

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

ApiResult<RenderedChat> render_chat(ParsedChat chat, const ParseContext& ctx, bool add_generation_prompt) {
  json& norm = chat.messages;
  if (!chat.continue_final && chat.add_generation_prompt) add_generation_prompt = *chat.add_generation_prompt;
  // A conversation ending with an assistant message continues that message (a prefill): the
  // rest is rendered with the generation prompt and its text follows.
  const auto is_assistant = [](const json& m) { return m.value("role", "") == "assistant"; };
  std::string prefill;
  if (!norm.empty() && is_assistant(norm.back()) && (add_generation_prompt || chat.continue_final)) {
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
  std::string suffix;
  const toolcall::ToolRequest& treq = chat.tools;
  if (!treq.tools.empty()) {
    const toolcall::TemplateTools tt = ctx.template_tools ? *ctx.template_tools : toolcall::TemplateTools{};
    auto plan = plan_tools(tt, treq);
    if (!plan) return plan.error();
    if (!plan->gbnf.empty()) {
      auto g = compile_grammar(plan->gbnf, "tools", "tool-call grammar: ");
      if (!g) return g.error();
      out.grammar = std::move(*g);
      out.triggers = plan->triggers;
      out.tools = std::make_shared<const toolcall::ToolPlan>(*plan);
    }
    if (add_generation_prompt) suffix = plan->prompt_suffix;
    norm = toolcall::prepare_messages(tt, treq, std::move(norm));
  }
  const json extra = template_extra(chat, ctx);
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

ApiResult<CompletionRequest> prepare_request(ParsedRequest p, const ParseContext& ctx) {
  CompletionRequest r = std::move(p.options);
  const Tokenizer& tok = *ctx.tok;
  if (r.ignore_eos)  // llama-server's way: the end-of-generation tokens are banned (shown in logit_bias)
    for (int32_t id : tok.eog_ids()) r.sampling.logit_bias[id] = -INFINITY;
  if (!p.grammar.param.empty()) {
    auto g = compile_grammar(p.grammar.gbnf, p.grammar.param, p.grammar.param + ": ");
    if (!g) return g.error();
    r.grammar = std::move(*g);
  }

  if (r.chat) {
    auto c = render_chat(std::move(p.chat), ctx, /*add_generation_prompt=*/true);
    if (!c) return c.error();
    if (c->grammar) {
      r.grammar = std::move(c->grammar);
      r.grammar_triggers = std::move(c->triggers);
    }
    r.tools = std::move(c->tools);
    r.prompt = std::move(c->tokens);
    r.prompt_text = std::move(c->text);
  } else {
    // llama-server's and OpenAI's forms (parse_prompts): one completion per prompt.
    auto prompts = parse_prompts(p.prompt, tok, tok.add_bos(), "prompt");
    if (!prompts) return prompts.error();
    for (size_t k = 0; k < prompts->size(); ++k) {
      auto& [ids, ptext] = (*prompts)[k];
      if (ids.empty()) return invalid_param("prompt", prompts->size() > 1 ? fmt::format("prompt[{}] is empty", k) : "the prompt is empty");
      if (k == 0) {
        r.prompt = std::move(ids);
        r.prompt_text = std::move(ptext);
      } else {
        r.extra_prompts.emplace_back(std::move(ids), std::move(ptext));
      }
    }
  }
  const std::string prompt_param = r.chat ? "messages" : "prompt";
  if (r.prompt.empty()) return invalid_param(prompt_param, "the prompt is empty");
  // serve's --grammar / --json-schema: the output of requests that constrain nothing themselves.
  if (!r.grammar && !r.tools && ctx.default_grammar) r.grammar = ctx.default_grammar;

  // A prompt that does not fit is refused, and (OpenAI's rule) so is an explicit max_tokens
  // beyond the context; llama-server's native /completion instead stops at the context's end.
  int64_t n_prompt = static_cast<int64_t>(r.prompt.size());
  for (const auto& [ids, t] : r.extra_prompts) n_prompt = std::max<int64_t>(n_prompt, static_cast<int64_t>(ids.size()));
  // With context shift a generation goes past the context's end: only the prompt must fit.
  // max_tokens & co (OpenAI's names, Anthropic's, Responses') count, not llama-server's n_predict
  // nor Ollama's num_predict (there a reply just ends at the context's end).
  const bool explicit_max = !ctx.context_shift && !p.n_predict_name.empty() && p.n_predict_name != "n_predict" &&
                            p.n_predict_name != "num_predict";
  const int64_t n_predict = std::max<int64_t>(r.n_predict, 0);
  if (n_prompt >= ctx.n_ctx_slot || n_prompt + (explicit_max ? n_predict : 0) > ctx.n_ctx_slot)
    return context_size_error(n_prompt, n_predict, explicit_max, ctx.n_ctx_slot, prompt_param);
  if (Status st = validate(r.sampling, tok.n_vocab()); !st) return invalid_param("", st.error().message);
  return r;
}

}  // namespace minfer::server
