#include <csignal>
#include <cstdio>
#include <string>

#include "cli/commands.h"
#include "hub/http-client.h"
#include "hub/model-ref.h"

namespace minfer::cli {

namespace {
void on_interrupt(int) { hub::http_cancel_all(); }
}  // namespace

// Ctrl-C during a download stops it cleanly (the partial file stays for the next run).
InterruptibleDownloads::InterruptibleDownloads() {
  struct sigaction sa{};
  sa.sa_handler = on_interrupt;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &old_int_);
  sigaction(SIGTERM, &sa, &old_term_);
}

InterruptibleDownloads::~InterruptibleDownloads() {
  sigaction(SIGINT, &old_int_, nullptr);
  sigaction(SIGTERM, &old_term_, nullptr);
}

std::string resolve_model(const std::string& model) {
  auto r = [&] {
    InterruptibleDownloads guard;
    return hub::resolve_model_ref(model);
  }();
  if (!r) {
    std::fprintf(stderr, "minfer: %s\n", r.error().message.c_str());
    return "";
  }
  return r->path;
}

}  // namespace minfer::cli
