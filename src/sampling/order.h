// llama.cpp's sampler-order settings (`--samplers`, `--sampling-seq`, a request's "samplers")
// mapped onto minfer's fixed chain (docs/sampling.md): a list in the chain's order selects
// stages, and every stage it leaves out is turned off. A list out of that order (or naming a
// stage twice) is refused: the chain does not reorder, and silently ignoring the order would
// sample differently from what was asked.
//
//   SamplerParams p;
//   if (Status st = apply_sampler_names(p, {"top_k", "min_p", "temperature"}); !st) ...
//   // p.top_p == 1, p.typical_p == 1, p.xtc_probability == 0, ... (left out: off)
//   if (Status st = apply_sampler_chars(p, "kmt"); !st) ...      // the same, one char per stage
//   if (Status st = apply_sampler_list(p, "top_k;min_p;temperature"); !st) ...  // either form
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "sampling/params.h"

namespace minfer {

// Names: penalties, dry, top_n_sigma, top_k, typ_p, top_p, min_p, xtc, temperature (and
// llama.cpp's spellings: top-k, typical_p, typical, nucleus, min-p, temp, ...).
Status apply_sampler_names(SamplerParams& p, const std::vector<std::string>& names);
// One char per stage, llama.cpp's: e d s k y p m x t (the names' order above).
Status apply_sampler_chars(SamplerParams& p, std::string_view chars);
// Either form in one string (a command-line option, a JSON string): names separated by ';' or
// ',' ("top_k;min_p;temperature", or one name), else one char per stage ("kmt").
Status apply_sampler_list(SamplerParams& p, std::string_view list);

}  // namespace minfer
