#include "server/api-ollama.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <ctime>
#include <map>
#include <set>

#include "api/fields-json.h"
#include "api/gguf-json.h"
#include "core/dtype.h"
#include "quantize/mix.h"

namespace minfer::server {
namespace {

// Ollama's messages: {role, content, thinking, images, tool_calls: [{function: {name, arguments:
// {...}}}], tool_name} -> OpenAI's, which the template renders.
ApiResult<json> chat_messages(const json& in) {
  if (!in.is_array()) return invalid_param("messages", "'messages' must be an array of {role, content}");
  json out = json::array();
  for (size_t i = 0; i < in.size(); ++i) {
    const json& m = in[i];
    const std::string where = fmt::format("messages[{}]", i);
    if (!m.is_object()) return invalid_param(where, fmt::format("'{}' must be an object", where));
    json msg = m;
    msg.erase("images");
    msg.erase("thinking");
    msg.erase("tool_name");
    if (auto im = m.find("images"); im != m.end() && !im->is_null() && !(im->is_array() && im->empty()))
      return invalid_param(where + ".images", fmt::format("'{}.images': this model takes no images (minfer serves text models)", where));
    if (auto t = m.find("thinking"); t != m.end() && t->is_string() && !t->get<std::string>().empty()) msg["reasoning_content"] = *t;
    if (auto n = m.find("tool_name"); n != m.end() && n->is_string()) msg["name"] = *n;
    if (auto tc = m.find("tool_calls"); tc != m.end() && !tc->is_null()) {
      if (!tc->is_array()) return invalid_param(where + ".tool_calls", fmt::format("'{}.tool_calls' must be an array", where));
      json calls = json::array();
      for (size_t k = 0; k < tc->size(); ++k) {
        const json& c = (*tc)[k];
        const std::string at = fmt::format("{}.tool_calls[{}]", where, k);
        const json* fn = c.is_object() && c.contains("function") ? &c["function"] : nullptr;
        if (!fn || !fn->is_object() || !fn->contains("name") || !(*fn)["name"].is_string())
          return invalid_param(at, fmt::format("'{}' must be {{\"function\": {{\"name\", \"arguments\"}}}}", at));
        const json args = fn->contains("arguments") ? (*fn)["arguments"] : json::object();
        calls.push_back({{"id", c.contains("id") && c["id"].is_string() ? c["id"] : json(fmt::format("call_{}_{}", i, k))},
                         {"type", "function"},
                         {"function", {{"name", (*fn)["name"]}, {"arguments", tool_arguments_text(args)}}}});
      }
      msg["tool_calls"] = std::move(calls);
    }
    out.push_back(std::move(msg));
  }
  return out;
}

// format: "json", a JSON Schema, or "" / null (free text) -> response_format.
ApiResult<json> response_format(const json& f) {
  if (f.is_null() || (f.is_string() && f.get<std::string>().empty())) return json(nullptr);
  if (f.is_string() && f.get<std::string>() == "json") return json{{"type", "json_object"}};
  if (f.is_object()) return json{{"type", "json_schema"}, {"json_schema", {{"name", "format"}, {"schema", f}, {"strict", true}}}};
  return invalid_param("format", "invalid format: expected \"json\" or a valid JSON schema");
}

// The model's name without Ollama's default tag.
std::string without_latest(std::string name) {
  if (name.ends_with(":latest")) name.resize(name.size() - 7);
  return name;
}

// A Go duration ("300ms", "1.5h", "2h45m", "-1m", "0") in seconds, as Ollama's keep_alive takes
// it (time.ParseDuration's grammar), or nullopt.
std::optional<double> go_duration_s(std::string_view t) {
  double sign = 1;
  if (!t.empty() && (t[0] == '-' || t[0] == '+')) sign = t[0] == '-' ? -1 : 1, t.remove_prefix(1);
  if (t.empty()) return std::nullopt;
  {  // a bare number ("0", "-1", "300"): seconds, as a JSON number is
    const std::string all(t);
    char* end = nullptr;
    const double v = std::strtod(all.c_str(), &end);
    if (end == all.c_str() + all.size() && std::isdigit(static_cast<unsigned char>(all[0]))) return sign * v;
  }
  static const std::pair<std::string_view, double> kUnits[] = {{"ns", 1e-9}, {"us", 1e-6}, {"\xc2\xb5s", 1e-6}, {"ms", 1e-3},
                                                               {"s", 1}, {"m", 60}, {"h", 3600}};
  double total = 0;
  while (!t.empty()) {
    size_t i = 0;
    while (i < t.size() && (std::isdigit(static_cast<unsigned char>(t[i])) || t[i] == '.')) ++i;
    if (i == 0 || i == t.size()) return std::nullopt;  // a number, then its unit
    const std::string num(t.substr(0, i));
    char* end = nullptr;
    const double v = std::strtod(num.c_str(), &end);
    if (end != num.c_str() + num.size()) return std::nullopt;
    t.remove_prefix(i);
    bool found = false;
    for (const auto& [unit, scale] : kUnits)
      if (t.starts_with(unit)) {  // "ms" is tried before "m"
        total += v * scale;
        t.remove_prefix(unit.size());
        found = true;
        break;
      }
    if (!found) return std::nullopt;
  }
  return sign * total;
}

}  // namespace

json ollama_error_json(const ApiError& e) { return {{"error", e.message}}; }

std::optional<ApiError> ollama_check_model(const json& body, const std::vector<std::string>& names) {
  if (!body.is_object()) return invalid_param("", "the request body must be a JSON object");
  auto m = body.find("model");
  if (m == body.end() || !m->is_string() || m->get<std::string>().empty()) return invalid_param("model", "model is required");
  const std::string want = without_latest(m->get<std::string>());
  for (const std::string& n : names)
    if (without_latest(n) == want) return std::nullopt;
  ApiError e;
  e.status = 404;
  e.type = "not_found_error";
  e.param = "model";
  e.message = fmt::format("model \"{}\" not found, try pulling it first", m->get<std::string>());
  return e;
}

ApiResult<std::optional<double>> ollama_keep_alive(const json& body) {
  std::optional<double> s;
  if (!body.is_object()) return s;
  if (auto k = body.find("keep_alive"); k != body.end() && !k->is_null()) {
    if (k->is_number()) s = k->get<double>();
    else if (k->is_string()) s = go_duration_s(k->get<std::string>());
    if (!s) return invalid_param("keep_alive", "'keep_alive' must be a number of seconds or a duration such as \"5m\", \"1h30m\" or \"-1\"");
  }
  return s;
}

ApiResult<std::optional<int>> ollama_num_ctx(const json& body) {
  if (!body.is_object() || !body.contains("options") || !body["options"].is_object()) return std::optional<int>();
  const json& o = body["options"];
  const auto n = o.find("num_ctx");
  if (n == o.end() || n->is_null()) return std::optional<int>();
  // 8: the engine's smallest context per slot (a smaller one would unload the model, then fail).
  if (!n->is_number_integer() || n->get<int64_t>() < 8 || n->get<int64_t>() > (int64_t{1} << 24))
    return invalid_param("num_ctx", fmt::format("option \"num_ctx\" must be an integer from 8 to {}, not {}", int64_t{1} << 24, n->dump()));
  return std::optional<int>(n->get<int>());
}

ApiResult<OllamaRequest> ollama_to_request(const json& body, bool chat_endpoint) {
  OllamaRequest r;
  auto keep = ollama_keep_alive(body);
  if (!keep) return keep.error();
  r.keep_alive_s = *keep;
  json& out = r.body;
  out = json::object();
  if (chat_endpoint) {
    const json msgs = body.contains("messages") && !body["messages"].is_null() ? body["messages"] : json::array();
    auto m = chat_messages(msgs);
    if (!m) return m.error();
    out["messages"] = std::move(*m);
    r.load_only = out["messages"].empty();
  } else {
    for (const char* unsupported : {"template", "suffix"})
      if (auto it = body.find(unsupported); it != body.end() && it->is_string() && !it->get<std::string>().empty())
        return invalid_param(unsupported, fmt::format("'{}' is not supported by this server (the model's own chat template is used)", unsupported));
    if (auto im = body.find("images"); im != body.end() && im->is_array() && !im->empty())
      return invalid_param("images", "'images': this model takes no images (minfer serves text models)");
    auto p = body.find("prompt");
    if (p != body.end() && !p->is_null() && !p->is_string()) return invalid_param("prompt", "'prompt' must be a string");
    const std::string prompt = p != body.end() && p->is_string() ? p->get<std::string>() : std::string();
    r.load_only = prompt.empty();
    auto raw = body.find("raw");
    if (raw != body.end() && !raw->is_null() && !raw->is_boolean()) return invalid_param("raw", "'raw' must be a boolean");
    r.chat = !(raw != body.end() && raw->is_boolean() && raw->get<bool>());
    // An earlier reply's `context`: its ids come before this prompt.
    if (auto c = body.find("context"); c != body.end() && !c->is_null()) {
      if (!c->is_array() || !std::all_of(c->begin(), c->end(), [](const json& id) { return id.is_number_integer() && id.get<int64_t>() >= 0 && id.get<int64_t>() <= INT32_MAX; }))
        return invalid_param("context", "'context' must be an array of token ids");
      r.context = c->get<std::vector<int32_t>>();
    }
    if (r.chat) {
      json msgs = json::array();
      if (auto sys = body.find("system"); sys != body.end() && sys->is_string() && !sys->get<std::string>().empty())
        msgs.push_back({{"role", "system"}, {"content", *sys}});
      msgs.push_back({{"role", "user"}, {"content", prompt}});
      out["messages"] = std::move(msgs);
    } else {
      // raw: the prompt as it is, after the context's ids (checked by the prompt's own rules).
      json parts(r.context);
      parts.push_back(prompt);
      out["prompt"] = parts.size() == 1 ? json(prompt) : parts;
      r.context.clear();
    }
  }
  if (auto o = body.find("options"); o != body.end() && !o->is_null()) {
    if (!o->is_object()) return invalid_param("options", "'options' must be an object");
    api::copy_fields(*o, Api::kOllama, out);
  }
  if (auto st = body.find("stream"); st != body.end() && !st->is_null()) {
    if (!st->is_boolean()) return invalid_param("stream", "'stream' must be a boolean");
    out["stream"] = *st;
  } else {
    out["stream"] = true;  // Ollama streams unless told not to
  }
  if (auto f = body.find("format"); f != body.end()) {
    auto rf = response_format(*f);
    if (!rf) return rf.error();
    if (!rf->is_null()) out["response_format"] = std::move(*rf);
  }
  if (auto t = body.find("tools"); t != body.end() && !t->is_null() && r.chat) {
    out["tools"] = *t;  // OpenAI's shape already: [{"type": "function", "function": {name, description, parameters}}]
    if (t->is_array() && !t->empty()) out["parallel_tool_calls"] = true;  // a reply may call several
  }
  // logprobs, top_logprobs: the chat fields by the same names; a raw generation (a completion)
  // asks with llama-server's n_probs (OpenAI's completions cap their integer logprobs at 5).
  // top_logprobs is checked on its own (0..20, as Ollama) and used only with logprobs on.
  const json top = body.contains("top_logprobs") ? body["top_logprobs"] : json(nullptr);
  if (!top.is_null() && !(api::is_integral(top) && top.get<double>() >= 0 && top.get<double>() <= 20))
    return invalid_param("top_logprobs", "'top_logprobs' must be an integer in [0, 20]");
  if (auto lp = body.find("logprobs"); lp != body.end() && !lp->is_null()) {
    if (!lp->is_boolean()) return invalid_param("logprobs", "'logprobs' must be a boolean");
    if (r.chat) {
      out["logprobs"] = *lp;
      if (!top.is_null() && lp->get<bool>()) out["top_logprobs"] = top;
    } else if (lp->get<bool>()) {
      const int k = top.is_null() ? 0 : static_cast<int>(top.get<double>());
      if (k > 0) out["n_probs"] = k;
      else out["logprobs"] = 0;
    }
  }
  if (auto th = body.find("think"); th != body.end() && !th->is_null()) {
    // true / false, or a level ("low", "medium", "high", "max") for models that take one:
    // thinking on; any other value is Ollama's 400.
    static const std::set<std::string, std::less<>> kLevels = {"low", "medium", "high", "max", "true", "false"};
    if (!th->is_boolean() && !(th->is_string() && kLevels.contains(th->get<std::string>())))
      return invalid_param("think", "'think' must be true, false, \"low\", \"medium\", \"high\" or \"max\"");
    const bool on = th->is_boolean() ? th->get<bool>() : th->get<std::string>() != "false";
    r.think = on && r.chat;
    if (r.chat) out["chat_template_kwargs"] = {{"enable_thinking", on}};
  }
  return r;
}

std::optional<ApiError> ollama_prepend_context(CompletionRequest& r, const std::vector<int32_t>& context, const Tokenizer& tok,
                                               int n_ctx_slot) {
  for (int32_t id : context)
    if (id >= tok.n_vocab()) return invalid_param("context", fmt::format("'context': token {} is not in the vocabulary of {}", id, tok.n_vocab()));
  if (tok.add_bos() && !r.prompt.empty() && r.prompt.front() == tok.bos_id()) r.prompt.erase(r.prompt.begin());
  r.prompt.insert(r.prompt.begin(), context.begin(), context.end());
  if (static_cast<int64_t>(r.prompt.size()) >= n_ctx_slot)
    return invalid_param("context", fmt::format("the context and the prompt take {} tokens: a slot holds {}", r.prompt.size(), n_ctx_slot));
  return std::nullopt;
}

ApiResult<json> ollama_to_embedding(const json& body, bool legacy) {
  const char* name = legacy ? "prompt" : "input";
  auto in = body.find(name);
  if (in != body.end() && !in->is_null() &&
      (legacy ? !in->is_string() : !(in->is_string() || (in->is_array() && std::all_of(in->begin(), in->end(), [](const json& x) { return x.is_string(); })))))
    return invalid_param(name, fmt::format("'{}' must be {}", name, legacy ? "a string" : "a string or an array of strings"));
  if (auto d = body.find("dimensions"); d != body.end() && !d->is_null())
    return invalid_param("dimensions", "'dimensions' is not supported: the model's full vectors are returned");
  // Nothing to embed (absent, "", []): Ollama's 200 with no vectors (clients preload a model so).
  if (in == body.end() || in->is_null() || in->empty() || (in->is_string() && in->get_ref<const std::string&>().empty()))
    return json(nullptr);
  return json{{"input", *in}};
}

SamplerParams ollama_sampling_defaults(const SamplerParams& server, const std::set<std::string>& given) {
  SamplerParams p = server;
  if (!given.contains("top_p")) p.top_p = 0.9f;
  if (!given.contains("min_p")) p.min_p = 0.0f;
  if (!given.contains("repeat_penalty")) p.repeat_penalty = 1.1f;
  if (!given.contains("repeat_last_n")) p.repeat_last_n = 64;
  return p;
}

std::string ollama_time(std::chrono::system_clock::time_point t) {
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
  const std::time_t secs = static_cast<std::time_t>(ns / 1000000000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:09}Z", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
                     tm.tm_min, tm.tm_sec, ns % 1000000000);
}

