// `minfer perplexity MODEL -f FILE [-c 512] [-b N] [-t N] [--chunks N] [--json]`
//
// Computed as llama.cpp's llama-perplexity does: the whole text is tokenized (with BOS when the
// vocabulary adds one), cut into chunks of -c tokens, each chunk evaluated from an empty KV
// cache (its first token replaced by BOS when the vocabulary adds one), and the tokens of the
// second half of each chunk scored: position j predicts token j + 1. Prints
// "PPL = x +/- y" where y is the standard error propagated from the per-token NLL.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/options.h"
#include "core/thread-pool.h"
#include "models/model.h"
#include "runtime/session.h"
#include "tokenizer/tokenizer.h"

namespace minfer::cli {
namespace {

// log softmax(row)[target], in double for a stable sum over a large vocabulary.
double log_prob(std::span<const float> row, int32_t target) {
  double mx = row[0];
  for (float v : row) mx = std::max<double>(mx, v);
  double sum = 0;
  for (float v : row) sum += std::exp(static_cast<double>(v) - mx);
  return static_cast<double>(row[static_cast<size_t>(target)]) - mx - std::log(sum);
}

}  // namespace

int cmd_perplexity(int argc, char** argv) {
  CLI::App app{"Perplexity of a model on a text file (llama-perplexity's method)", "minfer perplexity"};
  std::string model, file;
  ContextOptions co;
  co.n_ctx = 512;
  co.n_batch = 0;  // the chunk
  int max_chunks = 0;
  bool json = false;
  app.add_option("MODEL", model, "GGUF path or model name in the cache")->required();
  app.add_option("-f,--file", file, "text file")->required();
  add_ctx_size(app, co.n_ctx, "tokens per chunk (at least 4)");
  add_batch_size(app, co.n_batch, "most tokens per graph (default: the chunk)");
  add_threads(app, co.n_threads);
  add_kv_type(app, co.kv);
  add_swa_full_flag(app, co.swa_full);
  add_offload_options(app, co.offload);
  add_compat_options(app, co.compat);
  app.add_option("--chunks", max_chunks, "score at most N chunks (0 = all)")->check(CLI::Range(0, 1 << 20));
  app.add_flag("--json", json, "also print a JSON line with the figures");
  if (auto rc = parse_command_line(app, argc, argv)) return *rc;
  const int n_ctx = co.n_ctx;
  if (n_ctx < 4) return usage_fail("perplexity", fmt::format("-c {}: a chunk needs at least 4 tokens", n_ctx));
  auto kv = co.kv.dtype();
  if (!kv) return usage_fail("perplexity", kv.error().message);
  co.compat.warn(co.n_threads);
  auto offload = co.offload.resolve();
  if (!offload) return fail("perplexity", offload.error().message);
  std::ifstream in(file, std::ios::binary);
  if (!in) return fail("perplexity", fmt::format("cannot read '{}'", file));
  const std::string text{std::istreambuf_iterator<char>(in), {}};

  const std::string path = resolve_model(model);
  if (path.empty()) return 1;
  auto m = Model::load(path);
  if (!m) return fail("perplexity", m.error().message);
  auto tok = Tokenizer::from_gguf((*m)->file());
  if (!tok) return fail("perplexity", tok.error().message);
  const bool add_bos = tok->add_bos() && tok->bos_id() >= 0;
  const std::vector<int32_t> ids = tok->encode(text, add_bos, /*parse_special=*/false);
  int n_chunks = static_cast<int>(ids.size() / static_cast<size_t>(n_ctx));
  if (max_chunks > 0) n_chunks = std::min(n_chunks, max_chunks);
  if (n_chunks < 1)
    return fail("perplexity", fmt::format("'{}' has {} tokens, fewer than one chunk of -c {}", file, ids.size(), n_ctx));

  SessionParams p;
  p.n_ctx = n_ctx;
  p.n_batch = co.n_batch > 0 ? co.n_batch : n_ctx;
  p.n_threads = co.n_threads > 0 ? co.n_threads : hardware_threads();
  p.kv_type = *kv;
  p.swa_full = co.swa_full;
  p.offload = *offload;
  auto session = Session::create(*m, p);
  if (!session) return fail("perplexity", session.error().message);
  Session& s = **session;
  std::fprintf(stderr, "perplexity: %zu tokens, %d chunks of %d, scoring the second half of each\n", ids.size(),
               n_chunks, n_ctx);

  const int first = n_ctx / 2;
  const size_t n_vocab = static_cast<size_t>(s.n_vocab());
  double nll = 0, nll2 = 0;
  int64_t count = 0;
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<int32_t> chunk(static_cast<size_t>(n_ctx));
  for (int c = 0; c < n_chunks; ++c) {
    std::copy_n(ids.begin() + static_cast<ptrdiff_t>(c) * n_ctx, n_ctx, chunk.begin());
    if (add_bos) chunk[0] = tok->bos_id();
    s.clear();
    // Logits of positions first .. n_ctx-1 are the last n_ctx - first rows.
    auto logits = s.decode(chunk, n_ctx - first);
    if (!logits) return fail("perplexity", logits.error().message);
    for (int j = first; j < n_ctx - 1; ++j) {
      const std::span<const float> row = logits->subspan(static_cast<size_t>(j - first) * n_vocab, n_vocab);
      const double lp = log_prob(row, chunk[static_cast<size_t>(j + 1)]);
      nll -= lp;
      nll2 += lp * lp;
      ++count;
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr, "[%d/%d] ppl %.4f  (%.1f tok/s)\n", c + 1, n_chunks, std::exp(nll / static_cast<double>(count)),
                 static_cast<double>(c + 1) * n_ctx / secs);
  }
  const double mean = nll / static_cast<double>(count);
  const double var = std::max(0.0, nll2 / static_cast<double>(count) - mean * mean);
  const double ppl = std::exp(mean);
  const double err = count > 1 ? ppl * std::sqrt(var / static_cast<double>(count - 1)) : 0.0;
  std::printf("PPL = %.4f +/- %.5f\n", ppl, err);
  if (json)
    std::printf("{\"ppl\":%.6f,\"ppl_err\":%.6f,\"n_chunks\":%d,\"n_ctx\":%d,\"n_tokens\":%zu,\"n_scored\":%lld}\n", ppl,
                err, n_chunks, n_ctx, ids.size(), static_cast<long long>(count));
  return 0;
}

}  // namespace minfer::cli
