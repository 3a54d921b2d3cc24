// A small, fast, seedable PRNG for per-packet decisions (xoshiro256**, by
// Blackman and Vigna, seeded through splitmix64). Each direction owns one, so
// the same --seed and the same frame sequence give the same decisions.
#pragma once

#include <cstdint>

#include "base/units.h"

namespace rowan::wanem {

class Rng {
 public:
  explicit Rng(uint64_t seed = 1) { reseed(seed); }

  void reseed(uint64_t seed) {
    uint64_t x = seed;
    for (uint64_t& word : s_) word = splitmix64(x);
  }

  uint64_t next() {
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

  /// Uniform in [0, 1).
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  /// True with probability p (p <= 0: never, p >= 1: always).
  bool chance(double p) { return p > 0.0 && (p >= 1.0 || uniform() < p); }
  /// Uniform integer in [0, n); n > 0.
  uint64_t below(uint64_t n) {
    return static_cast<uint64_t>((static_cast<u128>(next()) * n) >> 64);
  }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  static uint64_t splitmix64(uint64_t& x) {
    uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  uint64_t s_[4]{};
};

}  // namespace rowan::wanem
