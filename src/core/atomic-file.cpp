// Crash-safe file writes (atomic-file.h).
#include "core/atomic-file.h"

#include <atomic>
#include <fmt/format.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

namespace minfer {
namespace {

bool write_all(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

}  // namespace

Status write_file_atomic(const std::string& link_path, const std::string& a, const void* b, size_t nb, const std::string& c) {
  std::error_code ec;
  std::string path = link_path;
  if (std::filesystem::is_symlink(link_path, ec)) {
    const auto target = std::filesystem::weakly_canonical(link_path, ec);
    if (!ec) path = target.string();
  }
  mode_t mode = 0644;
  if (struct stat st {}; ::stat(path.c_str(), &st) == 0) mode = st.st_mode & 07777;
  // A name of this call's own: writers of the same path in other processes or threads (two
  // requests saving one slot file) must not share a temporary file; O_EXCL makes sure.
  static std::atomic<uint64_t> serial{0};
  const std::string tmp = fmt::format("{}.tmp.{}.{}", path, static_cast<long>(getpid()), serial.fetch_add(1));
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return make_error("cannot write '{}': {}", tmp, std::strerror(errno));
  ::fchmod(fd, mode);
  const bool ok = write_all(fd, a.data(), a.size()) && write_all(fd, b, nb) && write_all(fd, c.data(), c.size());
  const int err = errno;
  const bool synced = ok && ::fsync(fd) == 0;
  const int sync_err = errno;
  ::close(fd);
  if (!ok || !synced) {
    ::unlink(tmp.c_str());
    return make_error("cannot write '{}': {}", path, std::strerror(ok ? sync_err : err));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    return make_error("cannot rename '{}' to '{}': {}", tmp, path, std::strerror(e));
  }
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  if (const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return Status::ok();
}

uint64_t fnv1a64(const void* data, size_t n, uint64_t h) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace minfer
