// A persistent pool of worker threads. parallel_for splits [0, n) into chunks that the workers
// and the calling thread claim from a shared counter; it returns when every chunk is done. A
// worker the OS has not scheduled yet simply claims nothing: the caller never waits for a
// thread that did not start, only for chunks in progress. Submissions from several threads are
// serialised (the pool is not reentrant by design).
//
// Waiting is spin-then-sleep: between back-to-back parallel_for calls (the ops of a graph) the
// workers spin on an atomic counter for up to kSpinMicros, so a hand-off costs ~100 ns instead
// of a futex wake-up; an idle pool sleeps in std::atomic::wait and costs nothing.
//
//   ThreadPool pool(4);
//   pool.parallel_for(n_rows, [&](int64_t begin, int64_t end) { ... });
#pragma once

#include <atomic>
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

  static constexpr int kSpinMicros = 300;

 private:
  using Fn = std::function<void(int64_t, int64_t)>;
  void worker_loop();
  // Claims and runs chunks of job `gen` until none is left.
  void run_chunks(uint32_t gen);

  int n_threads_;
  std::vector<std::thread> workers_;
  std::mutex submit_mu_;  // one parallel_for at a time
  // The current job; read by a worker only after it has claimed one of its chunks.
  std::atomic<const Fn*> job_{nullptr};
  std::atomic<int64_t> job_n_{0};
  std::atomic<int64_t> job_chunk_{1};
  std::atomic<uint32_t> job_chunks_{0};
  std::atomic<uint64_t> claim_{0};       // (job generation << 32) | next chunk index
  std::atomic<uint32_t> done_{0};        // chunks of the current job finished (futex word)
  std::atomic<uint32_t> generation_{0};  // bumped per job (futex word)
  std::atomic<bool> stop_{false};
};

// Number of hardware threads, at least 1.
int hardware_threads();

}  // namespace minfer
