// The interface a compute backend implements. The scheduler (scheduler.h) assigns every node to
// the highest-priority backend whose supports_op() accepts it, gates each fusion on the same
// call, plans one activation arena per backend, and runs the graph as contiguous single-backend
// splits, copying tensors across split boundaries through host memory. Adding a backend (a GPU)
// is one folder in src/backends/ implementing this class.
//
//   class MyBackend : public Backend { ... };
//   MyBackend gpu; CpuBackend cpu(4);
//   Scheduler sched({&gpu, &cpu});
//
// Addresses: a BackendBuffer's base and every address passed to compute() live in the backend's
// own address space (host memory for the CPU). Weights (kWeight) are passed as their host
// pointers (the mmap'd GGUF); a device backend uploads or maps them in prepare().
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

#include "core/status.h"
#include "graph/graph.h"

namespace minfer {

// What a device backend has done so far: command submissions, kernel dispatches, and bytes
// copied between host and device memory by write() and read() (bench's per-token costs).
struct BackendCounters {
  int64_t submissions = 0, dispatches = 0;
  int64_t replayed = 0;  // submissions of a command buffer recorded earlier (not re-recorded)
  uint64_t bytes_to_device = 0, bytes_to_host = 0;
};

struct BackendBuffer {
  void* base = nullptr;
  size_t size = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual std::string_view name() const = 0;
  // One line for -v: the backend and what it chose at run time ("cpu: kernels avx2 (this CPU:
  // ref, avx2)"). The name alone by default.
  virtual std::string describe() const { return std::string(name()); }
  // Higher wins when several backends accept a node (a GPU would say 200, the CPU says 100).
  virtual int priority() const = 0;
  // Whether this backend can execute n (its op, types, shapes) in graph g. Also asked for
  // fused nodes before the fusion pass rewrites anything.
  virtual bool supports_op(const Graph& g, const Node& n) const = 0;

  virtual Expected<BackendBuffer> alloc(size_t bytes) = 0;  // zero-filled
  virtual void free(BackendBuffer b) = 0;
  // b's contents are no longer needed: the backend may hand its memory back until b is next
  // written (reads before that see zeros or old data). The scheduler calls it on the arenas of
  // a graph when another graph runs, so idle prefill scratch does not stay resident.
  virtual void discard(BackendBuffer b) { (void)b; }
  virtual void write(void* dst, const void* host, size_t n_bytes) = 0;  // host -> backend
  virtual void read(void* host, const void* src, size_t n_bytes) = 0;   // backend -> host

  // Once per prepared graph, with the nodes this backend will run: size scratch, upload weights.
  virtual Status prepare(const Graph& g, std::span<const int> nodes) = 0;
  // Runs `nodes` of g in order. addrs[i] is node i's data (nullptr for nodes without storage).
  virtual Status compute(const Graph& g, std::span<const int> nodes, std::span<void* const> addrs) = 0;
  // Waits for submitted work (a no-op for synchronous backends).
  virtual void synchronize() {}
  // Bytes of the backend's own memory held now (a device backend: its weights, caches and
  // arenas; 0 for the host, whose memory the process reports).
  virtual size_t memory_used() const { return 0; }
  virtual BackendCounters counters() const { return {}; }
};

}  // namespace minfer
