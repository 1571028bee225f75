#include "hub/file-lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "hub/http-client.h"

namespace minfer::hub {

Expected<FileLock> FileLock::acquire(const std::string& path, const std::function<void()>& on_wait) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  if (ec) return make_error("cannot create the lock folder for {}: {}", path, ec.message());
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return make_error("cannot create lock file {}: {}", path, std::strerror(errno));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK) {
      const int e = errno;
      ::close(fd);
      return make_error("cannot lock {}: {}", path, std::strerror(e));
    }
    if (on_wait) on_wait();
    int r;
    while ((r = ::flock(fd, LOCK_EX)) != 0 && errno == EINTR) {
      if (http_cancelled()) {
        ::close(fd);
        return make_error("interrupted while waiting for the lock {}", path);
      }
    }
    if (r != 0) {
      const int e = errno;
      ::close(fd);
      return make_error("cannot lock {}: {}", path, std::strerror(e));
    }
  }
  return FileLock(fd);
}

FileLock::~FileLock() {
  if (fd_ >= 0) ::close(fd_);  // closing releases the flock
}

}  // namespace minfer::hub
