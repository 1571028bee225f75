#include "http/listener.h"

#include <cstdio>
#include <cstdlib>
#include <thread>

namespace minfer::http {

StopSignals::StopSignals() {
  sigemptyset(&set_);
  sigaddset(&set_, SIGINT);
  sigaddset(&set_, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set_, nullptr);
  signal(SIGPIPE, SIG_IGN);
}

int StopSignals::wait(const std::atomic<bool>* stop) {
  for (;;) {
    const int sig = poll(std::chrono::milliseconds(100));
    if (sig > 0) return sig;
    if (stop && stop->load()) return -1;
  }
}

int StopSignals::poll(std::chrono::milliseconds timeout) {
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(timeout).count();
  const timespec ts{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
  const int sig = sigtimedwait(&set_, nullptr, &ts);
  return sig > 0 ? sig : -1;
}

void StopSignals::exit_on_next() {
  std::thread([set = set_]() mutable {
    int again = 0;
    sigwait(&set, &again);
    std::fprintf(stderr, "signal %d again: exiting now\n", again);
    std::fflush(stderr);
    std::_Exit(128 + again);
  }).detach();
}

Expected<int> bind_listener(httplib::Server& server, const std::string& host, int port) {
  const int bound = port == 0 ? server.bind_to_any_port(host) : (server.bind_to_port(host, port) ? port : -1);
  if (bound <= 0) return make_error("cannot listen on {}:{} (in use, or not an address of this machine)", host, port);
  return bound;
}

}  // namespace minfer::http
