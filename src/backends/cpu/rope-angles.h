// The cos and sin of RoPE's angles per token, kept for the next rope op that asks for the same
// positions and parameters: a layer's q and k ropes share them, and so does every later layer
// with the same base (Gemma 3's local and global layers alternate two bases, hence a few entries).
// std::cos / std::sin per (token, pair) cost ~2.5 us per decode rope and ~2% of a 512-token
// prefill; the table holds exactly what the op would compute, so reuse changes no bit.
//
//   RopeAngles cache;
//   RopeAngles::Key key{n_rot, freq_base, freq_scale, factors};
//   float* cs = cache.find(key, pos, n_tokens);   // [n_tokens][2][n_rot / 2] cos, sin, or nullptr
//   if (!cs) { cs = cache.insert(key, pos, n_tokens); /* fill it */ }
// The caller owns one per backend (not thread-safe: a backend computes one graph at a time).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace minfer::cpu {

class RopeAngles {
 public:
  struct Key {
    int n_rot = 0;
    float freq_base = 0.0f, freq_scale = 0.0f;
    const float* factors = nullptr;  // [n_rot / 2] frequency factors (compared by value) or none
  };

  // The table of these positions under key, or nullptr.
  const float* find(const Key& key, const int32_t* pos, int64_t n_tokens) const;
  // A table of [n_tokens][2][n_rot / 2] floats for the caller to fill, replacing the oldest entry.
  float* insert(const Key& key, const int32_t* pos, int64_t n_tokens);

 private:
  struct Entry {
    int n_rot = 0;  // 0: empty
    float freq_base = 0.0f, freq_scale = 0.0f;
    std::vector<float> factors;  // [n_rot / 2] or empty
    std::vector<int32_t> pos;    // [n_tokens]
    std::vector<float> cs;     // [n_tokens][2][n_rot / 2]: each token's cos, then sin
  };
  std::array<Entry, 4> entries_;
  size_t next_ = 0;  // the entry insert() replaces
};

}  // namespace minfer::cpu
