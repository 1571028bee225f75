// OpenAI's Responses API (POST /v1/responses) read into the chat request minfer runs, and the
// shapes of its reply (docs/server-api.md#openai-responses-api). Pure functions, no I/O.
//
//   auto chat = responses_to_chat(body);
//   if (auto* e = std::get_if<ApiError>(&chat)) return reply(*e);
//   auto [r, ch] = state.accept(std::get<json>(chat), res, /*chat=*/true, false);
//   ...
//   json reply = response_json(meta, "completed", output_items, usage);
//
// input: a string (one user message) or items: messages {role, content: string or
// input_text/output_text parts}, function_call (-> the assistant's tool_calls),
// function_call_output (-> a tool message), reasoning (-> reasoning_content); instructions ->
// a system message first; max_output_tokens -> max_tokens; tools {type: function, name,
// parameters} -> functions (other tool types are skipped, as llama-server does); tool_choice;
// text.format (json_object, json_schema) -> response_format. Every other field (temperature,
// top_p, stream, llama-server's timings_per_token, return_progress ...) is the chat request's.
// previous_response_id and item_reference: 400 (no response is stored); images and files: 400.
#pragma once

#include <string>

#include "server/api.h"

namespace minfer::server {

ApiResult<json> responses_to_chat(const json& body);

// What every response object of one request repeats.
struct ResponseMeta {
  std::string id;           // "resp_..."
  int64_t created_at = 0;   // unix seconds
  std::string model;
  json request;             // the Responses body: instructions, max_output_tokens, tools ... are echoed
};

// The response object: status "in_progress", "completed" or "incomplete" (then
// incomplete_details.reason is "max_output_tokens"); usage null while in progress.
json response_json(const ResponseMeta& m, const std::string& status, json output, json usage);
// {input_tokens, input_tokens_details.cached_tokens, output_tokens, output_tokens_details, total_tokens}
json response_usage_json(int n_prompt, int n_gen, int n_cached);

// Output items, as the reply lists them and the stream's output_item events carry them.
json message_item(const std::string& id, const std::string& status, const std::string& text);  // text "" + in_progress: no part yet
json output_text_part(const std::string& text);
json reasoning_item(const std::string& id, const std::string& status, const std::string& text);
json function_call_item(const std::string& id, const std::string& status, const std::string& call_id, const std::string& name,
                        const std::string& arguments);

}  // namespace minfer::server
