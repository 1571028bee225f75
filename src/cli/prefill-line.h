// "[prefill] 1024/3000 tokens (34%)" on stderr, rewritten in place while a prompt longer than one
// batch is read, on a terminal and without -q; cleared when the reply starts (or on clear()).
//
//   PrefillLine line(n_prompt > s.n_batch());
//   hooks.on_prefill = [&](int done, int total) { line.update(done, total); return !stop; };
#pragma once

#include <unistd.h>

#include <cstdio>

#include "cli/notice.h"

namespace minfer::cli {

class PrefillLine {
 public:
  explicit PrefillLine(bool long_prompt) : on_(long_prompt && !quiet() && isatty(STDERR_FILENO)) {}
  ~PrefillLine() { clear(); }
  PrefillLine(const PrefillLine&) = delete;
  PrefillLine& operator=(const PrefillLine&) = delete;

  void update(int done, int total) {
    if (!on_) return;
    std::fprintf(stderr, "\r[prefill] %d/%d tokens (%d%%)\033[K", done, total, total > 0 ? 100 * done / total : 0);
    std::fflush(stderr);
    shown_ = true;
  }
  void clear() {
    if (!shown_) return;
    std::fputs("\r\033[K", stderr);
    std::fflush(stderr);
    shown_ = false;
  }

 private:
  bool on_;
  bool shown_ = false;
};

}  // namespace minfer::cli
