#include "cli/sampling-options.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <fstream>
#include <iterator>
#include <memory>

#include "grammar/gbnf.h"
#include "grammar/json-schema.h"
#include "sampling/order.h"

namespace minfer::cli {

void add_sampling_options(CLI::App& app, SamplingOptions& o) {
  SamplerParams& p = o.p;
  const char* g = "Sampling";
  app.add_option("--temp,--temperature", p.temp, "temperature; 0 = greedy (argmax)")->capture_default_str()->group(g);
  app.add_flag("--greedy", o.greedy, "same as --temp 0")->group(g);
  app.add_option("--dynatemp-range", p.dynatemp_range, "dynamic temperature: temp +- RANGE by the entropy; 0 = off")->capture_default_str()->group(g);
  app.add_option("--dynatemp-exp", p.dynatemp_exponent, "dynamic temperature: entropy exponent")->capture_default_str()->group(g);
  app.add_option("--top-nsigma,--top-n-sigma", p.top_n_sigma, "keep logits >= max - N x their std deviation; <= 0 = off")->capture_default_str()->group(g);
  app.add_option("--top-k", p.top_k, "keep the K most likely tokens; 0 = off")->capture_default_str()->group(g);
  app.add_option("--top-p", p.top_p, "nucleus sampling mass; 1 = off")->capture_default_str()->group(g);
  app.add_option("--min-p", p.min_p, "drop tokens below P x the top probability; 0 = off")->capture_default_str()->group(g);
  app.add_option("--typical,--typical-p", p.typical_p, "locally typical sampling; 1 = off")->capture_default_str()->group(g);
  app.add_option("--repeat-penalty", p.repeat_penalty, "penalty for repeated tokens; 1 = off")->capture_default_str()->group(g);
  app.add_option("--repeat-last-n", p.repeat_last_n, "penalty window in tokens; -1 = all, 0 = off")->capture_default_str()->group(g);
  app.add_option("--frequency-penalty", p.frequency_penalty, "subtract count x N")->capture_default_str()->group(g);
  app.add_option("--presence-penalty", p.presence_penalty, "subtract N once per present token")->capture_default_str()->group(g);
  app.add_option("--dry-multiplier", p.dry_multiplier, "DRY penalty multiplier; 0 = off")->capture_default_str()->group(g);
  app.add_option("--dry-base", p.dry_base, "DRY exponent base")->capture_default_str()->group(g);
  app.add_option("--dry-allowed-length", p.dry_allowed_length, "DRY: repeats up to this length are free")->capture_default_str()->group(g);
  app.add_option("--dry-penalty-last-n", p.dry_penalty_last_n, "DRY window; -1 = all")->capture_default_str()->group(g);
  app.add_option("--dry-sequence-breakers", o.dry_sequence_breakers, "token-id sequences DRY may not cross: '198;13,2'")->group(g);
  app.add_option("--xtc-probability", p.xtc_probability, "XTC probability; 0 = off")->capture_default_str()->group(g);
  app.add_option("--xtc-threshold", p.xtc_threshold, "XTC threshold (<= 0.5)")->capture_default_str()->group(g);
  app.add_option("--mirostat", p.mirostat, "0 = off, 1 or 2 = mirostat v1/v2")->capture_default_str()->group(g);
  app.add_option("--mirostat-tau,--mirostat-ent", p.mirostat_tau, "mirostat target surprise")->capture_default_str()->group(g);
  app.add_option("--mirostat-eta,--mirostat-lr", p.mirostat_eta, "mirostat learning rate")->capture_default_str()->group(g);
  app.add_option("--mirostat-m", p.mirostat_m, "mirostat v1 tokens for the Zipf estimate")->capture_default_str()->group(g);
  auto* so = app.add_option("--samplers", o.samplers, "stages to run, ';'-separated, in the fixed order (penalties;dry;top_n_sigma;top_k;typ_p;top_p;min_p;xtc;temperature); the others are off")->group(g);
  app.add_option("--sampling-seq,--sampler-seq", o.sampling_seq, "the same as one char per stage (edskypmxt)")->group(g)->excludes(so);
  app.add_option("-l,--logit-bias", o.logit_bias, "ID:BIAS[,ID:BIAS...] (or llama.cpp's ID+BIAS / ID-BIAS), repeatable; BIAS -inf bans")->group(g);
  app.add_option("-s,--seed", p.seed, "RNG seed; -1 = random (the default; -v prints the seed drawn)")->group(g);
  auto* gr = app.add_option("--grammar", o.grammar, "GBNF grammar the output must match")->group("Grammar");
  auto* gf = app.add_option("--grammar-file", o.grammar_file, "file holding a GBNF grammar")->group("Grammar")->excludes(gr);
  auto* js = app.add_option("-j,--json-schema", o.json_schema, "JSON Schema the output must follow (JSON text)")
                 ->group("Grammar")->excludes(gr)->excludes(gf);
  app.add_option("--json-schema-file", o.json_schema_file, "file holding a JSON Schema")
      ->group("Grammar")->excludes(gr)->excludes(gf)->excludes(js);
}

namespace {

Expected<int32_t> parse_id(std::string_view s, std::string_view what) {
  int32_t v = 0;
  auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (r.ec != std::errc() || r.ptr != s.data() + s.size())
    return make_error("{}: '{}' is not a token id", what, s);
  return v;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i)
    if (i == s.size() || s[i] == sep) {
      out.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  return out;
}

}  // namespace

Expected<SamplerParams> SamplingOptions::to_params(int32_t n_vocab) const {
  SamplerParams q = p;
  if (greedy) q.temp = 0.0f;
  for (const std::string& arg : logit_bias) {
    for (std::string_view item : split(arg, ',')) {
      // ID:BIAS, or llama.cpp's ID+BIAS / ID-BIAS.
      size_t colon = item.find(':');
      size_t skip = 1;
      if (colon == std::string_view::npos) {
        colon = item.find_first_of("+-", 1);
        skip = 0;
      }
      if (colon == std::string_view::npos)
        return make_error("--logit-bias: '{}' is not ID:BIAS (or ID+BIAS, ID-BIAS)", item);
      auto id = parse_id(item.substr(0, colon), "--logit-bias");
      if (!id) return id.error();
      std::string bias(item.substr(colon + skip));
      if (!bias.empty() && bias[0] == '+') bias.erase(0, 1);
      float b = 0;
      if (bias == "-inf" || bias == "-infinity") {
        b = -INFINITY;
      } else {
        char* end = nullptr;
        b = std::strtof(bias.c_str(), &end);
        if (bias.empty() || *end != '\0') return make_error("--logit-bias: '{}' is not a number", bias);
      }
      q.logit_bias[*id] = b;
    }
  }
  if (!dry_sequence_breakers.empty()) {
    for (std::string_view seq : split(dry_sequence_breakers, ';')) {
      std::vector<int32_t> ids;
      for (std::string_view s : split(seq, ',')) {
        auto id = parse_id(s, "--dry-sequence-breakers");
        if (!id) return id.error();
        ids.push_back(*id);
      }
      q.dry_sequence_breakers.push_back(std::move(ids));
    }
  }
  // Last: a stage the list leaves out is off whatever its own option says.
  if (!samplers.empty()) {
    std::vector<std::string> names;
    for (std::string_view s : split(samplers, ';')) names.emplace_back(s);
    if (Status st = apply_sampler_names(q, names); !st) return make_error("--samplers: {}", st.error().message);
  }
  if (!sampling_seq.empty())
    if (Status st = apply_sampler_chars(q, sampling_seq); !st) return make_error("--sampling-seq: {}", st.error().message);
  if (Status st = validate(q, n_vocab); !st) return st.error();
  return q;
}

namespace {

Expected<std::string> read_file(const std::string& path, std::string_view option) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error("{}: cannot read '{}'", option, path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace

Expected<std::string> SamplingOptions::grammar_text() const {
  if (!grammar.empty()) return grammar;
  if (!grammar_file.empty()) {
    auto t = read_file(grammar_file, "--grammar-file");
    if (!t) return t;
    return *t;
  }
  std::string schema = json_schema, what = "--json-schema";
  if (!json_schema_file.empty()) {
    auto t = read_file(json_schema_file, "--json-schema-file");
    if (!t) return t;
    schema = std::move(*t);
    what = fmt::format("--json-schema-file {}", json_schema_file);
  }
  auto g = json_schema_to_gbnf(schema);
  if (!g) return make_error("{}: {}", what, g.error().message);
  return *g;
}

Status SamplingOptions::set_grammar(const Tokenizer& tok, StepParams& gp) const {
  if (grammar.empty() && grammar_file.empty() && json_schema.empty() && json_schema_file.empty()) return {};
  auto text = grammar_text();
  if (!text) return text.error();
  const std::string what = !grammar.empty() ? "--grammar" : !grammar_file.empty() ? fmt::format("--grammar-file {}", grammar_file) : "--json-schema";
  auto g = parse_gbnf(*text);
  if (!g) return make_error("{}: {}", what, g.error().message);
  gp.grammar = std::make_shared<const Grammar>(std::move(*g));
  gp.grammar_tokens = grammar_tokens(tok);
  return {};
}

}  // namespace minfer::cli
