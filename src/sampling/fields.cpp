#include "sampling/fields.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

namespace minfer {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kI32 = std::numeric_limits<int32_t>::max();
constexpr double kI64 = static_cast<double>(std::numeric_limits<int64_t>::max());

// Accessors of one member of GenerationSettings (designated initializers of a Field row).
#define MINFER_FLOAT(m)                                                     \
  .get = [](const GenerationSettings& s) -> double { return s.m; },         \
  .put = [](GenerationSettings& s, double v) { s.m = static_cast<float>(v); }
#define MINFER_INT(m)                                                    \
  .get_int = [](const GenerationSettings& s) -> int64_t { return s.m; }, \
  .put_int = [](GenerationSettings& s, int64_t v) { s.m = static_cast<decltype(s.m)>(v); }

//                     names: CLI, JSON (OpenAI / llama-server / viz), Anthropic, Responses, Ollama
const Field kFields[] = {
    {.key = "temperature", .names = {"--temp,--temperature", "temperature", "temperature", "", "temperature"},
     .type = FieldType::kFloat, .lo = 0, .hi = kInf, .off = "0 = greedy", .help = "sampling temperature",
     MINFER_FLOAT(sampling.temp)},
    {.key = "dynatemp_range", .names = {"--dynatemp-range", "dynatemp_range", "", "", ""},
     .type = FieldType::kFloat, .lo = 0, .hi = kInf, .off = "0 = off",
     .help = "dynamic temperature: temperature +- RANGE by the entropy", MINFER_FLOAT(sampling.dynatemp_range)},
    {.key = "dynatemp_exponent", .names = {"--dynatemp-exp", "dynatemp_exponent", "", "", ""},
     .type = FieldType::kFloat, .lo = 0, .hi = kInf, .help = "dynamic temperature: entropy exponent",
     MINFER_FLOAT(sampling.dynatemp_exponent)},
    {.key = "top_n_sigma", .names = {"--top-nsigma,--top-n-sigma", "top_n_sigma", "", "", ""},
     .type = FieldType::kFloat, .lo = -kInf, .hi = kInf, .off = "<= 0 = off",
     .help = "keep logits >= max - N x their standard deviation", MINFER_FLOAT(sampling.top_n_sigma)},
    {.key = "top_k", .names = {"--top-k", "top_k", "top_k", "", "top_k"},
     .type = FieldType::kInt, .lo = 0, .hi = kI32, .off = "0 = off", .help = "keep the K most likely tokens",
     MINFER_INT(sampling.top_k)},
    {.key = "typical_p", .names = {"--typical,--typical-p", "typical_p", "", "", "typical_p"},
     .type = FieldType::kFloat, .lo = 0, .hi = 1, .off = "1 = off", .help = "locally typical sampling mass",
     MINFER_FLOAT(sampling.typical_p)},
    {.key = "top_p", .names = {"--top-p", "top_p", "top_p", "", "top_p"},
     .type = FieldType::kFloat, .lo = 0, .hi = 1, .off = "1 = off, 0 = the most likely token only",
     .help = "nucleus sampling: the smallest set of tokens whose probability reaches P", MINFER_FLOAT(sampling.top_p)},
    {.key = "min_p", .names = {"--min-p", "min_p", "", "", "min_p"},
     .type = FieldType::kFloat, .lo = 0, .hi = 1, .off = "0 = off", .help = "drop tokens below P x the top probability",
     MINFER_FLOAT(sampling.min_p)},
    {.key = "xtc_probability", .names = {"--xtc-probability", "xtc_probability", "", "", ""},
     .type = FieldType::kFloat, .lo = 0, .hi = 1, .off = "0 = off", .help = "XTC: chance of removing the top choices",
     MINFER_FLOAT(sampling.xtc_probability)},
    {.key = "xtc_threshold", .names = {"--xtc-threshold", "xtc_threshold", "", "", ""},
     .type = FieldType::kFloat, .lo = 0, .hi = 0.5, .help = "XTC: the probability that makes a token a top choice",
     MINFER_FLOAT(sampling.xtc_threshold)},
    {.key = "repeat_penalty", .names = {"--repeat-penalty", "repeat_penalty", "", "", "repeat_penalty"},
     .type = FieldType::kFloat, .lo = 1, .hi = kInf, .off = "1 = off", .help = "penalty for repeated tokens",
     MINFER_FLOAT(sampling.repeat_penalty)},
    {.key = "repeat_last_n", .names = {"--repeat-last-n", "repeat_last_n", "", "", "repeat_last_n"},
     .type = FieldType::kInt, .lo = -1, .hi = kI32, .off = "-1 = all accepted tokens, 0 = off",
     .help = "penalty window in tokens", MINFER_INT(sampling.repeat_last_n)},
    {.key = "frequency_penalty", .names = {"--frequency-penalty", "frequency_penalty", "", "", "frequency_penalty"},
     .type = FieldType::kFloat, .lo = -kInf, .hi = kInf, .off = "0 = off",
     .help = "subtract N x the count of each repeated token", MINFER_FLOAT(sampling.frequency_penalty)},
    {.key = "presence_penalty", .names = {"--presence-penalty", "presence_penalty", "", "", "presence_penalty"},
     .type = FieldType::kFloat, .lo = -kInf, .hi = kInf, .off = "0 = off",
     .help = "subtract N once per repeated token", MINFER_FLOAT(sampling.presence_penalty)},
    {.key = "dry_multiplier", .names = {"--dry-multiplier", "dry_multiplier", "", "", ""},
     .type = FieldType::kFloat, .lo = 0, .hi = kInf, .off = "0 = off", .help = "DRY penalty multiplier",
     MINFER_FLOAT(sampling.dry_multiplier)},
    {.key = "dry_base", .names = {"--dry-base", "dry_base", "", "", ""},
     .type = FieldType::kFloat, .lo = 1, .hi = kInf, .help = "DRY exponent base", MINFER_FLOAT(sampling.dry_base)},
    {.key = "dry_allowed_length", .names = {"--dry-allowed-length", "dry_allowed_length", "", "", ""},
     .type = FieldType::kInt, .lo = 1, .hi = kI32, .help = "DRY: repeats up to this length are free",
     MINFER_INT(sampling.dry_allowed_length)},
    {.key = "dry_penalty_last_n", .names = {"--dry-penalty-last-n", "dry_penalty_last_n", "", "", ""},
     .type = FieldType::kInt, .lo = -1, .hi = kI32, .off = "-1 = all accepted tokens", .help = "DRY window in tokens",
     MINFER_INT(sampling.dry_penalty_last_n)},
    {.key = "dry_sequence_breakers", .names = {"--dry-sequence-breakers", "dry_sequence_breakers", "", "", ""},
     .type = FieldType::kTokenSeqs,
     .help = "sequences a repeat may not cross: JSON strings; on the command line token ids, '198;13,2'"},
    {.key = "mirostat", .names = {"--mirostat", "mirostat", "", "", "mirostat"},
     .type = FieldType::kInt, .lo = 0, .hi = 2, .off = "0 = off, 1 = v1, 2 = v2",
     .help = "mirostat replaces the temperature draw", MINFER_INT(sampling.mirostat)},
    {.key = "mirostat_tau", .names = {"--mirostat-tau,--mirostat-ent", "mirostat_tau", "", "", "mirostat_tau"},
     .type = FieldType::kFloat, .lo = 0, .hi = kInf, .lo_open = true, .help = "mirostat target surprise (bits)",
     MINFER_FLOAT(sampling.mirostat_tau)},
    {.key = "mirostat_eta", .names = {"--mirostat-eta,--mirostat-lr", "mirostat_eta", "", "", "mirostat_eta"},
     .type = FieldType::kFloat, .lo = 0, .hi = kInf, .lo_open = true, .help = "mirostat learning rate",
     MINFER_FLOAT(sampling.mirostat_eta)},
    {.key = "mirostat_m", .names = {"--mirostat-m", "mirostat_m", "", "", ""},
     .type = FieldType::kInt, .lo = 1, .hi = kI32, .help = "mirostat v1: top tokens for the Zipf estimate",
     MINFER_INT(sampling.mirostat_m)},
    {.key = "logit_bias", .names = {"-l,--logit-bias", "logit_bias", "", "", ""},
     .type = FieldType::kTokenBias, .lo = -100, .hi = 100, .off = "-inf (JSON: false) bans the token",
     .help = "added to token logits: JSON {\"ID\": bias}, {\"text\": bias} or [[ID or text, bias]]; on the command "
             "line ID:BIAS[,ID:BIAS...] (or ID+BIAS / ID-BIAS), repeatable"},
    {.key = "seed", .names = {"-s,--seed", "seed", "", "", "seed"},
     .type = FieldType::kInt, .lo = -1, .hi = kI64, .off = "-1 = a random seed, which -v prints",
     .help = "RNG seed: the same seed replays a run", MINFER_INT(sampling.seed)},
    {.key = "n_predict",
     .names = {"-n,--n-predict,--predict", "max_tokens,max_completion_tokens,n_predict", "max_tokens", "max_output_tokens",
               "num_predict"},
     .type = FieldType::kInt, .lo = -1, .hi = 1 << 30, .off = "-1 = until end of generation or the context is full",
     .help = "most tokens to generate", MINFER_INT(n_predict)},
    {.key = "ignore_eos", .names = {"--ignore-eos", "ignore_eos", "", "", ""},
     .type = FieldType::kBool, .help = "do not stop at end-of-generation tokens", MINFER_INT(ignore_eos)},
    {.key = "stop", .names = {"--stop,-r,--reverse-prompt", "stop", "stop_sequences", "", "stop"},
     .type = FieldType::kStrings, .help = "stop strings: the text is cut before the first one (repeatable)"},
    {.key = "samplers", .names = {"--samplers,--sampling-seq,--sampler-seq", "samplers", "", "", ""},
     .type = FieldType::kStages,
     .help = "the stages to run, in the chain's order, the others off: names ('top_k;min_p;temperature', a JSON "
             "array) or one char each ('kmt')"},
};

#undef MINFER_FLOAT
#undef MINFER_INT

// A number as the docs and messages print it: "0.8", "1e+30", "inf".
std::string num(double v) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (std::floor(v) == v && std::fabs(v) < 1e18) return fmt::format("{}", static_cast<int64_t>(v));
  if (static_cast<double>(static_cast<float>(v)) == v) return fmt::format("{}", static_cast<float>(v));  // 0.8f: "0.8"
  return fmt::format("{}", v);
}

}  // namespace

