// Exponentially weighted moving average with a weight given as 1/2^shift
// (integer-only, as Linux srtt: avg += (x - avg) >> shift), for any unit type
// that can be represented as an int64 count (Duration in ns, Bytes).
//
// Units: the average is kept in the sample's own unit, scaled by 2^shift
// internally so small weights lose no precision. Samples must stay below
// 2^46 in magnitude (19 hours in ns, 70 TB in bytes).
#pragma once

#include <cstdint>

namespace rowan::cc {

class Ewma {
 public:
  /// weight = 1 / 2^shift; shift in [0, 16].
  constexpr explicit Ewma(unsigned shift) : shift_(shift > 16 ? 16 : shift) {}

  /// Adds a sample; the first sample initializes the average.
  constexpr void update(int64_t sample) {
    if (!valid_) {
      scaled_ = sample * (int64_t{1} << shift_);
      valid_ = true;
      return;
    }
    // avg_scaled += sample - avg  ==  avg_scaled += sample - avg_scaled >> shift
    scaled_ += sample - (scaled_ >> shift_);
  }
  constexpr int64_t get() const { return static_cast<int64_t>(scaled_ >> shift_); }
  constexpr bool valid() const { return valid_; }
  constexpr void reset() {
    valid_ = false;
    scaled_ = 0;
  }

 private:
  int64_t scaled_ = 0;  // |samples| < 2^46 (Duration: 19 h; Bytes: 70 TB)
  unsigned shift_;
  bool valid_ = false;
};

}  // namespace rowan::cc
