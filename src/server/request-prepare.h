// Step 2 of request handling: a ParsedRequest (request-parse.h) and the server's ParseContext ->
// the CompletionRequest the engine runs. Here is all that needs the model: the chat rendered with
// the template (tools planned, --reasoning applied), prompts tokenized, grammars compiled,
// ignore_eos's bans, the context-size policy and the sampler's whole-chain check (validate()).
//
//   auto p = parse_request(body, /*chat=*/true, ctx);
//   if (!p) return p.error();
//   auto r = prepare_request(std::move(*p), ctx);   // or a 400: the prompt does not fit ...
//   if (!r) return r.error();
//   run(std::move(*r));
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "server/request-parse.h"

namespace minfer::server {

ApiResult<CompletionRequest> prepare_request(ParsedRequest p, const ParseContext& ctx);

// A chat request's prompt: the messages (and tools) rendered with the template, --reasoning
// applied, tokenized; the tools' grammar when the request has tools. A conversation ending with
// an assistant message continues that message (a prefill).
struct RenderedChat {
  std::string text;
  std::vector<int32_t> tokens;
  std::shared_ptr<const Grammar> grammar;  // the tool-call grammar (null: no tools)
  std::vector<GrammarTrigger> triggers;
  std::shared_ptr<const toolcall::ToolPlan> tools;
};
ApiResult<RenderedChat> render_chat(ParsedChat chat, const ParseContext& ctx, bool add_generation_prompt);

// The prompts of a "prompt" (or "input") field: a string, token ids, ids mixed with strings,
// llama-server's {"prompt_string": ...}, or an array of those (without bare ids), one prompt
// each. Strings are tokenized with special tokens; add_bos puts the BOS before each prompt.
struct ParsedPrompt {
  std::vector<int32_t> ids;
  std::string text;
};
ApiResult<std::vector<ParsedPrompt>> parse_prompts(const json& p, const Tokenizer& tok, bool add_bos, const std::string& field_name);

// The 400 of a prompt that does not fit a slot (or, with count_predict, of prompt + max_tokens):
// llama-server's type exceed_context_size_error with n_prompt_tokens and n_ctx, OpenAI's code
// context_length_exceeded.
ApiError context_size_error(int64_t n_prompt, int64_t n_predict, bool count_predict, int n_ctx, const std::string& param);

}  // namespace minfer::server
