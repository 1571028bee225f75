// Embedding requests and replies (api-embeddings.h).
#include "server/api-embeddings.h"

#include <fmt/format.h>

#include <bit>
#include <cstring>

namespace minfer::server {

ApiResult<EmbeddingRequest> parse_embedding_request(const json& body, bool oai, const Tokenizer& tok,
                                                    int n_ctx_slot, Pooling pooling) {
  if (!body.is_object()) return invalid_param("", "the request body must be a JSON object");
  EmbeddingRequest r;
  r.oai = oai;
  const char* name = "input";
  const json* in = body.contains("input") ? &body["input"] : nullptr;
  if (!in && body.contains("content")) {
    in = &body["content"];
    name = "content";
    r.oai = false;  // llama-server answers "content" in its own shape
  }
  if (!in) return invalid_param("input", "\"input\" or \"content\" must be provided");
  if (r.oai && pooling == Pooling::kNone)
    return invalid_param("", "pooling type 'none' is not OpenAI-compatible (one vector per token): start the server with "
                             "--pooling mean, cls or last, or use /embeddings");
  if (const auto it = body.find("encoding_format"); it != body.end() && !it->is_null()) {
    if (!it->is_string() || (*it != "float" && *it != "base64"))
      return invalid_param("encoding_format", fmt::format("'encoding_format' {} is not \"float\" or \"base64\"", it->dump()));
    r.base64 = *it == "base64";
  }
  if (const auto it = body.find("embd_normalize"); it != body.end() && !it->is_null()) {
    if (!it->is_number_integer() || it->get<int64_t>() < -1 || it->get<int64_t>() > 64)
      return invalid_param("embd_normalize", fmt::format("'embd_normalize' {} is not an integer in [-1, 64]", it->dump()));
    r.normalize = it->get<int>();
  }
  if (const auto it = body.find("dimensions"); it != body.end() && !it->is_null())
    return invalid_param("dimensions", "'dimensions' is not supported: the vectors have the model's width");
  auto parsed = parse_prompts(*in, tok, tok.add_bos(), name);
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  r.inputs = std::move(std::get<std::vector<ParsedPrompt>>(parsed));
  for (size_t k = 0; k < r.inputs.size(); ++k) {
    std::vector<int32_t>& ids = r.inputs[k].ids;
    // A model that asks for it gets its EOS after the text (embedding models read that row).
    if (!ids.empty() && tok.add_eos() && tok.eos_id() >= 0 && ids.back() != tok.eos_id()) ids.push_back(tok.eos_id());
    const std::string where = r.inputs.size() > 1 ? fmt::format("{}[{}]", name, k) : name;
    if (ids.empty()) return invalid_param(where, fmt::format("'{}': input content cannot be empty", where));
    if (static_cast<int64_t>(ids.size()) > n_ctx_slot) {
      ApiError e = context_size_error(static_cast<int64_t>(ids.size()), 0, false, n_ctx_slot, where);
      e.message = fmt::format("'{}': input ({} tokens) is too large to process: the context of a slot holds {} tokens "
                              "(-c / --parallel)", where, ids.size(), n_ctx_slot);
      return e;
    }
  }
  return r;
}

std::string base64_floats(const std::vector<float>& v) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  static_assert(std::endian::native == std::endian::little, "float32 bytes are written as the machine holds them");
  std::string bytes(v.size() * sizeof(float), '\0');
  if (!v.empty()) std::memcpy(bytes.data(), v.data(), bytes.size());
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    const uint32_t x = static_cast<uint32_t>(static_cast<uint8_t>(bytes[i])) << 16 |
                       static_cast<uint32_t>(static_cast<uint8_t>(bytes[i + 1])) << 8 | static_cast<uint8_t>(bytes[i + 2]);
    for (int s = 18; s >= 0; s -= 6) out.push_back(kAlphabet[(x >> s) & 63]);
  }
  if (const size_t rest = bytes.size() - i; rest > 0) {
    uint32_t x = static_cast<uint32_t>(static_cast<uint8_t>(bytes[i])) << 16;
    if (rest == 2) x |= static_cast<uint32_t>(static_cast<uint8_t>(bytes[i + 1])) << 8;
    out.push_back(kAlphabet[(x >> 18) & 63]);
    out.push_back(kAlphabet[(x >> 12) & 63]);
    out.push_back(rest == 2 ? kAlphabet[(x >> 6) & 63] : '=');
    out.push_back('=');
  }
  return out;
}

json embeddings_json(const EmbeddingRequest& r, const std::vector<DoneEvent::Embedding>& out, const std::string& model_id) {
  if (!r.oai) {
    json a = json::array();
    for (size_t i = 0; i < out.size(); ++i) a.push_back({{"index", i}, {"embedding", out[i].rows}});
    return a;
  }
  json data = json::array();
  int64_t n_tokens = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    const std::vector<float>& v = out[i].rows.at(0);
    json item = {{"object", "embedding"}, {"index", i}};
    if (r.base64) item["embedding"] = base64_floats(v);
    else item["embedding"] = v;
    data.push_back(std::move(item));
    n_tokens += out[i].n_tokens;
  }
  return {{"object", "list"}, {"data", std::move(data)}, {"model", model_id},
          {"usage", {{"prompt_tokens", n_tokens}, {"total_tokens", n_tokens}}}};
}

}  // namespace minfer::server
