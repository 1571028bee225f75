#include "hub/digest.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <vector>

namespace minfer::hub {

Digest::Digest(Algo algo) : algo_(algo), ctx_(EVP_MD_CTX_new()) { reset(); }
Digest::~Digest() { EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(ctx_)); }

void Digest::reset() {
  EVP_DigestInit_ex(static_cast<EVP_MD_CTX*>(ctx_), algo_ == kSha256 ? EVP_sha256() : EVP_sha1(), nullptr);
}

void Digest::update(const void* data, size_t n) { EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(ctx_), data, n); }

std::string Digest::hex() {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(static_cast<EVP_MD_CTX*>(ctx_), md, &len);
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (unsigned int i = 0; i < len; ++i) {
    s += digits[md[i] >> 4];
    s += digits[md[i] & 15];
  }
  return s;
}

Expected<std::string> file_digest(const std::string& path, const ExpectedDigest& kind, size_t* n_read) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return make_error("{}: cannot open: {}", path, std::strerror(errno));
  struct stat st{};
  ::fstat(fd, &st);
  Digest d(kind.kind == ExpectedDigest::kGitBlobSha1 ? Digest::kSha1 : Digest::kSha256);
  if (kind.kind == ExpectedDigest::kGitBlobSha1) {
    const std::string head = "blob " + std::to_string(st.st_size);
    d.update(head.data(), head.size() + 1);  // with its NUL
  }
  std::vector<char> buf(1 << 20);
  size_t total = 0;
  for (;;) {
    const ssize_t r = ::read(fd, buf.data(), buf.size());
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      const int e = errno;
      ::close(fd);
      return make_error("{}: read failed: {}", path, std::strerror(e));
    }
    if (r == 0) break;
    d.update(buf.data(), static_cast<size_t>(r));
    total += static_cast<size_t>(r);
  }
  ::close(fd);
  if (n_read) *n_read = total;
  return d.hex();
}

bool is_hex(std::string_view s, size_t n) {
  if (s.size() != n) return false;
  for (char c : s)
    if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

}  // namespace minfer::hub
