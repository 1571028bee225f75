// Step 1 of request handling: a JSON body -> ParsedRequest, every field checked and typed, the
// first bad one refused with a 400 naming it. Nothing here needs the model beyond what the field
// table reads (logit_bias keys given as text); rendering, tokenizing and compiling grammars are
// step 2's (request-prepare.h).
//
//   auto p = parse_request(body, /*chat=*/false, ctx);
//   if (!p) return p.error();                 // {"param": "top_p", "message": "'top_p' 2 must be in [0, 1] ..."}
//   p->options.n_predict, p->options.sampling.temp, p->grammar.gbnf, p->prompt ...
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "server/request.h"
#include "toolcall/tools.h"

namespace minfer::server {

// A chat request's conversation fields.
struct ParsedChat {
  json messages = json::array();  // roles checked; content a string (text parts joined, null -> "")
  bool continue_final = false;    // continue_final_message: the last (assistant) message is continued
  std::optional<bool> add_generation_prompt;  // the request's (absent: the caller's default)
  toolcall::ToolRequest tools;    // tools, tool_choice, parallel_tool_calls (no tools: empty)
  json template_kwargs = json::object();  // chat_template_kwargs (other than an object: ignored)
};

// The reply's constraint as GBNF text, and the field that gave it ("grammar", "json_schema",
// "response_format"; "": none). JSON Schemas are already converted.
struct GrammarText {
  std::string gbnf;
  std::string param;
};

struct ParsedRequest {
  // Every option that needs no model, in place: n, stream, logprobs, n_predict, stop, sampling
  // (the field table over the server's defaults; ignore_eos's bans are step 2's), spec,
  // grammar_triggers, cache_prompt, id_slot, n_keep ... The prompt, grammar and tools are empty.
  CompletionRequest options;
  std::string n_predict_name;  // the field that set n_predict ("max_tokens", "n_predict" ...; "": absent)
  GrammarText grammar;         // grammar / json_schema / response_format (compiled in step 2)
  ParsedChat chat;             // chat requests
  json prompt;                 // completions: the "prompt" field as given (tokenized in step 2)
};

ApiResult<ParsedRequest> parse_request(const json& body, bool chat, const ParseContext& ctx);

// The chat fields alone (/apply-template and the token counters read them too). has_grammar:
// the request also constrains the reply, which tools (unless tool_choice is none) refuse.
ApiResult<ParsedChat> parse_chat(const json& body, bool allow_empty_messages, bool has_grammar);

}  // namespace minfer::server
