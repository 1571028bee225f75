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
//
// Correctness rules (tests/unit/test-core-thread-pool.cpp checks each under injected delays):
//  - a chunk is claimed by one CAS on a single word that holds the job's generation, its chunk
//    count and the next index, so a thread still looking at an older job can never claim a
//    chunk of a newer one, nor a chunk past the count of the job it claims from;
//  - done_ counts exactly the claimed chunks of the current job, each after fn has returned, so
//    parallel_for returns only once every chunk it started has left fn;
//  - an exception thrown by fn (in any thread) is rethrown by parallel_for after every chunk is
//    done: the closure is never freed while a chunk still runs in it.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
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

  // Runs fn(begin, end) over [0, n) for work that streams memory (a decode step's matmuls):
  // one contiguous range per thread, walked front to back (the owner claims half of what is
  // left, at least `step`), so each thread reads one long run; a thread done with its range
  // takes pieces of `step` from the back of another's, so a thread the OS delays does not hold
  // the job up. A range's bounds live in one word that the owner (front) and a thief (back)
  // change by CAS, so each piece runs exactly once.
  //   pool.parallel_streams(n_groups, 4, [&](int64_t g0, int64_t g1) { ... });
  void parallel_streams(int64_t n, int64_t step, const std::function<void(int64_t, int64_t)>& fn);

  static constexpr int kSpinMicros = 300;
  static constexpr uint32_t kMaxChunks = 0xffff;  // the claim word holds 16-bit counts

  // Test hooks (nullptr in production): called in parallel_for between publishing a job's
  // fields and its claim word, and in a claiming thread between reading the claim word and
  // its CAS. A test makes them sleep to widen those windows.
  struct Hooks {
    void (*before_publish)() = nullptr;
    void (*before_claim)() = nullptr;
  };
  static void set_test_hooks(Hooks h);

 private:
  using Fn = std::function<void(int64_t, int64_t)>;
  void worker_loop();
  // Claims and runs chunks of job `gen` until none is left.
  void run_chunks(uint32_t gen);

  int n_threads_;
  std::vector<std::thread> workers_;
  std::mutex submit_mu_;  // one parallel_for at a time
  // The current job's closure and geometry: written before the claim word that publishes the
  // job and read by a thread only after its CAS on that word claimed one of the job's chunks.
  const Fn* job_ = nullptr;
  int64_t job_n_ = 0;
  int64_t job_chunk_ = 1;
  // (generation << 32) | (chunk count << 16) | next chunk index
  std::atomic<uint64_t> claim_{0};
  std::atomic<uint32_t> done_{0};        // chunks of the current job finished (futex word)
  std::atomic<uint32_t> generation_{0};  // bumped per job (futex word)
  std::atomic<bool> stop_{false};
  std::mutex error_mu_;
  std::exception_ptr error_;  // the first exception of the current job
};

// Number of hardware threads, at least 1.
int hardware_threads();

}  // namespace minfer