bool Field::is_sampler() const { return key != "n_predict" && key != "ignore_eos" && key != "stop"; }

std::vector<std::string_view> Field::names_in(Api api) const {
  std::string_view list = names[static_cast<size_t>(api)];
  if (list.empty() && api == Api::kResponses) list = names[static_cast<size_t>(Api::kJson)];
  std::vector<std::string_view> out;
  while (!list.empty()) {
    const size_t comma = list.find(',');
    out.push_back(list.substr(0, comma));
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
  }
  return out;
}

void Field::set_number(GenerationSettings& s, double v) const { put(s, v); }
void Field::set_integer(GenerationSettings& s, int64_t v) const { put_int(s, v); }
double Field::number(const GenerationSettings& s) const {
  return type == FieldType::kFloat ? get(s) : static_cast<double>(get_int(s));
}
int64_t Field::integer(const GenerationSettings& s) const { return get_int(s); }

std::span<const Field> fields() { return kFields; }

const Field* find_field(std::string_view key) {
  for (const Field& f : kFields)
    if (f.key == key) return &f;
  return nullptr;
}

std::string range_text(const Field& f) {
  // An int32 / int64 field's own limit is no bound worth printing.
  const bool lo = std::isfinite(f.lo), hi = std::isfinite(f.hi) && f.hi < kI32;
  const char* kind = f.type == FieldType::kInt ? "an integer" : "a finite value";
  if (lo && hi) return fmt::format("in {}{}, {}{}", f.lo_open ? '(' : '[', num(f.lo), num(f.hi), f.hi_open ? ')' : ']');
  if (lo) return fmt::format("{} {} {}", kind, f.lo_open ? ">" : ">=", num(f.lo));
  if (hi) return fmt::format("{} {} {}", kind, f.hi_open ? "<" : "<=", num(f.hi));
  return "finite";
}

Status check_value(const Field& f, double v, std::string_view name) {
  const bool ok = std::isfinite(v) && (f.lo_open ? v > f.lo : v >= f.lo) && (f.hi_open ? v < f.hi : v <= f.hi) &&
                  (f.type != FieldType::kInt || std::floor(v) == v);
  if (ok) return Status::ok();
  return make_error("{} {} must be {}{}", name, num(v), range_text(f), f.off.empty() ? "" : fmt::format(" ({})", f.off));
}

std::string default_text(const Field& f) {
  const GenerationSettings d;
  switch (f.type) {
    case FieldType::kFloat: return num(f.number(d));
    case FieldType::kInt: return fmt::format("{}", f.integer(d));
    case FieldType::kBool: return f.integer(d) ? "true" : "false";
    default: return "(none)";
  }
}

}  // namespace minfer
