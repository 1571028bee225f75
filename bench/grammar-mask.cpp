// grammar-mask MODEL GRAMMAR.gbnf IDS.json [-r REPEATS]
//   -> {"steps":N,"masks_built":M,"ms_per_step":x,"ms_per_mask":y,"trie_ms":z}
// Replays generated token ids (`minfer ... --ids-out IDS.json`: its "generated" list) through a
// fresh GrammarConstraint per repeat and times the mask of every step (apply on a logits row,
// then accept), so the grammar's own cost per token can be set against a decode step without
// the noise of a whole generation. Medians over the repeats.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "grammar/gbnf.h"
#include "grammar/token-mask.h"
#include "tokenizer/tokenizer.h"

namespace {

int fail(const std::string& m) {
  std::fprintf(stderr, "grammar-mask: %s\n", m.c_str());
  return 1;
}

std::string slurp(const char* path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) return fail("usage: grammar-mask MODEL GRAMMAR.gbnf IDS.json [-r REPEATS]");
  int reps = 5;
  if (argc >= 6 && std::strcmp(argv[4], "-r") == 0) reps = std::max(1, std::atoi(argv[5]));
  auto file = minfer::GgufFile::open(argv[1]);
  if (!file) return fail(file.error().message);
  auto tok = minfer::Tokenizer::from_gguf(*file);
  if (!tok) return fail(tok.error().message);
  auto g = minfer::parse_gbnf(slurp(argv[2]));
  if (!g) return fail(g.error().message);
  const auto grammar = std::make_shared<const minfer::Grammar>(std::move(*g));
  std::vector<int32_t> ids;
  try {
    ids = nlohmann::json::parse(slurp(argv[3]))["generated"].get<std::vector<int32_t>>();
  } catch (const std::exception& e) {
    return fail(std::string(argv[3]) + ": " + e.what());
  }
  const auto t0 = std::chrono::steady_clock::now();
  minfer::GrammarVocab v;
  for (int32_t id = 0; id < tok->n_vocab(); ++id) {
    v.pieces.emplace_back(tok->piece(id, false));
    if (tok->is_eog(id)) v.eog.push_back(id);
  }
  const auto trie = std::make_shared<const minfer::TokenTrie>(v);
  const double trie_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::vector<float> logits(static_cast<size_t>(tok->n_vocab()));
  std::vector<double> per_step;
  size_t built = 0;
  for (int r = 0; r < reps; ++r) {
    minfer::GrammarConstraint c(grammar, trie);
    const auto s0 = std::chrono::steady_clock::now();
    for (int32_t id : ids) {
      std::fill(logits.begin(), logits.end(), 0.0f);
      c.apply(logits);
      if (!c.accept(id)) return fail("token " + std::to_string(id) + " is not allowed by the grammar here");
    }
    per_step.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - s0).count() /
                       static_cast<double>(std::max<size_t>(ids.size(), 1)));
    built = c.n_cached_states();
  }
  const double ms = median(per_step);
  std::printf("{\"steps\":%zu,\"masks_built\":%zu,\"ms_per_step\":%.4f,\"ms_per_mask\":%.4f,\"trie_ms\":%.1f}\n", ids.size(), built, ms,
              ms * static_cast<double>(ids.size()) / static_cast<double>(std::max<size_t>(built, 1)), trie_ms);
  return 0;
}
