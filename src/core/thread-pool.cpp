#include "core/thread-pool.h"

#include <algorithm>

namespace minfer {

int hardware_threads() {
  unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

ThreadPool::ThreadPool(int n_threads) : n_threads_(std::max(1, n_threads)) {
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_start_.notify_all();
  for (auto& t : workers_) t.join();
}

static void run_part(const std::function<void(int64_t, int64_t)>& fn, int64_t n, int parts,
                     int index) {
  const int64_t begin = n * index / parts;
  const int64_t end = n * (index + 1) / parts;
  if (begin < end) fn(begin, end);
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(int64_t, int64_t)>* job;
    int64_t n;
    int parts;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_start_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      job = job_;
      n = job_n_;
      parts = job_parts_;
    }
    if (index < parts) run_part(*job, n, parts, index);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (--pending_ == 0) cv_done_.notify_one();
    }
  }
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn,
                              int64_t min_chunk) {
  if (n <= 0) return;
  const int64_t max_parts = std::max<int64_t>(1, n / std::max<int64_t>(1, min_chunk));
  const int parts = static_cast<int>(std::min<int64_t>(n_threads_, max_parts));
  if (parts == 1 || workers_.empty()) {
    fn(0, n);
    return;
  }
  std::lock_guard<std::mutex> submit(submit_mu_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = &fn;
    job_n_ = n;
    job_parts_ = parts;
    pending_ = static_cast<int>(workers_.size());
    ++generation_;
  }
  cv_start_.notify_all();
  run_part(fn, n, parts, 0);
  std::unique_lock<std::mutex> lock(mu_);
  cv_done_.wait(lock, [&] { return pending_ == 0; });
  job_ = nullptr;
}

}  // namespace minfer
