// EventChannel (engine.h): the queue between the engine thread and a request's HTTP handler.
#include "server/engine.h"

namespace minfer::server {

void EventChannel::push(JobEvent ev) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (ev.kind == JobEvent::kDone || ev.kind == JobEvent::kError) --open_jobs_;
    // A reader that fell behind: merge this text into the choice's last queued text event.
    if (ev.kind == JobEvent::kText && q_.size() >= kMaxEvents) {
      for (auto it = q_.rbegin(); it != q_.rend(); ++it) {
        if (it->index != ev.index) continue;
        if (it->kind == JobEvent::kText) {
          it->text += ev.text;
          it->logprobs.insert(it->logprobs.end(), std::make_move_iterator(ev.logprobs.begin()),
                              std::make_move_iterator(ev.logprobs.end()));
          it->tokens.insert(it->tokens.end(), ev.tokens.begin(), ev.tokens.end());
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
