// The listening socket and the stop signals, as every minfer HTTP server takes them: the first
// SIGINT / SIGTERM asks for a stop (the server drains its own way), a second one exits at once.
//
//   http::StopSignals signals;                      // first, before any thread starts
//   auto port = http::bind_listener(server, "127.0.0.1", 0);   // Expected<int>: 0 = the system picks
//   if (!port) return fail(port.error().message);   // "cannot listen on 127.0.0.1:8080 (...)"
//   std::thread t([&] { server.listen_after_bind(); });
//   const int sig = signals.wait();                 // blocks until SIGINT / SIGTERM
//   signals.exit_on_next();                         // a second signal: _Exit(128 + signal)
//   server.stop(), t.join();
#pragma once

#include <httplib.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <string>

#include "core/status.h"

namespace minfer::http {

class StopSignals {
 public:
  // Blocks SIGINT and SIGTERM in this thread (threads started later inherit the mask, so no
  // worker is interrupted mid-write) and ignores SIGPIPE (a client gone mid-write is an error
  // return, not a death).
  StopSignals();
  // The first signal's number; -1 when `stop` turned true first (checked every 100 ms).
  int wait(const std::atomic<bool>* stop = nullptr);
  // A signal within `timeout`, or -1.
  int poll(std::chrono::milliseconds timeout);
  // From now on a signal ends the process at once with 128 + its number (a detached thread).
  void exit_on_next();

 private:
  sigset_t set_;
};

// Binds host:port (port 0: a free port); the port bound, or an error naming the address.
Expected<int> bind_listener(httplib::Server& server, const std::string& host, int port);

}  // namespace minfer::http
