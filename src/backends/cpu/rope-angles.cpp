#include "backends/cpu/rope-angles.h"

#include <algorithm>

namespace minfer::cpu {

const float* RopeAngles::find(const Key& key, const int32_t* pos, int64_t n_tokens) const {
  const size_t n_factors = key.factors ? static_cast<size_t>(key.n_rot / 2) : 0;
  for (const Entry& e : entries_)
    if (e.n_rot > 0 && e.n_rot == key.n_rot && e.freq_base == key.freq_base && e.freq_scale == key.freq_scale &&
        e.factors.size() == n_factors && std::equal(e.factors.begin(), e.factors.end(), key.factors) &&
        static_cast<int64_t>(e.pos.size()) == n_tokens && std::equal(e.pos.begin(), e.pos.end(), pos))
      return e.cs.data();
  return nullptr;
}

float* RopeAngles::insert(const Key& key, const int32_t* pos, int64_t n_tokens) {
  Entry& e = entries_[next_];
  next_ = (next_ + 1) % entries_.size();
  e.n_rot = key.n_rot;
  e.freq_base = key.freq_base;
  e.freq_scale = key.freq_scale;
  e.factors.assign(key.factors, key.factors + (key.factors ? key.n_rot / 2 : 0));
  e.pos.assign(pos, pos + n_tokens);
  e.cs.resize(static_cast<size_t>(n_tokens) * static_cast<size_t>(key.n_rot / 2) * 2);
  return e.cs.data();
}

}  // namespace minfer::cpu
