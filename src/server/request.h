// What request handling shares: the one error type (ApiError = http::Error), a result that is a
// value or an ApiError, the request the engine runs (CompletionRequest) and what handling needs
// from the server (ParseContext). The steps: request-parse.h (JSON -> ParsedRequest), then
// request-prepare.h (-> CompletionRequest); api.h composes them.
//
//   ApiResult<int> n = read_n(body);             // a value, or the 400 naming the field
//   if (!n) return n.error();                    // propagate it
//   use(*n);                                     // (std::get_if<ApiError>(&n) works too)
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "gguf/reader.h"
#include "grammar/gbnf.h"
#include "grammar/trigger.h"
#include "http/errors.h"
#include "runtime/speculative.h"
#include "sampling/fields.h"
#include "sampling/params.h"
#include "tokenizer/tokenizer.h"
#include "toolcall/tools.h"

namespace minfer::server {

using json = nlohmann::ordered_json;

// An error reply: status, message, OpenAI's type, the offending field, code (http/errors.h).
using ApiError = http::Error;
using http::error_json;  // {"error": {"message", "type", "param", "code"}}
// A 500 server_error: a failure after the request was accepted (the engine's error text).
inline ApiError server_error(std::string message) { return {500, std::move(message), "server_error", "", ""}; }
// A 400 invalid_request_error naming the offending field: invalid_param("top_p", "must be in [0, 1]").
inline ApiError invalid_param(std::string param, std::string message) {
  ApiError e;
  e.message = std::move(message);
  e.param = std::move(param);
  return e;
}

// A T or the ApiError that refused the request: every fallible step of request handling returns
// one. It is a std::variant<T, ApiError> (std::get_if / std::get work) with Expected's accessors
// (core/status.h).
template <typename T>
class [[nodiscard]] ApiResult : public std::variant<T, ApiError> {
 public:
  using std::variant<T, ApiError>::variant;
  explicit operator bool() const { return this->index() == 0; }
  const ApiError& error() const { return std::get<1>(*this); }
  T& operator*() & { return std::get<0>(*this); }
  const T& operator*() const& { return std::get<0>(*this); }
  T&& operator*() && { return std::get<0>(std::move(*this)); }
  T* operator->() { return &std::get<0>(*this); }
  const T* operator->() const { return &std::get<0>(*this); }
};

struct CompletionRequest {
  bool chat = true;
  std::vector<int32_t> prompt;  // rendered (chat) and tokenized
  int n_predict = -1;           // max_tokens / max_completion_tokens; -1: until eog or context end
  int n = 1;                    // choices
  bool stream = false;
  bool return_tokens = false;   // llama-server's /completion: the generated ids in "tokens"
  bool ignore_eos = false;      // llama.cpp's field: keep going past end-of-generation tokens
  bool include_usage = false;   // stream_options.include_usage
  bool logprobs = false;
  int top_logprobs = 0;
  std::vector<std::string> stop;
  SamplerParams sampling;
  std::shared_ptr<const Grammar> grammar;  // grammar / json_schema / response_format / tools (null: none)
  std::vector<GrammarTrigger> grammar_triggers;  // tools in auto mode: the grammar starts at a call marker
  std::shared_ptr<const toolcall::ToolPlan> tools;  // the reply is read for tool calls (null: plain text)
  std::optional<SpecParams> spec;  // speculative decoding (the server's default, or the request's)
  // llama-server's fields.
  bool cache_prompt = true;     // reuse a slot's cached prefix
  int id_slot = -1;             // the slot to run on (-1: the best free one)
  int n_keep = 0, n_discard = 0;  // context shift: positions kept (-1: the prompt), dropped (0: half the rest)
  int n_probs = 0;              // /completion: completion_probabilities with this many alternatives
  bool post_sampling_probs = false;  // probabilities after the sampler's chain instead of the model's
  bool timings_per_token = false;  // streamed events carry timings
  bool return_progress = false;    // streamed prompt_progress events
  bool verbose = false;            // the reply carries "__verbose" (as with serve -v)
  std::string prompt_text;      // the prompt as text (rendered chat, or the given string)
  // Completions of several prompts at once (llama-server's and OpenAI's prompt arrays): the 2nd,
  // 3rd ... prompts and their texts. Choice index = prompt index * n + i.
  std::vector<std::pair<std::vector<int32_t>, std::string>> extra_prompts;
  int n_prompts() const { return 1 + static_cast<int>(extra_prompts.size()); }
  const std::vector<int32_t>& prompt_ids(int k) const { return k == 0 ? prompt : extra_prompts[static_cast<size_t>(k - 1)].first; }
  const std::string& prompt_string(int k) const { return k == 0 ? prompt_text : extra_prompts[static_cast<size_t>(k - 1)].second; }
  int n_choices() const { return n * n_prompts(); }
  int64_t total_prompt_tokens() const {
    int64_t t = 0;
    for (int k = 0; k < n_prompts(); ++k) t += static_cast<int64_t>(prompt_ids(k).size());
    return t;
  }
};

// What parsing needs from the server: the model's template and tokenizer, and the context size.
struct ParseContext {
  Api api = Api::kJson;              // whose field names the body uses (sampling/fields.h)
  const GgufFile* file = nullptr;
  const Tokenizer* tok = nullptr;
  int n_ctx_slot = 0;
  int default_n_predict = -1;  // max_tokens when the request has none (-1: until eog / context end)
  const SpecParams* spec = nullptr;  // the server's speculative decoding (null: off by default)
  bool has_draft_model = false;      // whether a request may ask for the draft model
  const std::string* chat_template = nullptr;           // the server's template (null/empty: the model's)
  const toolcall::TemplateTools* template_tools = nullptr;  // what that template does with tools
  const SamplerParams* sampling = nullptr;  // the server's sampling defaults (null: SamplerParams{})
  std::string reasoning = "auto";           // --reasoning on/off/auto: enable_thinking for templates
  bool allow_empty_messages = false;        // Anthropic's API takes an empty message list
  bool cache_prompt = true;                 // a request's cache_prompt default
  bool context_shift = false;               // --context-shift: max_tokens may go past the context
  std::shared_ptr<const Grammar> default_grammar;  // serve's --grammar / --json-schema (null: none)
};

}  // namespace minfer::server
