// Read-only private memory map of a whole file, kept for the owner's lifetime.
//
//   auto m = MappedFile::open("model.gguf");
//   if (m) use((*m)->data(), (*m)->size());
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/status.h"

namespace minfer {

class MappedFile {
 public:
  static Expected<std::unique_ptr<MappedFile>> open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // Releases this process's pages of [0, end), rounded down to whole pages; nothing may point
  // into them. Touching them again refaults them from the page cache. Best effort.
  void drop_pages(size_t end) const;

 private:
  MappedFile() = default;
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace minfer
