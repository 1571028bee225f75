// The sampler's and the generation's command-line options, made from the field table
// (sampling/fields.h): flags, help, defaults and ranges are its rows, so the main command, --cnv
// and serve share them with every JSON API.
//
//   SamplingOptions so;
//   so.s.n_predict = 512;                    // a command's own default, before the options are added
//   add_sampling_options(app, so, FieldSet::kAll);
//   ... app.parse(...);                      // a value outside its range: "--top-p 1.5 must be in [0, 1] (1 = off)"
//   auto params = so.to_params(n_vocab);    // Expected<SamplerParams>, validated
//   if (Status st = so.set_grammar(tok, gp); !st) fail(...);  // --grammar(-file), --json-schema(-file)
#pragma once

#include <CLI/CLI.hpp>

#include <set>
#include <string>
#include <vector>

#include "core/status.h"
#include "runtime/step.h"
#include "sampling/fields.h"
#include "sampling/params.h"
#include "tokenizer/tokenizer.h"

namespace minfer::cli {

struct SamplingOptions {
  GenerationSettings s;            // the numbers and flags of the table; llama.cpp's defaults, a random seed
  bool greedy = false;
  std::vector<std::string> logit_bias;      // "ID:BIAS,ID:BIAS"
  std::string dry_sequence_breakers;        // "198;13,2": ';' between sequences, ',' between ids
  std::string samplers;                     // llama.cpp's stage lists: "top_k;min_p;temperature" or "kmt"
  std::string grammar, grammar_file;        // GBNF text, or a file of it
  std::string json_schema, json_schema_file;  // JSON Schema text, or a file of it (at most one of the four)
  Expected<SamplerParams> to_params(int32_t n_vocab) const;
  // The GBNF the options give (a schema converted); errors name the option and the JSON pointer.
  Expected<std::string> grammar_text() const;
  // Parses the grammar or schema given (none: nothing to do) into gp, with the tokenizer's token
  // trie. Errors name the option and the grammar's line:column or the schema's JSON pointer.
  Status set_grammar(const Tokenizer& tok, StepParams& gp) const;
};

// Which rows of the table a command takes: the sampler's (serve, whose requests bring the rest),
// those plus -n, or every row (the main command: --stop, --ignore-eos too).
enum class FieldSet { kSampler, kSamplerAndLength, kAll };
void add_sampling_options(CLI::App& app, SamplingOptions& o, FieldSet set);

// After parsing: the keys of the rows whose flag the command line gave ("top_p", ...), whatever
// the value (a flag set to llama.cpp's default still counts).
std::set<std::string> given_fields(const CLI::App& app);

}  // namespace minfer::cli
