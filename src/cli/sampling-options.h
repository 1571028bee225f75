// The sampler's command-line options, declared once: the main command, --cnv and (mapped
// field by field) the server share these names, defaults and checks.
//
//   SamplingOptions so;
//   add_sampling_options(app, so);
//   ... app.parse(...);
//   auto params = so.to_params(n_vocab);    // Expected<SamplerParams>, validated
//   if (Status st = so.set_grammar(tok, gp); !st) fail(...);  // --grammar(-file), --json-schema(-file)
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "core/status.h"
#include "runtime/step.h"
#include "sampling/params.h"
#include "tokenizer/tokenizer.h"

namespace minfer::cli {

struct SamplingOptions {
  SamplerParams p;                 // llama.cpp's defaults; a random seed unless --seed
  bool greedy = false;
  std::vector<std::string> logit_bias;      // "ID:BIAS,ID:BIAS"
  std::string dry_sequence_breakers;        // "198;13,2": ';' between sequences, ',' between ids
  std::string samplers, sampling_seq;       // llama.cpp's stage lists: "top_k;min_p;temperature", "kmt"
  std::string grammar, grammar_file;        // GBNF text, or a file of it
  std::string json_schema, json_schema_file;  // JSON Schema text, or a file of it (at most one of the four)
  Expected<SamplerParams> to_params(int32_t n_vocab) const;
  // The GBNF the options give (a schema converted); errors name the option and the JSON pointer.
  Expected<std::string> grammar_text() const;
  // Parses the grammar or schema given (none: nothing to do) into gp, with the tokenizer's token
  // trie. Errors name the option and the grammar's line:column or the schema's JSON pointer.
  Status set_grammar(const Tokenizer& tok, StepParams& gp) const;
};

void add_sampling_options(CLI::App& app, SamplingOptions& o);

}  // namespace minfer::cli
