// The clock interface. Algorithms and the transport never read time
// themselves: they take a `const Clock&` (quiche QuicClock) or a `now` passed
// down from the caller, which reads the clock once per burst.
#pragma once

#include <ctime>

#include "base/units.h"

namespace rowan {

class Clock {
 public:
  virtual ~Clock() = default;
  /// The current monotonic time. Thread-safe for the real clock.
  virtual TimePoint now() const = 0;
};

/// CLOCK_MONOTONIC, nanosecond resolution.
class MonotonicClock final : public Clock {
 public:
  TimePoint now() const override {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return TimePoint::from_ns(static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec);
  }
};

}  // namespace rowan
