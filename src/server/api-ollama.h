// Ollama's API (/api/chat, /api/generate, /api/embed, /api/embeddings, /api/tags, /api/show,
// /api/ps, /api/version) read into the requests minfer runs, and its reply shapes
// (docs/server-api.md#ollama-api). Pure functions, no I/O: routes-ollama.cpp does the rest.
//
//   if (auto e = ollama_check_model(body, s.sp.aliases)) return reply(*e, ollama_error_json);  // 400 / 404
//   auto t = ollama_to_request(body, /*chat_endpoint=*/true);
//   if (!t) return reply(t.error(), ollama_error_json);
//   ParseContext pc = ...; pc.api = Api::kOllama;       // options by Ollama's names (sampling/fields.h)
//   auto req = parse_completion_request(t->body, t->chat, pc);
//
// The translation gives the OpenAI-shaped body parse reads: messages (thinking ->
// reasoning_content, tool_calls' object arguments -> JSON text, tool_name -> name), `system` and
// `prompt` of /api/generate -> a system and a user message (raw: the prompt as it is, after the
// `context` ids; templated: those ids go before it, ollama_prepend_context), options -> their
// Ollama names at the top (read with Api::kOllama), format "json" or a schema ->
// response_format, think -> enable_thinking, stream (Ollama's default: true).
#pragma once

#include <chrono>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "sampling/params.h"
#include "server/api.h"
#include "toolcall/parser.h"

namespace minfer::server {

// The Ollama release whose API this follows, as /api/version reports it (clients gate features
// such as tools and thinking on it).
inline constexpr const char* kOllamaApiVersion = "0.12.0";

struct OllamaRequest {
  json body;              // OpenAI-shaped: parse_completion_request(body, chat, pc) with pc.api kOllama
  bool chat = true;       // false: /api/generate with raw (the prompt is not templated)
  bool load_only = false; // no messages / no prompt: Ollama's "load" reply, nothing generated
  bool think = false;     // think true or a level: a template that cannot think refuses it (400, as Ollama)
  std::optional<double> keep_alive_s;  // ollama_keep_alive's
  // /api/generate's `context` (the ids an earlier reply gave) to put before the templated prompt;
  // a raw prompt has them in body["prompt"] already.
  std::vector<int32_t> context;
};
ApiResult<OllamaRequest> ollama_to_request(const json& body, bool chat_endpoint);

// keep_alive in seconds (a number, or a Go duration string: "5m", "1h30m", "-1"); negative: for
// good; nullopt: not given. 400 naming keep_alive otherwise. A pool (model-pool.h) keeps the
// model that long after the request; the single-model server keeps its model per
// --sleep-idle-seconds whatever it says.
ApiResult<std::optional<double>> ollama_keep_alive(const json& body);

// options.num_ctx: a positive integer (else 400 naming it); nullopt when not given. A pool loads
// the model with that context per slot (model-sleep.h); one MODEL keeps serve's -c.
ApiResult<std::optional<int>> ollama_num_ctx(const json& body);

// The templated prompt of r after `context`'s ids (its own BOS dropped: the context began with
// one); 400 naming `context` for an id outside the vocabulary or a total past the slot's context.
std::optional<ApiError> ollama_prepend_context(CompletionRequest& r, const std::vector<int32_t>& context, const Tokenizer& tok,
                                               int n_ctx_slot);

// /api/embed {"input": text or [texts]} and /api/embeddings {"prompt": text}: the OpenAI
// embeddings body ({"input": ...}).
ApiResult<json> ollama_to_embedding(const json& body, bool legacy);

// 400 "model is required" when `model` is missing or empty; 404 `model "X" not found` when it
// names none of `names` (Ollama's ":latest" tag may be given or left out).
std::optional<ApiError> ollama_check_model(const json& body, const std::vector<std::string>& names);

// Ollama's error body: {"error": "message"}.
json ollama_error_json(const ApiError& e);

// Ollama's sampling defaults (its DefaultOptions: top_p 0.9, min_p 0, repeat_penalty 1.1,
// repeat_last_n 64) for the settings serve's command line did not set (`given`: field keys); a
// flag that set one wins, whatever its value (as a Modelfile PARAMETER does in Ollama).
SamplerParams ollama_sampling_defaults(const SamplerParams& server, const std::set<std::string>& given);

// "2024-05-01T12:00:00.123456789Z"
std::string ollama_time(std::chrono::system_clock::time_point t);

// The model as Ollama lists it: details {parent_model, format, family, families, parameter_size,
// quantization_level} and model_info (every metadata key; arrays only with `verbose`, else null
// as Ollama does).
json ollama_details(const GgufFile& file);
json ollama_model_info(const GgufFile& file, bool verbose);

// The final chunk's statistics, in nanoseconds as Ollama gives them.
json ollama_stats(int n_prompt, const JobUsage& u, std::chrono::steady_clock::duration total);

// message.tool_calls: [{"id", "function": {"index", "name", "arguments": {...}}}].
json ollama_tool_calls(const std::vector<toolcall::ToolCall>& calls);

}  // namespace minfer::server
