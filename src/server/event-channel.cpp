// EventChannel (engine.h): the queue between the engine thread and a request's HTTP handler.
#include "server/engine.h"

namespace minfer::server {

void EventChannel::push(JobEvent ev) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (ev.ends()) --open_jobs_;
    // A reader that fell behind: merge this text into the choice's last queued text event.
    if (TextEvent* t = ev.as<TextEvent>(); t && q_.size() >= kMaxEvents) {
      for (auto it = q_.rbegin(); it != q_.rend(); ++it) {
        if (it->index != ev.index) continue;
        if (TextEvent* last = it->as<TextEvent>()) {
          TextDelta& d = last->delta;
          d.text += t->delta.text;
          d.logprobs.insert(d.logprobs.end(), std::make_move_iterator(t->delta.logprobs.begin()),
                            std::make_move_iterator(t->delta.logprobs.end()));
          d.tokens.insert(d.tokens.end(), t->delta.tokens.begin(), t->delta.tokens.end());
          last->usage = t->usage;  // usage and times so far: the newer event's (timings_per_token)
          return;
        }
        break;
      }
    }
    q_.push_back(std::move(ev));
  }
  cv_.notify_all();
}

EventChannel::PopResult EventChannel::pop(JobEvent& ev, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lk(mu_);
  if (!cv_.wait_for(lk, timeout, [&] { return !q_.empty() || open_jobs_ <= 0; })) return kTimeout;
  if (q_.empty()) return kClosed;
  ev = std::move(q_.front());
  q_.pop_front();
  return kEvent;
}

}  // namespace minfer::server
