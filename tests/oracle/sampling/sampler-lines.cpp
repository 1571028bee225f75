// minfer's side of the sampler oracle (check_samplers.py): the same cases as
// `llama-oracle sampler-lines`, through sampling::top_n_sigma and sampling::dynamic_temperature.
//   stdin, one case per line: "sigma N L0 L1 ..." or "dynatemp TEMP RANGE EXPONENT L0 L1 ..."
//   stdout per line: {"kept":[ids]} (ascending) or {"temp":T}
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "sampler-case.h"
#include "sampling/stages.h"

int main() {
  std::string line;
  size_t line_no = 0;
  auto fail = [&](const std::string& why) {
    std::fprintf(stderr, "sampler-lines: stdin line %zu: %s\n", line_no, why.c_str());
    std::exit(2);
  };
  while (std::getline(std::cin, line)) {
    ++line_no;
    SamplerCase sc;
    if (const std::string err = parse_sampler_case(line, sc); !err.empty()) fail(err);
    const std::string& kind = sc.kind;
    const std::vector<float>& param = sc.params;
    const std::vector<float>& logits = sc.logits;
    minfer::Candidates c;
    c.load(logits);
    c.collect();
    if (kind == "sigma") {
      minfer::sampling::top_n_sigma(c, param[0]);
      std::string out = "{\"kept\":[";
      for (size_t i = 0; i < c.ids.size(); ++i) out.append(i ? "," : "").append(std::to_string(c.ids[i]));
      std::printf("%s]}\n", out.c_str());
    } else {
      std::printf("{\"temp\":%.9g}\n", minfer::sampling::dynamic_temperature(c, param[0], param[1], param[2]));
    }
  }
  return 0;
}
