// The sampler's command-line options, declared once: the main command, --cnv and (mapped
// field by field) the server share these names, defaults and checks.
//
//   SamplingOptions so;
//   add_sampling_options(app, so);
//   ... app.parse(...);
//   auto params = so.to_params(n_vocab);    // Expected<SamplerParams>, validated
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "core/status.h"
#include "sampling/params.h"

namespace minfer::cli {

struct SamplingOptions {
  SamplerParams p;                 // defaults of the reference, seed 42 (reproducible runs)
  bool greedy = false;
  std::vector<std::string> logit_bias;      // "ID:BIAS,ID:BIAS"
  std::string dry_sequence_breakers;        // "198;13,2": ';' between sequences, ',' between ids
  SamplingOptions() { p.seed = 42; }
  Expected<SamplerParams> to_params(int32_t n_vocab) const;
};

void add_sampling_options(CLI::App& app, SamplingOptions& o);

}  // namespace minfer::cli
