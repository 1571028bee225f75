#include "tokenizer/special-tokens.h"

#include <algorithm>
#include <cstring>

namespace minfer {

SpecialMatcher::SpecialMatcher(const Vocab& v) {
  std::vector<int32_t> ids;
  for (int32_t id = 0; id < v.n; ++id) {
    // A duplicated text is matched as the id the vocabulary maps it to (the last one).
    if (v.is_special(id) && v.by_text.find(v.token(id)) == id) ids.push_back(id);
  }
  std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) {
    const std::string_view ta = v.token(a), tb = v.token(b);
    if (ta[0] != tb[0]) return static_cast<uint8_t>(ta[0]) < static_cast<uint8_t>(tb[0]);
    return ta.size() > tb.size();
  });
  for (int32_t id : ids) {
    const std::string_view t = v.token(id);
    const bool user = !(v.attr[id] & (kAttrControl | kAttrUnknown));
    entries_.push_back({uint32_t(buf_.size()), uint32_t(t.size()), id, user});
    buf_.append(t);
    any_user_defined_ |= user;
  }
  size_t e = 0;
  for (int b = 0; b < 256; ++b) {
    group_[b] = static_cast<uint32_t>(e);
    while (e < entries_.size() && static_cast<uint8_t>(buf_[entries_[e].off]) == b) ++e;
  }
  group_[256] = static_cast<uint32_t>(e);
}

SpecialMatcher::Hit SpecialMatcher::find(std::string_view text, size_t from, bool parse_special) const {
  if (entries_.empty() || (!parse_special && !any_user_defined_)) return {};
  const char* s = text.data();
  const size_t n = text.size();
  for (size_t i = from; i < n; ++i) {
    const uint8_t c = static_cast<uint8_t>(s[i]);
    for (uint32_t k = group_[c]; k < group_[c + 1]; ++k) {
      const Entry& e = entries_[k];
      if (!parse_special && !e.user_defined) continue;
      if (e.len <= n - i && std::memcmp(s + i, buf_.data() + e.off, e.len) == 0) return {i, e.len, e.id};
    }
  }
  return {};
}

}  // namespace minfer
