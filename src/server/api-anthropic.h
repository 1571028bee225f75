// Anthropic's Messages API (POST /v1/messages, /v1/messages/count_tokens) read into the chat
// request minfer runs: OpenAI-shaped JSON that parse_completion_request takes (docs/server-api.md
// #anthropic-messages-api). Pure functions, no I/O.
//
//   auto chat = anthropic_to_chat(body, /*count_only=*/false);
//   if (auto* e = std::get_if<ApiError>(&chat)) return reply(*e);
//   auto req = parse_completion_request(std::get<json>(chat), true, ctx);
//
// system (string or text blocks) -> a system message; content blocks: text, tool_use (assistant)
// -> tool_calls, tool_result (user) -> role "tool" messages after the user's text, thinking ->
// reasoning_content; image blocks: this server runs text models (500, as llama-server answers);
// tools {name, description, input_schema} -> functions; tool_choice auto/any/tool/none;
// stop_sequences -> stop; thinking {type: enabled|disabled} -> enable_thinking.
#pragma once

#include <string>

#include "server/api.h"

namespace minfer::server {

ApiResult<json> anthropic_to_chat(const json& body, bool count_only);

// Anthropic's error body: {"type": "error", "error": {"type", "message"}} (plus minfer's fields:
// param, code, llama-server's n_ctx ...); the type is Anthropic's for the status (503:
// overloaded_error, 5xx: api_error ...).
json anthropic_error_json(const ApiError& e);

}  // namespace minfer::server
