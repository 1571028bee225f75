// Deterministic random numbers for test models: xoshiro256** seeded through splitmix64 from a
// seed and a stream name, and normal deviates by Box-Muller. Identical on every machine (only
// integer arithmetic and correctly rounded libm log/sqrt/cos/sin on doubles).
//
//   TestModelRng rng(42, "blk.0.attn_q.weight");
//   double z = rng.normal();   // N(0, 1)
#pragma once

#include <cmath>
#include <cstdint>
#include <string_view>

namespace minfer {

class TestModelRng {
 public:
  TestModelRng(uint64_t seed, std::string_view stream) {
    uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a 64 of the stream name
    for (unsigned char c : stream) h = (h ^ c) * 0x100000001b3ull;
    uint64_t sm = seed ^ h;
    for (uint64_t& w : s_) w = splitmix64(sm);
  }

  uint64_t next_u64() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

  // Uniform in (0, 1]: 53 random bits, never 0 so log() is finite.
  double uniform() { return (static_cast<double>(next_u64() >> 11) + 1.0) * 0x1.0p-53; }

  double normal() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    const double r = std::sqrt(-2.0 * std::log(uniform()));
    const double theta = 6.283185307179586 * uniform();
    spare_ = r * std::sin(theta);
    has_spare_ = true;
    return r * std::cos(theta);
  }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  static uint64_t splitmix64(uint64_t& x) {
    uint64_t z = (x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }

  uint64_t s_[4];
  double spare_ = 0.0;
  bool has_spare_ = false;
};

}  // namespace minfer
