#include "core/thread-pool.h"

#include <algorithm>
#include <chrono>
#include <utility>

// A spin-wait hint: x86's pause, ARM's yield (both baseline instructions), else the OS.
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define MINFER_CPU_RELAX() _mm_pause()
#elif defined(__aarch64__)
#define MINFER_CPU_RELAX() asm volatile("yield" ::: "memory")
#else
#define MINFER_CPU_RELAX() std::this_thread::yield()
#endif

namespace minfer {
namespace {

std::atomic<void (*)()> g_before_publish{nullptr};
std::atomic<void (*)()> g_before_claim{nullptr};

void call_hook(const std::atomic<void (*)()>& h) {
  if (auto f = h.load(std::memory_order_relaxed)) f();
}

// Spins until pred() holds or kSpinMicros pass; returns whether it holds.
template <class Pred>
bool spin_until(Pred pred) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::microseconds(ThreadPool::kSpinMicros);
  for (int i = 0;; ++i) {
    if (pred()) return true;
    MINFER_CPU_RELAX();
    if ((i & 63) == 63 && std::chrono::steady_clock::now() > deadline) return pred();
  }
}

// The claim word: generation, chunk count and next index in one atomic.
constexpr uint64_t claim_word(uint32_t gen, uint32_t chunks, uint32_t index) {
  return (static_cast<uint64_t>(gen) << 32) | (static_cast<uint64_t>(chunks) << 16) | index;
}
constexpr uint32_t claim_gen(uint64_t c) { return static_cast<uint32_t>(c >> 32); }
constexpr uint32_t claim_chunks(uint64_t c) { return static_cast<uint32_t>(c >> 16) & 0xffff; }
constexpr uint32_t claim_index(uint64_t c) { return static_cast<uint32_t>(c) & 0xffff; }

}  // namespace

void ThreadPool::set_test_hooks(Hooks h) {
  g_before_publish.store(h.before_publish, std::memory_order_relaxed);
  g_before_claim.store(h.before_claim, std::memory_order_relaxed);
}

