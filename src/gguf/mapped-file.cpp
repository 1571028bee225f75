#include "gguf/mapped-file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace minfer {

Expected<std::unique_ptr<MappedFile>> MappedFile::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return make_error("gguf: cannot open '{}': {}", path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    return make_error("gguf: cannot stat '{}': {}", path, std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return make_error("gguf: '{}' is not a regular file", path);
  }
  auto m = std::unique_ptr<MappedFile>(new MappedFile());
  m->path_ = path;
  m->size_ = static_cast<size_t>(st.st_size);
  if (m->size_ > 0) {
    void* p = ::mmap(nullptr, m->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int e = errno;
      ::close(fd);
      return make_error("gguf: cannot map '{}' ({} bytes): {}", path, m->size_, std::strerror(e));
    }
    m->data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);  // the mapping keeps the file referenced
  return m;
}

void MappedFile::drop_pages(size_t end) const {
#if defined(MADV_DONTNEED)
  const long page = ::sysconf(_SC_PAGESIZE);
  if (!data_ || page <= 0) return;
  end = std::min(end, size_) / static_cast<size_t>(page) * static_cast<size_t>(page);
  // A read-only mapping has no private changes to lose; a failure only leaves the pages resident.
  if (end > 0) (void)::madvise(const_cast<uint8_t*>(data_), end, MADV_DONTNEED);
#else
  (void)end;
#endif
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
}

}  // namespace minfer
