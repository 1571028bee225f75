// The one table of generation and sampling settings: each row is a setting's canonical key, its
// names in every front end (CLI flags, the JSON APIs, Ollama's options), its type, default,
// allowed range and help. The CLI options (cli/sampling-options.cpp), the JSON parsing of every
// API and the settings echo (request/fields-json.h), validate() and the table in
// docs/sampling.md (tools/field-table, checked by a test) all come from it: adding a sampler
// stage is its stage file plus one row here.
//
//   GenerationSettings s;                        // SamplerParams' defaults, n_predict -1, ...
//   const Field* f = find_field("top_p");
//   if (Status st = check_value(*f, 1.5, "top_p"); !st) ...  // "top_p 1.5 must be in [0, 1] (1 = off)"
//   f->set_number(s, 0.5);                       // the value lands in s.sampling.top_p
//   for (const Field& row : fields()) if (!row.names_in(Api::kOllama).empty()) ...
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "sampling/params.h"

namespace minfer {

// The front ends whose names the table lists. kJson is the OpenAI / llama-server body (also
// read by viz and, as extensions, by the Responses API); kAnthropic and kResponses list only
// the names those APIs spell differently or define themselves.
enum class Api : uint8_t { kCli, kJson, kAnthropic, kResponses, kOllama };
inline constexpr size_t kApiCount = 5;

// What a request sets beside the sampler: every front end reads these the same way.
struct GenerationSettings {
  SamplerParams sampling;
  int32_t n_predict = -1;          // most tokens to generate; -1: until end of generation or the context is full
  bool ignore_eos = false;         // end-of-generation tokens banned (logit_bias -inf)
  std::vector<std::string> stop;   // stop strings: the text is cut before the first one
};

enum class FieldType : uint8_t {
  kFloat,      // a number in [lo, hi] (open ends as lo_open / hi_open); always finite
  kInt,        // an integer in [lo, hi]
  kBool,
  kStrings,    // stop strings
  kTokenBias,  // logit_bias: per front end (CLI "ID:BIAS", JSON maps and pairs)
  kTokenSeqs,  // dry_sequence_breakers: CLI token ids, JSON strings tokenized
  kStages,     // the sampler list (sampling/order.h): read after every other field
};

struct Field {
  std::string_view key;                           // canonical: the settings echo's and the docs' name
  std::array<std::string_view, kApiCount> names;  // per Api, comma-separated; "" = not read there
  FieldType type;
  double lo = 0, hi = 0;                          // kFloat / kInt: the allowed range
  bool lo_open = false, hi_open = false;
  std::string_view off = {};                      // what special values mean: "0 = greedy"
  std::string_view help = {};
  // The value inside GenerationSettings: kFloat through get/put, kInt and kBool (0 / 1) through
  // get_int/put_int (exact for int64).
  double (*get)(const GenerationSettings&) = nullptr;
  void (*put)(GenerationSettings&, double) = nullptr;
  int64_t (*get_int)(const GenerationSettings&) = nullptr;
  void (*put_int)(GenerationSettings&, int64_t) = nullptr;

  bool is_number() const { return type == FieldType::kFloat || type == FieldType::kInt; }
  bool is_sampler() const;  // a SamplerParams field (the settings echo's "params")
  // The names `api` reads this field by, first the preferred one (kResponses falls back to kJson).
  std::vector<std::string_view> names_in(Api api) const;
  void set_number(GenerationSettings& s, double v) const;      // kFloat
  void set_integer(GenerationSettings& s, int64_t v) const;    // kInt / kBool
  double number(const GenerationSettings& s) const;            // kFloat / kInt / kBool (as a double)
  int64_t integer(const GenerationSettings& s) const;          // kInt / kBool
};

// Every row, in docs/sampling.md's order; kStages last.
std::span<const Field> fields();
const Field* find_field(std::string_view key);

// The range as words: "in [0, 1]", "a finite value >= 0", ">= -1", "finite".
std::string range_text(const Field& f);
// OK when v is inside f's range; else "<name> <v> must be <range> (<off>)".
Status check_value(const Field& f, double v, std::string_view name);
// The default (GenerationSettings{}) as the docs print it: "0.8", "-1", "false", "(none)".
std::string default_text(const Field& f);

}  // namespace minfer
