#include "runtime/prefix-reuse.h"

#include <algorithm>

namespace minfer {

namespace {
template <typename T>
size_t shared_prefix(std::span<const T> a, std::span<const T> b) {
  const size_t n = std::min(a.size(), b.size());
  return static_cast<size_t>(std::mismatch(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(n), b.begin()).first - a.begin());
}
}  // namespace

size_t common_prefix(std::span<const int32_t> a, std::span<const int32_t> b) { return shared_prefix(a, b); }

size_t common_prefix(std::string_view a, std::string_view b) {
  return shared_prefix(std::span<const char>(a.data(), a.size()), std::span<const char>(b.data(), b.size()));
}

size_t reusable_prefix(const Context& ctx, int seq, std::span<const int32_t> cached, std::span<const int32_t> prompt,
                       size_t limit) {
  const size_t n = std::min(common_prefix(cached, prompt), limit);
  return ctx.can_keep(seq, static_cast<int>(n)) ? n : 0;
}

Status keep_prefix(Context& ctx, int seq, std::vector<int32_t>& cached, size_t n) {
  MINFER_ASSERT(n <= cached.size());
  MINFER_TRY(ctx.seq_rm(seq, static_cast<int>(n), -1));
  cached.resize(n);
  return Status::ok();
}

}  // namespace minfer
