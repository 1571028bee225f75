// Embedding requests and replies (POST /v1/embeddings, /embeddings, /embedding;
// docs/server-api.md#embeddings). Pure functions, no I/O.
//
//   auto req = parse_embedding_request(body, /*oai=*/true, tok, n_ctx_slot, Pooling::kLast);
//   if (auto* e = std::get_if<ApiError>(&req)) return reply(*e);
//   ... Jobs with Job::embed carrying the inputs; their DoneEvents' embeddings by input ...
//   reply(embeddings_json(std::get<EmbeddingRequest>(req), vectors, model_id));
//
// "input" (or llama-server's "content", which always answers in its own shape): a string, token
// ids (mixed with strings), or an array of those, one vector each. OpenAI's shape is
// {"object": "list", "data": [{"object": "embedding", "index", "embedding"}], "model", "usage"},
// the vector a float array or, with "encoding_format": "base64", the little-endian float32 bytes
// in base64; llama-server's is [{"index", "embedding": [[...]]}] with one row per token when the
// pooling is none (which OpenAI's shape cannot carry: 400). "embd_normalize" picks the norm
// (embedding.h; default 2, Euclidean).
#pragma once

#include <string>
#include <vector>

#include "server/api.h"
#include "server/embedding.h"

namespace minfer::server {

struct EmbeddingRequest {
  std::vector<ParsedPrompt> inputs;  // one vector each, in order
  bool oai = true;                   // OpenAI's reply shape; false: llama-server's
  bool base64 = false;               // encoding_format "base64"
  int normalize = 2;                 // embd_normalize
};

ApiResult<EmbeddingRequest> parse_embedding_request(const json& body, bool oai, const Tokenizer& tok,
                                                    int n_ctx_slot, Pooling pooling);

// The reply to r from each input's vectors (out[i] is input i's).
json embeddings_json(const EmbeddingRequest& r, const std::vector<DoneEvent::Embedding>& out, const std::string& model_id);

std::string base64_floats(const std::vector<float>& v);  // little-endian float32 bytes, base64

}  // namespace minfer::server
