#include "cli/load-model.h"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>

#include "cli/notice.h"
#include "core/thread-pool.h"

namespace minfer::cli {
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string human_bytes(uint64_t n) {
  if (n >= 1000000000ULL) return fmt::format("{:.2f} GB", static_cast<double>(n) / 1e9);
  return fmt::format("{:.0f} MB", static_cast<double>(n) / 1e6);
}

}  // namespace

LoadProgress::LoadProgress(const std::string& path) : t0_(now_s()) {
  std::error_code ec;
  const uint64_t bytes = std::filesystem::file_size(path, ec);
  label_ = std::filesystem::path(path).filename().string();
  if (!ec) label_ += " (" + human_bytes(bytes) + ")";
  ticking_ = !quiet() && isatty(STDERR_FILENO);
  if (!ticking_) return;
  ticker_ = std::thread([this] {
    // A fast load prints nothing until done(); a slow one shows that it is working.
    for (int i = 0; !stop_; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      if (stop_ || i < 3) continue;
      std::fprintf(stderr, "\r[load] %s %.1f s\033[K", label_.c_str(), now_s() - t0_);
      std::fflush(stderr);
    }
  });
}

LoadProgress::~LoadProgress() { stop(); }

void LoadProgress::stop() {
  if (ticker_.joinable()) {
    stop_ = true;
    ticker_.join();
    std::fprintf(stderr, "\r\033[K");
  }
}

double LoadProgress::done() {
  stop();
  const double s = now_s() - t0_;
  info(fmt::format("[load] {} in {:.2f} s", label_, s));
  return s;
}

void LoadProgress::abandon() { stop(); }

Expected<RunnableModel> load_runnable(const std::string& path, const ContextOptions& co) {
  LoadProgress progress(path);
  auto fail = [&](const Error& e) -> Expected<RunnableModel> {
    progress.abandon();
    return e;
  };
  auto kv = co.kv.dtype();
  if (!kv) return fail(kv.error());
  auto offload = co.offload.resolve();
  if (!offload) return fail(offload.error());
  RunnableModel r;
  auto m = Model::load(path);
  if (!m) return fail(m.error());
  r.model = std::move(*m);
  auto tok = Tokenizer::from_gguf(r.model->file());
  if (!tok) return fail(tok.error());
  r.tok.emplace(std::move(*tok));
  SessionParams p;
  p.n_ctx = context_for_model(co.n_ctx, r.model->hparams().n_ctx_train);
  p.n_batch = co.n_batch;
  p.n_threads = co.n_threads > 0 ? co.n_threads : hardware_threads();
  p.kv_type = *kv;
  p.swa_full = co.swa_full;
  p.offload = *offload;
  auto s = Session::create(r.model, p);
  if (!s) return fail(s.error());
  r.session = std::move(*s);
  // The one-token graph: every decode step needs it, and preparing it repacks the weights.
  if (auto g = r.session->graph(1, 1); !g) return fail(g.error());
  r.load_s = progress.done();
  co.compat.mlock();
  return r;
}

}  // namespace minfer::cli
