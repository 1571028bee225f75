#include "server/scheduler.h"

#include "runtime/prefix-reuse.h"

namespace minfer::server {

bool Scheduler::has_room(size_t n, int n_free_slots) const {
  return queue_.size() + n <= static_cast<size_t>(max_queue_) + static_cast<size_t>(std::max(0, n_free_slots));
}

void Scheduler::push(std::vector<Job> jobs, Clock::time_point now) {
  for (Job& j : jobs) queue_.push_back({std::move(j), now});
}

std::vector<Scheduler::Expired> Scheduler::expire(Clock::time_point now) {
  std::vector<Expired> out;
  for (auto it = queue_.begin(); it != queue_.end();) {
    const char* why = nullptr;
    bool cancelled = false;
    if (it->job.channel->cancelled()) {
      why = "cancelled";
      cancelled = true;
    } else if (now > it->job.deadline) {
      why = "timed out waiting for a slot (--timeout)";
    } else if (queue_timeout_s_ > 0 && now - it->submitted > std::chrono::duration<double>(queue_timeout_s_)) {
      why = "timed out waiting for a slot (queue timeout)";
    }
    if (!why) {
      ++it;
      continue;
    }
    out.push_back({std::move(it->job), why, cancelled});
    it = queue_.erase(it);
  }
  return out;
}

std::optional<Scheduler::Pick> Scheduler::pick(std::span<const SlotView> slots) {
  for (auto it = queue_.begin(); it != queue_.end(); ++it) {
    const Job& job = it->job;
    const SlotView* best = nullptr;
    size_t best_n = 0;
    for (const SlotView& s : slots) {
      if (!s.free || (job.id_slot >= 0 && s.id != job.id_slot)) continue;
      const size_t n = job.cache_prompt ? common_prefix(s.cached, job.prompt) : 0;
      if (!best || n > best_n || (n == best_n && s.cached.size() < best->cached.size())) {
        best = &s;
        best_n = n;
      }
    }
    if (!best) continue;
    Pick p{std::move(it->job), it->submitted, best->id};
    queue_.erase(it);
    return p;
  }
  return std::nullopt;
}

std::vector<Job> Scheduler::take_all() {
  std::vector<Job> out;
  for (Queued& q : queue_) out.push_back(std::move(q.job));
  queue_.clear();
  return out;
}

}  // namespace minfer::server
