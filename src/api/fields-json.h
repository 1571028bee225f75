// The field table (sampling/fields.h) read from and written to JSON, for every API alike: one
// parser for each field type, the names an API uses, the table's ranges and one error shape.
//
//   GenerationSettings s;                 // defaults first (a server's --temp, -n ...)
//   if (auto e = read_fields(body, Api::kJson, tok, s)) return reply_400(e->param, e->message);
//   // e: {"top_p", "'top_p' 1.5 must be in [0, 1] (1 = off, 0 = the most likely token only)"}
//   json echo = sampling_json(s.sampling); // {"temperature": 0.8, "top_k": 40, ...}
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <string_view>

#include "sampling/fields.h"
#include "tokenizer/tokenizer.h"

namespace minfer::api {

using json = nlohmann::ordered_json;  // the server's: objects keep their order

struct FieldError {
  std::string param;    // the name the request used ("max_output_tokens", "logit_bias")
  std::string message;  // names the field, the value and what is allowed
};

// An integer, or a number with no fraction (JavaScript clients send 5.0): what every JSON API
// takes where an integer is asked for.
bool is_integral(const json& v);

// The present, non-null value of one row in `body` by the names `api` reads it by (the first
// that is present), or nullptr; `name` gets the name found.
const json* find_field_value(const json& body, const Field& f, Api api, std::string* name = nullptr);

// Reads every row `api` names from `body` (an object) into s, in table order (the sampler list
// last: a stage it leaves out is off). Absent and null fields keep s's value. Text in
// logit_bias keys and dry_sequence_breakers is tokenized with `tok`. Whole-chain checks
// (validate()) are the caller's, once the request is complete.
std::optional<FieldError> read_fields(const json& body, Api api, const Tokenizer& tok, GenerationSettings& s);

// Copies every row `api` names in `from` into `to` under the same names (a translator building
// the chat body that parse reads with the same api).
void copy_fields(const json& from, Api api, json& to);

// The sampler's settings by their keys (llama-server's generation_settings and /props "params");
// logit_bias as [{"bias": b or null (banned), "token": id}].
json sampling_json(const SamplerParams& p);

}  // namespace minfer::api
