// One line of the sampler oracle's input (check_samplers.py), parsed the same way by both
// sides: llama-oracle's `sampler-lines` and minfer's `sampler-lines`.
//
//   SamplerCase c;
//   if (std::string err = parse_sampler_case(line, c); !err.empty()) die(err);
//   // c.kind == "sigma": c.params = {n}; "dynatemp": {temp, range, exponent}; c.logits
#pragma once

#include <cstdlib>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

struct SamplerCase {
  std::string kind;           // "sigma" or "dynatemp"
  std::vector<float> params;  // sigma: n; dynatemp: temp, range, exponent
  std::vector<float> logits;  // "-inf" allowed
};

// "sigma N L0 L1 ..." or "dynatemp TEMP RANGE EXPONENT L0 L1 ..."; an error message, or "".
inline std::string parse_sampler_case(const std::string& line, SamplerCase& c) {
  std::istringstream in(line);
  c = SamplerCase{};
  in >> c.kind;
  const size_t n_params = c.kind == "sigma" ? 1 : c.kind == "dynatemp" ? 3 : 0;
  if (n_params == 0) return "'" + c.kind + "' is not sigma or dynatemp";
  for (std::string w; in >> w;) {
    char* end = nullptr;
    const float v = w == "-inf" ? -std::numeric_limits<float>::infinity() : std::strtof(w.c_str(), &end);
    if (w != "-inf" && (end == w.c_str() || *end != '\0')) return "'" + w + "' is not a number";
    (c.params.size() < n_params ? c.params : c.logits).push_back(v);
  }
  if (c.params.size() < n_params || c.logits.empty()) return "too few values";
  return "";
}
