// The sampler's random numbers: xoshiro256** (Blackman & Vigna, 2018) with its 256-bit state
// filled by splitmix64 from a 64-bit seed. Both are a few lines of integer arithmetic with a
// published reference, so a seed gives the same draws on every machine, compiler and standard
// library (std::uniform_real_distribution, by contrast, differs between libstdc++ and libc++).
//
//   Rng rng(42);
//   double u = rng.next_double();   // [0, 1), 53 random bits
//   uint64_t seed = random_seed();   // for "seed -1": one value from std::random_device
#pragma once

#include <array>
#include <cstdint>

namespace minfer {

// One step of splitmix64 (Steele, Lea & Flood, 2014): advances `state`, returns the output.
uint64_t splitmix64_next(uint64_t& state);

class Rng {
 public:
  // State words s[0..3] are four consecutive splitmix64 outputs starting from `seed`.
  explicit Rng(uint64_t seed = 0);
  // Raw state, for tests against the published reference vectors.
  static Rng from_state(const std::array<uint64_t, 4>& s);

  uint64_t next_u64();
  // Uniform in [0, 1): the top 53 bits of next_u64() times 2^-53, exact in a double.
  double next_double();

  const std::array<uint64_t, 4>& state() const { return s_; }
  bool operator==(const Rng&) const = default;

 private:
  std::array<uint64_t, 4> s_{};
};

// A seed from std::random_device (64 bits from two 32-bit draws).
uint64_t random_seed();

}  // namespace minfer
