#include "api/fields-json.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "sampling/order.h"

namespace minfer::api {

namespace {

std::optional<FieldError> refuse(const std::string& name, std::string message) {
  return FieldError{name, std::move(message)};
}

std::optional<FieldError> range_error(const Field& f, const std::string& name, double v) {
  if (Status st = check_value(f, v, fmt::format("'{}'", name)); !st) return refuse(name, st.error().message);
  return std::nullopt;
}

// logit_bias: OpenAI's {"ID": bias}, and llama-server's forms: keys that are text (each of its
// tokens gets the bias), [[ID or text, bias], ...], and false for a bias (the token is banned).
std::optional<FieldError> read_bias(const json& v, const Field& f, const std::string& name, const Tokenizer& tok,
                                    SamplerParams& p) {
  const int32_t n_vocab = tok.n_vocab();
  auto apply = [&](const json& key, const json& value) -> std::optional<FieldError> {
    float b = 0;
    if (value.is_boolean() && !value.get<bool>()) {
      b = -INFINITY;
    } else if (value.is_number() && check_value(f, value.get<double>(), "")) {
      b = value.get<float>();
    } else {
      return refuse(name, fmt::format("{}[{}] must be a number {} or false (bans the token), got {}", name, key.dump(),
                                      range_text(f), value.dump()));
    }
    std::vector<int32_t> ids;
    int64_t id = -1;
    if (key.is_number_integer()) {
      id = key.get<int64_t>();
    } else if (key.is_string()) {
      const std::string k = key.get<std::string>();
      // A key of digits (an optional sign first) is a token id, however large; any other key is
      // text whose tokens are biased.
      const size_t digits_from = !k.empty() && (k[0] == '-' || k[0] == '+') ? 1 : 0;
      const bool numeric = k.size() > digits_from &&
                           std::all_of(k.begin() + static_cast<std::ptrdiff_t>(digits_from), k.end(),
                                       [](char c) { return c >= '0' && c <= '9'; });
      if (numeric) {
        id = k.size() - digits_from > 10 ? -1 : std::stoll(k);
      } else {
        ids = tok.encode(k, false, /*parse_special=*/false);
      }
    } else {
      return refuse(name, fmt::format("{} key {} must be a token id or a text", name, key.dump()));
    }
    if (ids.empty()) {
      if (id < 0 || id >= n_vocab)
        return refuse(name, fmt::format("{} key {} is not a token id in [0, {})", name, key.dump(), n_vocab));
      ids.push_back(static_cast<int32_t>(id));
    }
    for (int32_t t : ids) p.logit_bias[t] = b;
    return std::nullopt;
  };
  if (v.is_object()) {
    for (auto it = v.begin(); it != v.end(); ++it)
      if (auto e = apply(json(it.key()), it.value())) return e;
  } else if (v.is_array()) {
    for (const json& pair : v) {
      if (!pair.is_array() || pair.size() != 2)
        return refuse(name, fmt::format("'{}' as an array holds [token id or text, bias] pairs", name));
      if (auto e = apply(pair[0], pair[1])) return e;
    }
  } else {
    return refuse(name, fmt::format("'{}' must be an object mapping token ids (or texts) to biases, or [id, bias] pairs", name));
  }
  return std::nullopt;
}

bool all_strings(const json& v) {
  return v.is_array() && std::all_of(v.begin(), v.end(), [](const json& x) { return x.is_string(); });
}

std::optional<FieldError> read_one(const json& v, const Field& f, const std::string& name, const Tokenizer& tok,
                                   GenerationSettings& s) {
  switch (f.type) {
    case FieldType::kFloat:
      if (!v.is_number()) return refuse(name, fmt::format("'{}' must be a number, got {}", name, v.dump()));
      if (auto e = range_error(f, name, v.get<double>())) return e;
      f.set_number(s, v.get<double>());
      return std::nullopt;
    case FieldType::kInt: {
      if (!is_integral(v)) return refuse(name, fmt::format("'{}' must be an integer, got {}", name, v.dump()));
      if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
        return range_error(f, name, v.get<double>());
      if (auto e = range_error(f, name, v.get<double>())) return e;
      f.set_integer(s, v.is_number_integer() ? v.get<int64_t>() : static_cast<int64_t>(v.get<double>()));
      return std::nullopt;
    }
    case FieldType::kBool:
      if (!v.is_boolean()) return refuse(name, fmt::format("'{}' must be a boolean, got {}", name, v.dump()));
      f.set_integer(s, v.get<bool>() ? 1 : 0);
      return std::nullopt;
    case FieldType::kStrings:
      if (v.is_string()) {
        s.stop = {v.get<std::string>()};
      } else if (all_strings(v)) {
        s.stop = v.get<std::vector<std::string>>();
      } else {
        return refuse(name, fmt::format("'{}' must be a string or an array of strings", name));
      }
      return std::nullopt;
    case FieldType::kTokenBias: return read_bias(v, f, name, tok, s.sampling);
    case FieldType::kTokenSeqs:
      if (!all_strings(v)) return refuse(name, fmt::format("'{}' must be an array of strings", name));
      s.sampling.dry_sequence_breakers.clear();
      for (const json& x : v) {
        std::vector<int32_t> ids = tok.encode(x.get<std::string>(), false, false);
        if (!ids.empty()) s.sampling.dry_sequence_breakers.push_back(std::move(ids));
      }
      return std::nullopt;
    case FieldType::kStages: {
      Status st = Status::ok();
      if (v.is_string()) {
        st = apply_sampler_list(s.sampling, v.get<std::string>());
      } else if (all_strings(v)) {
        st = apply_sampler_names(s.sampling, v.get<std::vector<std::string>>());
      } else {
        return refuse(name, fmt::format("'{}' must be an array of sampler names or a string of sampler chars", name));
      }
      if (!st) return refuse(name, st.error().message);
      return std::nullopt;
    }
  }
  return std::nullopt;
}

}  // namespace

bool is_integral(const json& v) {
  return v.is_number_integer() || (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>());
}

const json* find_field_value(const json& body, const Field& f, Api api, std::string* name) {
  if (!body.is_object()) return nullptr;
  for (std::string_view n : f.names_in(api)) {
    auto it = body.find(n);
    if (it == body.end() || it->is_null()) continue;
    if (name) *name = std::string(n);
    return &*it;
  }
  return nullptr;
}

std::optional<FieldError> read_fields(const json& body, Api api, const Tokenizer& tok, GenerationSettings& s) {
  for (const Field& f : fields()) {
    std::string name;
    const json* v = find_field_value(body, f, api, &name);
    if (!v) continue;
    if (auto e = read_one(*v, f, name, tok, s)) return e;
  }
  return std::nullopt;
}

void copy_fields(const json& from, Api api, json& to) {
  for (const Field& f : fields()) {
    for (std::string_view n : f.names_in(api)) {
      auto it = from.find(n);
      if (it != from.end() && !it->is_null()) to[std::string(n)] = *it;
    }
  }
}

json sampling_json(const SamplerParams& p) {
  GenerationSettings g;
  g.sampling = p;
  json out = json::object();
  for (const Field& f : fields()) {
    if (!f.is_sampler()) continue;
    switch (f.type) {
      case FieldType::kFloat: out[std::string(f.key)] = static_cast<float>(f.number(g)); break;
      case FieldType::kInt: out[std::string(f.key)] = f.integer(g); break;
      case FieldType::kTokenBias: {
        json bias = json::array();  // llama-server's form: {"bias": null (banned) or a number, "token": id}
        for (const auto& [id, b] : p.logit_bias) bias.push_back({{"bias", std::isinf(b) ? json(nullptr) : json(b)}, {"token", id}});
        out["logit_bias"] = std::move(bias);
        break;
      }
      default: break;  // breakers and the stage list are not echoed (llama-server echoes names we do not keep)
    }
  }
  return out;
}

}  // namespace minfer::api
