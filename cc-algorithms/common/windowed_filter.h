// Windowed running max / min filter: the best value seen over the last
// `window` of time (or rounds), kept as the three best samples in successive
// sub-windows so an old best expires gracefully (Kathleen Nichols' algorithm
// as used by Linux lib/minmax.c and quiche's windowed_filter.h). O(1) per
// update, fixed size, no allocation.
//
// Units: `T` is the sample (BitsPerSec, Duration, Bytes, ...); `Time` is what
// the window is measured in (TimePoint, or a round count as uint64_t) and
// `Delta` is the window length's type (Duration, or uint64_t rounds).
#pragma once

#include <cstdint>
#include <functional>

namespace rowan::cc {

/// Compare(a, b) is true when a is at least as good as b (>= for max, <= for min).
template <typename T>
struct MaxFilterCompare {
  constexpr bool operator()(const T& a, const T& b) const { return a >= b; }
};
template <typename T>
struct MinFilterCompare {
  constexpr bool operator()(const T& a, const T& b) const { return a <= b; }
};

template <typename T, typename Compare, typename Time, typename Delta>
class WindowedFilter {
 public:
  /// `window`: how long a sample may stay the best. `zero_value`: what get()
  /// returns before the first sample.
  constexpr WindowedFilter(Delta window, T zero_value, Time zero_time)
      : window_(window),
        zero_value_(zero_value),
        estimates_{{zero_value, zero_time}, {zero_value, zero_time}, {zero_value, zero_time}} {}

  /// Adds a sample taken at `now`. Times must not go backwards.
  constexpr void update(T sample, Time now) {
    // Reset on the first sample, on a new best, or when even the third-best
    // estimate has expired.
    if (empty_ || Compare()(sample, estimates_[0].value) || now - estimates_[2].time > window_) {
      reset(sample, now);
      return;
    }
    if (Compare()(sample, estimates_[1].value)) {
      estimates_[1] = {sample, now};
      estimates_[2] = estimates_[1];
    } else if (Compare()(sample, estimates_[2].value)) {
      estimates_[2] = {sample, now};
    }
    // Expire and age the estimates.
    if (now - estimates_[0].time > window_) {
      // The best is out of the window: promote the others; the newest sample
      // becomes the third.
      estimates_[0] = estimates_[1];
      estimates_[1] = estimates_[2];
      estimates_[2] = {sample, now};
      if (now - estimates_[0].time > window_) {
        estimates_[0] = estimates_[1];
        estimates_[1] = estimates_[2];
      }
      return;
    }
    if (estimates_[1].value == estimates_[0].value && now - estimates_[1].time > window_ / 4) {
      // A quarter of the window passed without a second-best: take one.
      estimates_[1] = {sample, now};
      estimates_[2] = estimates_[1];
      return;
    }
    if (estimates_[2].value == estimates_[1].value && now - estimates_[2].time > window_ / 2) {
      // Half the window passed without a third-best: take one.
      estimates_[2] = {sample, now};
    }
  }

  /// Forgets everything and starts over from `sample`.
  constexpr void reset(T sample, Time now) {
    empty_ = false;
    estimates_[0] = estimates_[1] = estimates_[2] = {sample, now};
  }
  constexpr void clear() {
    empty_ = true;
    estimates_[0].value = estimates_[1].value = estimates_[2].value = zero_value_;
  }

  constexpr T get() const { return estimates_[0].value; }
  constexpr T second_best() const { return estimates_[1].value; }
  constexpr T third_best() const { return estimates_[2].value; }
  constexpr Time best_time() const { return estimates_[0].time; }
  constexpr bool empty() const { return empty_; }
  constexpr void set_window(Delta window) { window_ = window; }

 private:
  struct Sample {
    T value;
    Time time;
  };
  Delta window_;
  T zero_value_;
  Sample estimates_[3];
  bool empty_ = true;
};

/// Windowed max over a count of rounds (BBR's BtlBw filter).
template <typename T>
using RoundMaxFilter = WindowedFilter<T, MaxFilterCompare<T>, uint64_t, uint64_t>;
/// Windowed min over time (min-RTT filters).
template <typename T, typename Time, typename Delta>
using TimeMinFilter = WindowedFilter<T, MinFilterCompare<T>, Time, Delta>;
template <typename T, typename Time, typename Delta>
using TimeMaxFilter = WindowedFilter<T, MaxFilterCompare<T>, Time, Delta>;

}  // namespace rowan::cc
