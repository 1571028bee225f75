// An exclusive advisory lock on a file (flock), held for the object's lifetime. huggingface_hub
// (filelock) takes the same kind of lock on the same path, HF_HUB_CACHE/.locks/<repo>/<etag>.lock,
// so minfer and Python never write one blob at the same time. The lock dies with the process.
//
//   auto lock = FileLock::acquire(path, [] { std::fprintf(stderr, "waiting...\n"); });
//   if (!lock) return lock.error();
#pragma once

#include <functional>
#include <string>

#include "core/status.h"

namespace minfer::hub {

class FileLock {
 public:
  // Creates parent folders and the lock file; blocks until the lock is ours. `on_wait` runs once
  // if another process holds it.
  static Expected<FileLock> acquire(const std::string& path, const std::function<void()>& on_wait = {});
  FileLock(FileLock&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  FileLock& operator=(FileLock&&) = delete;
  FileLock(const FileLock&) = delete;
  ~FileLock();

 private:
  explicit FileLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

}  // namespace minfer::hub
