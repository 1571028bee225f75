// A persistent pool of worker threads. parallel_for splits [0, n) into contiguous chunks and
// runs them on the workers and the calling thread; it returns when all are done. Submissions
// from several threads are serialised (the pool is not reentrant by design).
//
//   ThreadPool pool(4);
//   pool.parallel_for(n_rows, [&](int64_t begin, int64_t end) { ... });
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace minfer {

class ThreadPool {
 public:
  explicit ThreadPool(int n_threads);  // total threads including the caller; >= 1
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int n_threads() const { return n_threads_; }

  // Runs fn(begin, end) over [0, n) in chunks of at least min_chunk elements.
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn,
                    int64_t min_chunk = 1);

 private:
  void worker_loop(int index);

  int n_threads_;
  std::vector<std::thread> workers_;
  std::mutex submit_mu_;  // one parallel_for at a time
  std::mutex mu_;
  std::condition_variable cv_start_;
  std::condition_variable cv_done_;
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t job_n_ = 0;
  int job_parts_ = 0;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
};

// Number of hardware threads, at least 1.
int hardware_threads();

}  // namespace minfer
