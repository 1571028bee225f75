// ThreadPool under stress: many thousands of jobs of varying chunk counts, with idle gaps (so
// workers fall asleep and wake mid-job), with delays injected into the windows where a
// publication or a claim could interleave with another thread, from several submitting
// threads, and with closures that throw. Every check is the pool's contract: each element is
// visited exactly once per job, no chunk is still inside fn when parallel_for returns, and
// parallel_for returns at all (a watchdog aborts a hung test with a message instead of letting
// ctest time out).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

#include "core/thread-pool.h"

namespace minfer {
namespace {

// Aborts the process if the test body does not finish within `seconds`.
class Watchdog {
 public:
  explicit Watchdog(int seconds, const char* what) : what_(what) {
    t_ = std::thread([this, seconds] {
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
      while (!done_.load()) {
        if (std::chrono::steady_clock::now() > deadline) {
          std::fprintf(stderr, "watchdog: '%s' still running after %d s: parallel_for hung\n", what_, seconds);
          std::abort();
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    });
  }
  ~Watchdog() {
    done_ = true;
    t_.join();
  }

 private:
  const char* what_;
  std::atomic<bool> done_{false};
  std::thread t_;
};

void spin_for_ns(int64_t ns) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::nanoseconds(ns);
  while (std::chrono::steady_clock::now() < end) {
  }
}

thread_local std::minstd_rand t_rng{std::random_device{}()};

// Delays of 0-50 us at random, like the ones that wedged the server when put between the
// stores that published a job.
void random_delay() {
  const int r = static_cast<int>(t_rng() % 8);
  if (r < 5) return;
  spin_for_ns(static_cast<int64_t>(t_rng() % 50000));
}

struct JobCheck {
  std::vector<std::atomic<int>> hits;
  std::atomic<int> inside{0};
  explicit JobCheck(size_t n) : hits(n) {}
};

// Runs `jobs` jobs on `pool` and checks each one; n, min_chunk and the pauses between jobs vary.
void run_jobs(ThreadPool& pool, int jobs, uint32_t seed, bool idle_gaps) {
  std::minstd_rand rng(seed);
  JobCheck chk(4096);
  for (int j = 0; j < jobs; ++j) {
    const int64_t n = 1 + static_cast<int64_t>(rng() % 700);
    const int64_t min_chunk = 1 + static_cast<int64_t>(rng() % 9);
    for (int64_t i = 0; i < n; ++i) chk.hits[static_cast<size_t>(i)].store(0, std::memory_order_relaxed);
    const bool slow = rng() % 16 == 0;
    pool.parallel_for(
        n,
        [&](int64_t b, int64_t e) {
          chk.inside.fetch_add(1);
          for (int64_t i = b; i < e; ++i) chk.hits[static_cast<size_t>(i)].fetch_add(1, std::memory_order_relaxed);
          if (slow) spin_for_ns(20000);
          chk.inside.fetch_sub(1);
        },
        min_chunk);
    ASSERT_EQ(chk.inside.load(), 0) << "job " << j << ": parallel_for returned while a chunk was still running";
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(chk.hits[static_cast<size_t>(i)].load(), 1) << "job " << j << " (n " << n << ", min_chunk " << min_chunk
                                                            << "): element " << i << " visited the wrong number of times";
    if (idle_gaps && rng() % 8 == 0) {
      // Long enough for the workers to stop spinning and sleep on the futex.
      std::this_thread::sleep_for(std::chrono::microseconds(ThreadPool::kSpinMicros + rng() % 400));
    }
  }
}

TEST(ThreadPool, ManyJobsVaryingChunksWithIdleGaps) {
  Watchdog w(120, "ManyJobsVaryingChunksWithIdleGaps");
  for (int threads : {2, 3, 4, 8}) {
    ThreadPool pool(threads);
    run_jobs(pool, 5000, 1000u + static_cast<uint32_t>(threads), true);
  }
}

// The race that wedged the server: a thread still in the previous job reads the new job's
// fields before the new claim word is stored and claims a chunk on the old word. Delays in both
// windows make that interleaving common; the pool must stay exact.
TEST(ThreadPool, DelaysInPublishAndClaimWindows) {
  Watchdog w(180, "DelaysInPublishAndClaimWindows");
  ThreadPool::set_test_hooks({.before_publish = random_delay, .before_claim = random_delay});
  for (int threads : {2, 4}) {
    ThreadPool pool(threads);
    run_jobs(pool, 4000, 77u + static_cast<uint32_t>(threads), true);
  }
  ThreadPool::set_test_hooks({});
}

// parallel_streams: every element exactly once, nothing still running on return, whatever the
// thread count, step and delays (a slow owner's range is finished by thieves from its back).
TEST(ThreadPool, StreamsVisitEveryElementOnce) {
  Watchdog w(120, "StreamsVisitEveryElementOnce");
  std::minstd_rand rng(5);
  JobCheck chk(4096);
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    for (int j = 0; j < 3000; ++j) {
      const int64_t n = 1 + static_cast<int64_t>(rng() % 900);
      const int64_t step = 1 + static_cast<int64_t>(rng() % 17);
      for (int64_t i = 0; i < n; ++i) chk.hits[static_cast<size_t>(i)].store(0, std::memory_order_relaxed);
      const bool slow = rng() % 8 == 0;
      pool.parallel_streams(n, step, [&](int64_t b, int64_t e) {
        ASSERT_LT(b, e);
        chk.inside.fetch_add(1);
        for (int64_t i = b; i < e; ++i) chk.hits[static_cast<size_t>(i)].fetch_add(1, std::memory_order_relaxed);
        if (slow) random_delay();
        chk.inside.fetch_sub(1);
      });
      ASSERT_EQ(chk.inside.load(), 0) << "job " << j;
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(chk.hits[static_cast<size_t>(i)].load(), 1)
            << "job " << j << " (n " << n << ", step " << step << ", threads " << threads << "): element " << i;
    }
  }
}

TEST(ThreadPool, SeveralSubmittingThreads) {
  Watchdog w(120, "SeveralSubmittingThreads");
  ThreadPool pool(3);
  std::vector<std::thread> ts;
  std::atomic<int> failures{0};
  for (int t = 0; t < 3; ++t)
    ts.emplace_back([&, t] {
      std::minstd_rand rng(static_cast<uint32_t>(t) + 5);
      for (int j = 0; j < 1500; ++j) {
        const int64_t n = 1 + static_cast<int64_t>(rng() % 300);
        std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
        pool.parallel_for(n, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
        });
        for (auto& h : hits)
          if (h.load() != 1) failures.fetch_add(1);
      }
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST(ThreadPool, ExceptionIsRethrownAfterEveryChunkFinished) {
  Watchdog w(60, "ExceptionIsRethrownAfterEveryChunkFinished");
  ThreadPool pool(4);
  for (int j = 0; j < 300; ++j) {
    std::atomic<int> inside{0};
    std::atomic<int> ran{0};
    const int64_t bad = j % 64;
    bool caught = false;
    try {
      pool.parallel_for(64, [&](int64_t b, int64_t e) {
        inside.fetch_add(1);
        ran.fetch_add(static_cast<int>(e - b));
        spin_for_ns(2000);
        inside.fetch_sub(1);
        if (b <= bad && bad < e) throw std::runtime_error("chunk failed");
      });
    } catch (const std::runtime_error& e) {
      caught = std::string(e.what()) == "chunk failed";
    }
    ASSERT_TRUE(caught) << "job " << j;
    ASSERT_EQ(inside.load(), 0) << "job " << j << ": returned while a chunk was running";
    ASSERT_EQ(ran.load(), 64) << "job " << j << ": every chunk still runs once";
  }
  // The pool still works afterwards.
  std::atomic<int64_t> sum{0};
  pool.parallel_for(1000, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) sum.fetch_add(i);
  });
  EXPECT_EQ(sum.load(), 999 * 1000 / 2);
}

TEST(ThreadPool, SingleThreadAndTinyJobsRunInline) {
  ThreadPool pool(1);
  int calls = 0;
  pool.parallel_for(10, [&](int64_t b, int64_t e) {
    EXPECT_EQ(b, 0);
    EXPECT_EQ(e, 10);
    ++calls;
  });
  EXPECT_EQ(calls, 1);
  ThreadPool pool4(4);
  pool4.parallel_for(0, [&](int64_t, int64_t) { ADD_FAILURE() << "n = 0 runs nothing"; });
}

}  // namespace
}  // namespace minfer
