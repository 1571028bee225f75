#include "hub/progress.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace minfer::hub {

std::string human_bytes(int64_t n) {
  const double v = static_cast<double>(n);
  char buf[32];
  if (v >= 1e9) std::snprintf(buf, sizeof buf, "%.2f GB", v / 1e9);
  else if (v >= 1e6) std::snprintf(buf, sizeof buf, "%.1f MB", v / 1e6);
  else if (v >= 1e3) std::snprintf(buf, sizeof buf, "%.1f kB", v / 1e3);
  else std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(n));
  return buf;
}

namespace {
std::string clock_text(double s) {
  if (s < 0 || s > 359999) return "--:--";
  const long t = static_cast<long>(s + 0.5);
  char buf[32];
  if (t >= 3600) std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
  else std::snprintf(buf, sizeof buf, "%ld:%02ld", t / 60, t % 60);
  return buf;
}
}  // namespace

Progress::Progress(std::string label, int64_t total, int64_t start)
    : label_(std::move(label)), total_(total), done_(start), start_(start), tty_(isatty(STDERR_FILENO) != 0) {
  interval_s_ = 5.0;
  if (const char* e = std::getenv("MINFER_PROGRESS_SECONDS"); e && *e) interval_s_ = std::atof(e);
  t0_ = last_ = std::chrono::steady_clock::now();
  if (!tty_) {
    std::fprintf(stderr, "downloading %s (%s%s)\n", label_.c_str(), total_ > 0 ? human_bytes(total_).c_str() : "size unknown",
                 start_ > 0 ? (", resuming at " + human_bytes(start_)).c_str() : "");
  }
}

void Progress::add(int64_t n) {
  done_ += n;
  draw(false);
}

void Progress::restart() {
  done_ = 0;
  start_ = 0;
  t0_ = std::chrono::steady_clock::now();
  if (!tty_) std::fprintf(stderr, "%s: the server sent the whole file, not the rest: starting over\n", label_.c_str());
}

void Progress::draw(bool force) {
  const auto now = std::chrono::steady_clock::now();
  const double since = std::chrono::duration<double>(now - last_).count();
  if (!force && since < (tty_ ? 0.2 : interval_s_)) return;
  last_ = now;
  const double el = std::chrono::duration<double>(now - t0_).count();
  const double speed = el > 0 ? static_cast<double>(done_ - start_) / el : 0;
  const double eta = speed > 0 && total_ > 0 ? static_cast<double>(total_ - done_) / speed : -1;
  const double frac = total_ > 0 ? static_cast<double>(done_) / static_cast<double>(total_) : 0;
  if (tty_) {
    const int width = 24;
    const int fill = static_cast<int>(frac * width);
    std::string bar(static_cast<size_t>(fill), '=');
    if (fill < width) bar += '>';
    bar.resize(width, ' ');
    std::fprintf(stderr, "\r%-28.28s %3d%% [%s] %s / %s  %s/s  ETA %s\x1b[K", label_.c_str(), static_cast<int>(frac * 100),
                 bar.c_str(), human_bytes(done_).c_str(), total_ > 0 ? human_bytes(total_).c_str() : "?",
                 human_bytes(static_cast<int64_t>(speed)).c_str(), clock_text(eta).c_str());
    open_line_ = true;
  } else {
    std::fprintf(stderr, "%s: %d%% %s / %s, %s/s, ETA %s\n", label_.c_str(), static_cast<int>(frac * 100),
                 human_bytes(done_).c_str(), total_ > 0 ? human_bytes(total_).c_str() : "?",
                 human_bytes(static_cast<int64_t>(speed)).c_str(), clock_text(eta).c_str());
  }
  std::fflush(stderr);
}

void Progress::abandon() {
  if (open_line_) std::fputc('\n', stderr);
  open_line_ = false;
}

void Progress::finish() {
  if (tty_) draw(true);
  abandon();
  const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  std::fprintf(stderr, "downloaded %s: %s in %.1f s (%s/s)\n", label_.c_str(), human_bytes(done_).c_str(), el,
               human_bytes(static_cast<int64_t>(el > 0 ? static_cast<double>(done_ - start_) / el : 0)).c_str());
}

}  // namespace minfer::hub
