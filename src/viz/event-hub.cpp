#include "viz/event-hub.h"

#include <algorithm>

namespace minfer::viz {

std::shared_ptr<EventHub::Subscriber> EventHub::subscribe() {
  auto s = std::make_shared<Subscriber>();
  std::lock_guard<std::mutex> lock(mu_);
  subs_.push_back(s);
  n_subscribers_.store(static_cast<int>(subs_.size()));
  return s;
}

void EventHub::unsubscribe(const std::shared_ptr<Subscriber>& s) {
  std::lock_guard<std::mutex> lock(mu_);
  std::erase(subs_, s);
  n_subscribers_.store(static_cast<int>(subs_.size()));
}

void EventHub::publish(const std::string& event) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& s : subs_) {
      if (s->queue.size() >= capacity_) {
        ++s->dropped;
        continue;
      }
      s->queue.push_back(event);
    }
  }
  cv_.notify_all();
}

std::vector<std::string> EventHub::wait(Subscriber& s, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return closed_ || !s.queue.empty() || s.dropped > 0; });
  std::vector<std::string> out;
  if (closed_) return out;
  if (s.dropped > 0) {
    out.push_back("{\"type\":\"lagged\",\"dropped\":" + std::to_string(s.dropped) + "}");
    s.dropped = 0;
  }
  while (!s.queue.empty()) {
    out.push_back(std::move(s.queue.front()));
    s.queue.pop_front();
  }
  return out;
}

void EventHub::close_all() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
  }
  cv_.notify_all();
}

bool EventHub::closed() {
  std::lock_guard<std::mutex> lock(mu_);
  return closed_;
}

}  // namespace minfer::viz
