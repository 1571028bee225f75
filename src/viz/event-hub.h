// Fan-out of visualizer events to the pages listening on /viz/events. Each page has its own
// bounded queue: generation never waits for a page; a page that falls behind loses events and
// is told so (one {"type":"lagged","dropped":N} before the next event it gets).
//
//   EventHub hub;
//   auto sub = hub.subscribe();                  // one per SSE connection
//   if (hub.listening()) hub.publish(text);      // capture only when someone listens
//   auto batch = hub.wait(*sub, 1000ms);         // the page's next events (empty on timeout)
//   hub.unsubscribe(sub);
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace minfer::viz {

class EventHub {
 public:
  struct Subscriber {
    std::deque<std::string> queue;
    size_t dropped = 0;
  };
  explicit EventHub(size_t capacity = 8192) : capacity_(capacity) {}

  std::shared_ptr<Subscriber> subscribe();
  void unsubscribe(const std::shared_ptr<Subscriber>& s);
  bool listening() const { return n_subscribers_.load(std::memory_order_relaxed) > 0; }
  int n_subscribers() const { return n_subscribers_.load(); }

  void publish(const std::string& event);
  std::vector<std::string> wait(Subscriber& s, std::chrono::milliseconds timeout);
  void close_all();  // wakes every waiter; wait() returns empty from now on
  bool closed();

 private:
  size_t capacity_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::shared_ptr<Subscriber>> subs_;
  std::atomic<int> n_subscribers_{0};
  bool closed_ = false;
};

}  // namespace minfer::viz