json ollama_details(const GgufFile& file) {
  const auto arch = file.get_string("general.architecture");
  const std::string family = arch.has_value() ? *arch : std::string();
  uint64_t n_params = 0;
  std::map<std::string, uint64_t> bytes_by_type;  // the weights' main type: the one most bytes are in
  for (const GgufTensor& t : file.tensors()) {
    n_params += static_cast<uint64_t>(t.n_elements());
    if (t.shape.size() >= 2) bytes_by_type[std::string(dtype_name(t.type))] += t.n_bytes;
  }
  // Ollama names the file type (general.file_type: Q4_K_M); without one, the type most bytes are in.
  std::string quant;
  if (auto ft = file.get_int("general.file_type"); ft.has_value())
    if (auto name = file_type_name_of(*ft)) quant = *name;
  uint64_t most = 0;
  for (const auto& [name, b] : bytes_by_type)
    if (quant.empty() && b > most) most = b, quant = name;
  std::string size;
  if (auto label = file.get_string("general.size_label"); label.has_value() && !label->empty()) size = *label;
  else if (n_params >= 1000000000) size = fmt::format("{:.1f}B", static_cast<double>(n_params) / 1e9);
  else size = fmt::format("{:.2f}M", static_cast<double>(n_params) / 1e6);
  return {{"parent_model", ""}, {"format", "gguf"}, {"family", family}, {"families", json::array({family})},
          {"parameter_size", size}, {"quantization_level", quant}};
}

