#include "sampling/order.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>

namespace minfer {
namespace {

enum Stage { kPenalties, kDry, kTopNSigma, kTopK, kTypical, kTopP, kMinP, kXtc, kTemperature, kStages };

struct StageName {
  Stage stage;
  std::string_view name;  // the first of each stage is its canonical name
};
constexpr StageName kNames[] = {
    {kPenalties, "penalties"}, {kDry, "dry"}, {kTopNSigma, "top_n_sigma"}, {kTopNSigma, "top-n-sigma"},
    {kTopNSigma, "top_nsigma"}, {kTopK, "top_k"}, {kTopK, "top-k"}, {kTypical, "typ_p"}, {kTypical, "typ-p"},
    {kTypical, "typical_p"}, {kTypical, "typical-p"}, {kTypical, "typical"}, {kTypical, "typ"},
    {kTopP, "top_p"}, {kTopP, "top-p"}, {kTopP, "nucleus"}, {kMinP, "min_p"}, {kMinP, "min-p"},
    {kXtc, "xtc"}, {kTemperature, "temperature"}, {kTemperature, "temp"},
};
constexpr std::string_view kChars = "edskypmxt";  // by Stage

std::string_view canonical(Stage s) {
  for (const StageName& n : kNames)
    if (n.stage == s) return n.name;
  return "?";
}

std::string order_text() {
  std::string out;
  for (int s = 0; s < kStages; ++s) out += (s ? ", " : "") + std::string(canonical(static_cast<Stage>(s)));
  return out;
}

Status apply(SamplerParams& p, const std::vector<Stage>& stages, const std::vector<std::string>& given) {
  std::array<bool, kStages> on{};
  for (size_t i = 0; i < stages.size(); ++i) {
    if (i > 0 && stages[i] <= stages[i - 1])
      return make_error("samplers: '{}' after '{}': minfer's sampler order is fixed ({}); list stages in that "
                        "order, each once (a stage left out is off)",
                        given[i], given[i - 1], order_text());
    on[stages[i]] = true;
  }
  if (!on[kPenalties]) p.repeat_penalty = 1.0f, p.frequency_penalty = 0.0f, p.presence_penalty = 0.0f;
  if (!on[kDry]) p.dry_multiplier = 0.0f;
  if (!on[kTopNSigma]) p.top_n_sigma = -1.0f;
  if (!on[kTopK]) p.top_k = 0;
  if (!on[kTypical]) p.typical_p = 1.0f;
  if (!on[kTopP]) p.top_p = 1.0f;
  if (!on[kMinP]) p.min_p = 0.0f;
  if (!on[kXtc]) p.xtc_probability = 0.0f;
  // No temperature stage: llama.cpp draws from the raw logits, i.e. at temperature 1 (greedy
  // stays greedy).
  if (!on[kTemperature] && p.temp >= kGreedyTemp) p.temp = 1.0f, p.dynatemp_range = 0.0f;
  return Status::ok();
}

}  // namespace

Status apply_sampler_names(SamplerParams& p, const std::vector<std::string>& names) {
  std::vector<Stage> stages;
  for (const std::string& name : names) {
    const StageName* hit = nullptr;
    for (const StageName& n : kNames)
      if (n.name == name) hit = &n;
    if (!hit) {
      if (name == "infill") return make_error("samplers: the infill sampler is not supported");
      return make_error("samplers: '{}' is not a sampler (known: {})", name, order_text());
    }
    stages.push_back(hit->stage);
  }
  return apply(p, stages, names);
}

Status apply_sampler_chars(SamplerParams& p, std::string_view chars) {
  std::vector<Stage> stages;
  std::vector<std::string> given;
  for (char c : chars) {
    const size_t at = kChars.find(c);
    if (at == std::string_view::npos) {
      if (c == 'i') return make_error("samplers: the infill sampler ('i') is not supported");
      return make_error("samplers: '{}' is not a sampler char (known: {}, for {})", std::string(1, c), kChars, order_text());
    }
    stages.push_back(static_cast<Stage>(at));
    given.emplace_back(1, c);
  }
  return apply(p, stages, given);
}

Status apply_sampler_list(SamplerParams& p, std::string_view list) {
  std::vector<std::string> names;
  size_t start = 0;
  for (size_t i = 0; i <= list.size(); ++i)
    if (i == list.size() || list[i] == ';' || list[i] == ',') {
      names.emplace_back(list.substr(start, i - start));
      start = i + 1;
    }
  if (list.empty()) return apply_sampler_names(p, {});  // no stage: every one off
  const bool one_name = names.size() == 1 && std::any_of(std::begin(kNames), std::end(kNames),
                                                         [&](const StageName& n) { return n.name == names[0]; });
  return names.size() > 1 || one_name ? apply_sampler_names(p, names) : apply_sampler_chars(p, list);
}

}  // namespace minfer
