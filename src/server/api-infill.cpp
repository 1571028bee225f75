// The fill-in-the-middle prompt of /infill (api-infill.h).
#include "server/api-infill.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>

namespace minfer::server {
namespace {

using Fim = Tokenizer::Fim;

// input_prefix / input_suffix: a string, or token ids mixed with strings; text as plain text.
ApiResult<std::vector<int32_t>> plain_tokens(const json& body, const char* name, const Tokenizer& tok) {
  std::vector<int32_t> ids;
  const auto it = body.find(name);
  if (it == body.end() || it->is_null()) return ids;
  auto add_text = [&](const std::string& t) {
    std::vector<int32_t> more = tok.encode(t, false, /*parse_special=*/false);
    ids.insert(ids.end(), more.begin(), more.end());
  };
  if (it->is_string()) {
    add_text(it->get<std::string>());
    return ids;
  }
  if (!it->is_array()) return invalid_param(name, fmt::format("'{}' must be a string or token ids (and strings)", name));
  for (const json& x : *it) {
    if (x.is_string()) {
      add_text(x.get<std::string>());
    } else if (x.is_number_integer() && x.get<int64_t>() >= 0 && x.get<int64_t>() < tok.n_vocab()) {
      ids.push_back(x.get<int32_t>());
    } else {
      return invalid_param(name, fmt::format("'{}' item {} is not text or a token id in [0, {})", name, x.dump(), tok.n_vocab()));
    }
  }
  return ids;
}

void append(std::vector<int32_t>& out, const std::vector<int32_t>& more) { out.insert(out.end(), more.begin(), more.end()); }

}  // namespace

ApiResult<std::vector<int32_t>> infill_prompt(const json& body, const Tokenizer& tok, const InfillLimits& lim) {
  const int32_t pre = tok.fim_id(Fim::kPrefix), suf = tok.fim_id(Fim::kSuffix), mid = tok.fim_id(Fim::kMiddle);
  if (pre < 0 || suf < 0 || mid < 0) {
    ApiError e;  // a 400 (llama-server answers 501): the request cannot be served by this model
    e.status = 400;
    e.type = "not_supported_error";
    e.message = fmt::format("infill is not supported by this model: its vocabulary has no fill-in-the-middle {} token",
                            pre < 0 ? "prefix" : suf < 0 ? "suffix" : "middle");
    return e;
  }
  // The other files: [{"filename": string (default "tmp"), "text": string}].
  const json* extra = nullptr;
  if (const auto it = body.find("input_extra"); it != body.end() && !it->is_null()) {
    if (!it->is_array()) return invalid_param("input_extra", "'input_extra' must be an array of {\"filename\": string, \"text\": string}");
    extra = &*it;
    for (size_t k = 0; k < extra->size(); ++k) {
      const json& c = (*extra)[k];
      const std::string where = fmt::format("input_extra[{}]", k);
      if (!c.is_object() || !c.contains("text") || !c["text"].is_string())
        return invalid_param(where, fmt::format("'{}' must have a \"text\" string", where));
      if (c.contains("filename") && !c["filename"].is_string())
        return invalid_param(where + ".filename", fmt::format("'{}.filename' must be a string", where));
    }
  }
  std::string prompt_text;
  if (const auto it = body.find("prompt"); it != body.end() && !it->is_null()) {
    if (!it->is_string()) return invalid_param("prompt", "'prompt' (the text after input_prefix) must be a string");
    prompt_text = it->get<std::string>();
  }
  auto prefix_r = plain_tokens(body, "input_prefix", tok);
  if (auto* e = std::get_if<ApiError>(&prefix_r)) return *e;
  auto suffix_r = plain_tokens(body, "input_suffix", tok);
  if (auto* e = std::get_if<ApiError>(&suffix_r)) return *e;
  std::vector<int32_t>& prefix = std::get<std::vector<int32_t>>(prefix_r);
  std::vector<int32_t>& suffix = std::get<std::vector<int32_t>>(suffix_r);
  const std::vector<int32_t> prompt = tok.encode(prompt_text, false, /*parse_special=*/true);

  const int32_t rep = tok.fim_id(Fim::kRepo), sep = tok.fim_id(Fim::kSep);
  std::vector<int32_t> ctx_ids;  // the project context before the prefix
  if (rep >= 0) {
    ctx_ids.push_back(rep);
    append(ctx_ids, tok.encode("myproject\n", false, false));
  }
  if (extra)
    for (const json& c : *extra) {
      if (sep >= 0) {
        ctx_ids.push_back(sep);
        append(ctx_ids, tok.encode(c.value("filename", std::string("tmp")) + "\n", false, false));
      } else {
        append(ctx_ids, tok.encode("\n\n--- snippet ---\n\n", false, false));
      }
      append(ctx_ids, tok.encode(c["text"].get<std::string>(), false, false));
    }
  if (sep >= 0) {
    ctx_ids.push_back(sep);
    append(ctx_ids, tok.encode("filename\n", false, false));
  }

  // Budgets: the prefix's end and the suffix's start fit in one batch (3:1), the project
  // context its end in what is left of the context after a batch and twice the generation.
  const int64_t n_prefix = std::min<int64_t>(static_cast<int64_t>(prefix.size()), 3 * (lim.n_batch / 4));
  const int64_t n_suffix = std::min<int64_t>(static_cast<int64_t>(suffix.size()),
                                             std::max<int64_t>(0, lim.n_batch / 4 - (2 + static_cast<int64_t>(prompt.size()))));
  const int64_t n_extra = std::min<int64_t>(std::max<int64_t>(0, static_cast<int64_t>(lim.n_ctx) - lim.n_batch - 2 * static_cast<int64_t>(lim.n_predict)),
                                            static_cast<int64_t>(ctx_ids.size()));
  std::vector<int32_t> out(ctx_ids.end() - n_extra, ctx_ids.end());
  if (tok.add_bos() && tok.bos_id() >= 0) out.push_back(tok.bos_id());
  auto put_prefix = [&] {
    out.push_back(pre);
    out.insert(out.end(), prefix.end() - n_prefix, prefix.end());
    append(out, prompt);
  };
  auto put_suffix = [&] {
    out.push_back(suf);
    out.insert(out.end(), suffix.begin(), suffix.begin() + n_suffix);
  };
  if (lim.spm) {
    put_suffix();
    put_prefix();
  } else {
    put_prefix();
    put_suffix();
  }
  out.push_back(mid);
  return out;
}

}  // namespace minfer::server