int hardware_threads() {
  unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

ThreadPool::ThreadPool(int n_threads) : n_threads_(std::max(1, n_threads)) {
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::run_chunks(uint32_t gen) {
  uint64_t c = claim_.load(std::memory_order_acquire);
  for (;;) {
    if (claim_gen(c) != gen) return;  // a later job: ours is done
    const uint32_t index = claim_index(c), chunks = claim_chunks(c);
    if (index >= chunks) return;
    call_hook(g_before_claim);
    // The CAS succeeds only if the word still names this generation and this index, so the
    // chunk belongs to the job whose count was checked above.
    if (!claim_.compare_exchange_weak(c, c + 1, std::memory_order_acq_rel, std::memory_order_acquire)) continue;
    // Claimed chunk `index` of job `gen`: the job cannot finish (nor its fields change) before
    // this chunk is counted done.
    const int64_t begin = job_chunk_ * index;
    const int64_t end = std::min(job_n_, begin + job_chunk_);
    try {
      (*job_)(begin, end);
    } catch (...) {
      std::lock_guard<std::mutex> lk(error_mu_);
      if (!error_) error_ = std::current_exception();
    }
    const uint32_t finished = done_.fetch_add(1, std::memory_order_acq_rel) + 1;
    if (finished == chunks) done_.notify_one();
    c = claim_.load(std::memory_order_acquire);
  }
}

void ThreadPool::worker_loop() {
  uint32_t seen = 0;
  for (;;) {
    if (!spin_until([&] { return generation_.load(std::memory_order_acquire) != seen; })) {
      generation_.wait(seen, std::memory_order_acquire);
      if (generation_.load(std::memory_order_acquire) == seen) continue;  // spurious
    }
    seen = generation_.load(std::memory_order_acquire);
    if (stop_.load(std::memory_order_acquire)) return;
    run_chunks(seen);
  }
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn,
                              int64_t min_chunk) {
  if (n <= 0) return;
  min_chunk = std::max<int64_t>(1, min_chunk);
  const int64_t max_parts = std::max<int64_t>(1, n / min_chunk);
  if (max_parts == 1 || workers_.empty()) {
    fn(0, n);
    return;
  }
  // Up to 4 chunks per thread: slack for a thread the OS delays, few enough that each chunk
  // still streams a long run of rows.
  const int64_t parts = std::min<int64_t>({max_parts, 4 * static_cast<int64_t>(n_threads_), int64_t{kMaxChunks}});
  const int64_t size = (n + parts - 1) / parts;
  const uint32_t chunks = static_cast<uint32_t>((n + size - 1) / size);
  std::lock_guard<std::mutex> submit(submit_mu_);
  // Every chunk of the previous job is done, so no thread reads these fields until the claim
  // word below names the new generation.
  const uint32_t gen = generation_.load(std::memory_order_relaxed) + 1;
  job_ = &fn;
  job_n_ = n;
  job_chunk_ = size;
  error_ = nullptr;
  done_.store(0, std::memory_order_relaxed);
  call_hook(g_before_publish);
  claim_.store(claim_word(gen, chunks, 0), std::memory_order_release);
  generation_.store(gen, std::memory_order_release);
  generation_.notify_all();
  run_chunks(gen);
  for (;;) {
    const uint32_t d = done_.load(std::memory_order_acquire);
    if (d == chunks) break;
    if (!spin_until([&] { return done_.load(std::memory_order_acquire) == chunks; })) done_.wait(d, std::memory_order_acquire);
  }
  if (error_) {
    std::exception_ptr e = std::exchange(error_, nullptr);
    std::rethrow_exception(e);
  }
}

void ThreadPool::parallel_streams(int64_t n, int64_t step, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  step = std::max<int64_t>(1, step);
  const int64_t parts = std::min<int64_t>(n_threads_, n);
  if (parts <= 1 || workers_.empty() || n > int64_t{0xffffffff}) {
    fn(0, n);
    return;
  }
  // Range p = [lo, hi) packed as lo | hi << 32.
  auto pack = [](int64_t lo, int64_t hi) { return static_cast<uint64_t>(lo) | static_cast<uint64_t>(hi) << 32; };
  // One cache line per range: the owners claim from their own without moving the other's line
  // between cores (adjacent words cost ~0.5 us per call in claims on a line both write).
  struct alignas(64) Range {
    std::atomic<uint64_t> v;
  };
  std::vector<Range> ranges(static_cast<size_t>(parts));
  for (int64_t p = 0; p < parts; ++p) ranges[static_cast<size_t>(p)].v.store(pack(n * p / parts, n * (p + 1) / parts));
  // Claims the next piece of range p from the front (owner) or the back (thief); false when empty.
  auto claim = [&](int64_t p, bool front, int64_t& b, int64_t& e) {
    std::atomic<uint64_t>& r = ranges[static_cast<size_t>(p)].v;
    uint64_t v = r.load(std::memory_order_relaxed);
    for (;;) {
      const auto lo = static_cast<int64_t>(v & 0xffffffffu), hi = static_cast<int64_t>(v >> 32);
      if (lo >= hi) return false;
      // The owner takes half of what is left (few claims, long runs), a thief one step.
      b = front ? lo : std::max(lo, hi - step);
      e = front ? std::min(hi, lo + std::max(step, (hi - lo) / 2)) : hi;
      if (r.compare_exchange_weak(v, front ? pack(e, hi) : pack(lo, b), std::memory_order_relaxed)) return true;
    }
  };
  parallel_for(parts, [&](int64_t p0, int64_t p1) {
    int64_t b = 0, e = 0;
    for (int64_t p = p0; p < p1; ++p)
      while (claim(p, true, b, e)) fn(b, e);
    for (int64_t p = 0; p < parts; ++p)
      while (claim(p, false, b, e)) fn(b, e);
  });
}

}  // namespace minfer
