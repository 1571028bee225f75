// The engine's queue of jobs waiting for a slot and the rules that take them out: room (the
// free slots plus max_queue), the end of jobs that were cancelled or waited past their deadline
// or the queue timeout, and the pick, in queue order (first come, first served), of the free
// slot whose cache shares the longest prefix with a job's prompt. A job pinned to a busy slot
// (id_slot) waits without holding back the jobs behind it. Not thread-safe: the engine calls it
// under its lock.
//
//   Scheduler q(params.max_queue, params.queue_timeout_s);
//   if (!q.has_room(jobs.size(), n_free)) return false;            // HTTP 503
//   q.push(std::move(jobs), Clock::now());
//   for (Scheduler::Expired& x : q.expire(Clock::now())) fail(x.job, x.why);
//   while (auto p = q.pick(views)) start(slots[p->slot], std::move(*p));
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <vector>

#include "server/engine.h"

namespace minfer::server {

class Scheduler {
 public:
  using Clock = std::chrono::steady_clock;
  Scheduler(int max_queue, double queue_timeout_s) : max_queue_(max_queue), queue_timeout_s_(queue_timeout_s) {}

  // Whether n more jobs fit: a job passes through the queue on its way to a free slot, so the
  // free slots count as room too.
  bool has_room(size_t n, int n_free_slots) const;
  void push(std::vector<Job> jobs, Clock::time_point now);

  struct Expired {
    Job job;
    const char* why;   // "cancelled", "timed out waiting for a slot (...)"
    bool cancelled;    // else timed out
  };
  // Takes the jobs that were cancelled or waited too long out of the queue.
  std::vector<Expired> expire(Clock::time_point now);

  // A slot as the pick sees it.
  struct SlotView {
    int id = 0;
    bool free = false;
    std::span<const int32_t> cached;  // the tokens its cache holds
  };
  struct Pick {
    Job job;
    Clock::time_point submitted;
    int slot = 0;
  };
  // The first queued job (in order) that has a free slot it may run on, with the free slot
  // sharing the longest cached prefix with its prompt (ties: the one caching least); taken
  // out of the queue. nullopt: no job can start now.
  std::optional<Pick> pick(std::span<const SlotView> slots);

  // Every queued job, taken out (shutdown, cancel_all).
  std::vector<Job> take_all();
  size_t size() const { return queue_.size(); }
  bool empty() const { return queue_.empty(); }

 private:
  struct Queued {
    Job job;
    Clock::time_point submitted;
  };
  int max_queue_;
  double queue_timeout_s_;
  std::deque<Queued> queue_;
};

}  // namespace minfer::server
