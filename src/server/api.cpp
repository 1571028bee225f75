#include "server/api.h"

#include <string>
#include <utility>

namespace minfer::server {

json bytes_array(std::string_view s) {
  json a = json::array();
  for (unsigned char c : s) a.push_back(static_cast<int>(c));
  return a;
}

json tool_arguments_object(const std::string& arguments) {
  json j = json::parse(arguments, nullptr, /*allow_exceptions=*/false);
  return j.is_object() ? j : json::object();
}

std::string tool_arguments_text(const json& arguments) {
  return arguments.is_string() ? arguments.get<std::string>() : arguments.dump(-1, ' ', false, json::error_handler_t::replace);
}

namespace {

std::string token_bytes_string(const Tokenizer& tok, int32_t id) { return std::string(tok.piece(id)); }

}  // namespace

ApiResult<CompletionRequest> parse_completion_request(const json& body, bool chat, const ParseContext& ctx) {
  auto p = parse_request(body, chat, ctx);
  if (!p) return p.error();
  return prepare_request(std::move(*p), ctx);
}

ApiResult<RenderedChat> render_chat_request(const json& body, const ParseContext& ctx, bool add_generation_prompt,
                                            bool has_grammar) {
  auto c = parse_chat(body, ctx.allow_empty_messages, has_grammar);
  if (!c) return c.error();
  return render_chat(std::move(*c), ctx, add_generation_prompt);
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