json ollama_model_info(const GgufFile& file, bool verbose) {
  json info = json::object();
  uint64_t n_params = 0;
  for (const GgufTensor& t : file.tensors()) n_params += static_cast<uint64_t>(t.n_elements());
  for (const GgufKV& kv : file.metadata()) {
    if (kv.key.starts_with("split.")) continue;
    info[kv.key] = kv.value.as_array() && !verbose ? json(nullptr) : api::gguf_value_json(kv.value);
  }
  if (!info.contains("general.parameter_count")) info["general.parameter_count"] = n_params;
  return info;
}

json ollama_stats(int n_prompt, const JobUsage& u, std::chrono::steady_clock::duration total) {
  auto ns = [](double ms) { return static_cast<int64_t>(ms * 1e6); };
  return {{"total_duration", std::chrono::duration_cast<std::chrono::nanoseconds>(total).count()},
          {"load_duration", 0},
          {"prompt_eval_count", n_prompt},
          {"prompt_eval_duration", ns(u.prompt_ms)},
          {"eval_count", u.n_gen},
          {"eval_duration", ns(u.predicted_ms)}};
}

json ollama_tool_calls(const std::vector<toolcall::ToolCall>& calls) {
  json out = json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    out.push_back({{"id", calls[i].id},
                   {"function", {{"index", i}, {"name", calls[i].name}, {"arguments", tool_arguments_object(calls[i].arguments)}}}});
  }
  return out;
}

}  // namespace minfer::server
