// OpenAI request parsing and response shapes (docs/server-api.md). Pure functions: no I/O, no
// engine, so each shape is testable on its own. A request is handled in two steps, each with
// its own header: request-parse.h (JSON -> ParsedRequest, every field checked) and
// request-prepare.h (-> CompletionRequest: rendering, tokenizing, the context policy);
// parse_completion_request runs both.
//
//   auto req = parse_completion_request(body_json, /*chat=*/true, ctx);
//   if (!req) return reply(req.error().status, error_json(req.error()));
//   const CompletionRequest& r = *req;
#pragma once

#include <nlohmann/json.hpp>

#include <string_view>
#include <vector>

#include "server/engine.h"
#include "server/request-prepare.h"
#include "server/request.h"
#include "tokenizer/tokenizer.h"

namespace minfer::server {

json bytes_array(std::string_view s);  // [byte, ...]: a token's bytes as llama-server and OpenAI give them

// A tool call's arguments between the two shapes the APIs use: OpenAI's JSON text, and the
// object of Anthropic's `input` and Ollama's `arguments`. Text that is not a JSON object (a call
// cut short by the length limit) becomes {}; a string passes as it is.
json tool_arguments_object(const std::string& arguments);
std::string tool_arguments_text(const json& arguments);

// parse_request, then prepare_request: the first error of either.
ApiResult<CompletionRequest> parse_completion_request(const json& body, bool chat, const ParseContext& ctx);

// parse_chat, then render_chat: a chat body's prompt (/apply-template and the token counters).
ApiResult<RenderedChat> render_chat_request(const json& body, const ParseContext& ctx, bool add_generation_prompt,
                                            bool has_grammar);

// The logprobs objects OpenAI returns, from the engine's per-token values.
json chat_logprobs_json(const Tokenizer& tok, const std::vector<TokenLogprob>& lps);  // [{token,logprob,bytes,top_logprobs}]
void append_completion_logprobs(const Tokenizer& tok, const std::vector<TokenLogprob>& lps, json& lp,
                                size_t& text_offset);  // {tokens, token_logprobs, top_logprobs, text_offset}

}  // namespace minfer::server
