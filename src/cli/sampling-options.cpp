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

namespace {

// The row's long flag ("--top-p"; every row with a command-line name has one).
std::string long_flag(const Field& f) {
  const std::string flags(f.names[static_cast<size_t>(Api::kCli)]);
  const std::string from_long = flags.substr(flags.find("--"));
  return from_long.substr(0, from_long.find(','));
}

// One option from one row: the flags, the help with what special values mean, the default as the
// struct holds it now, and the row's range checked as the value is parsed.
void add_field_option(CLI::App& app, const Field& f, SamplingOptions& o, const char* group) {
  const std::string flags(f.names[static_cast<size_t>(Api::kCli)]);
  const std::string flag = long_flag(f);
  const std::string help = f.off.empty() ? std::string(f.help) : fmt::format("{}; {}", f.help, f.off);
  GenerationSettings& s = o.s;
  CLI::Option* opt = nullptr;
  switch (f.type) {
    case FieldType::kFloat:
      opt = app.add_option_function<double>(flags, [&s, &f, flag](const double& v) {
        if (Status st = check_value(f, v, flag); !st) throw CLI::ValidationError(st.error().message);
        f.set_number(s, v);
      }, help)->default_str(fmt::format("{}", static_cast<float>(f.number(s))));
      break;
    case FieldType::kInt:
      opt = app.add_option_function<int64_t>(flags, [&s, &f, flag](const int64_t& v) {
        if (Status st = check_value(f, static_cast<double>(v), flag); !st) throw CLI::ValidationError(st.error().message);
        f.set_integer(s, v);
      }, help)->default_str(fmt::format("{}", f.integer(s)));
      break;
    case FieldType::kBool:
      opt = app.add_flag_function(flags, [&s, &f](int64_t) { f.set_integer(s, 1); }, help);
      break;
    case FieldType::kStrings: opt = app.add_option(flags, s.stop, help); break;
    case FieldType::kTokenBias: opt = app.add_option(flags, o.logit_bias, help); break;
    case FieldType::kTokenSeqs: opt = app.add_option(flags, o.dry_sequence_breakers, help); break;
    case FieldType::kStages: opt = app.add_option(flags, o.samplers, help); break;
  }
  if (f.is_sampler()) opt->group(group);
}

}  // namespace

std::set<std::string> given_fields(const CLI::App& app) {
  std::set<std::string> keys;
  for (const Field& f : fields()) {
    if (f.names[static_cast<size_t>(Api::kCli)].empty()) continue;
    const CLI::Option* opt = app.get_option_no_throw(long_flag(f));
    if (opt && opt->count() > 0) keys.insert(std::string(f.key));
  }
  return keys;
}

void add_sampling_options(CLI::App& app, SamplingOptions& o, FieldSet set) {
  const char* g = "Sampling";
  for (const Field& f : fields()) {
    if (f.names[static_cast<size_t>(Api::kCli)].empty()) continue;
    const bool take = f.is_sampler() || set == FieldSet::kAll || (set == FieldSet::kSamplerAndLength && f.key == "n_predict");
    if (take) add_field_option(app, f, o, g);
  }
  app.add_flag("--greedy", o.greedy, "same as --temp 0")->group(g);
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
  SamplerParams q = s.sampling;
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
      for (std::string_view id_text : split(seq, ',')) {
        auto id = parse_id(id_text, "--dry-sequence-breakers");
        if (!id) return id.error();
        ids.push_back(*id);
      }
      q.dry_sequence_breakers.push_back(std::move(ids));
    }
  }
  // Last: a stage the list leaves out is off whatever its own option says.
  if (!samplers.empty())
    if (Status st = apply_sampler_list(q, samplers); !st) return make_error("--samplers: {}", st.error().message);
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
