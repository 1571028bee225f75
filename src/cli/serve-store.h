// The hub (src/hub: what `minfer download`, `list` and `rm` do) as a pool server's ModelStore,
// behind Ollama's /api/pull, /api/delete and /api/copy (docs/server-api.md#ollama-api).
//
//   server::PoolParams pp;
//   for (const hub::ListedModel& l : hub::list_models()) pp.models.push_back(pool_model(l));
//   pp.store = hub_model_store();
#pragma once

#include <string>

#include "hub/model-ref.h"
#include "server/http-server.h"

namespace minfer::cli {

// A name as Ollama's clients send it, as `minfer download` takes it: "hf:ORG/REPO[:QUANT]" and
// "ollama:[NS/]MODEL[:TAG]" as they are, Ollama's "hf.co/ORG/REPO[:QUANT]" as hf:, and a bare
// Ollama name ("smollm2:135m") as ollama:.
std::string hub_ref(const std::string& name);

// A listed model as a pool calls it: by its listed name, without its hf: or ollama: prefix (as
// Ollama's clients and llama-server's router name it), and a Hugging Face one as Ollama does
// ("hf.co/ORG/REPO:QUANT").
server::PoolModel pool_model(const hub::ListedModel& l);

server::ModelStore hub_model_store();

}  // namespace minfer::cli
