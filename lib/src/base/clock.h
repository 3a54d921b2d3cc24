// The clock interface. Algorithms and the transport never read time
// themselves: they take a `const Clock&` (quiche QuicClock) or a `now` passed
// down from the caller, which reads the clock once per burst.
#pragma once

#include <cstdint>
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

/// CLOCK_MONOTONIC minus CLOCK_REALTIME in nanoseconds, to date a kernel
/// (realtime) timestamp on the monotonic clock. Reads the realtime clock on
/// both sides of the monotonic read, up to 4 times, and keeps the tightest
/// bracket: a thread preempted between two plain reads would get an offset
/// off by the preemption, and every timestamp it converts early or late by
/// as much.
inline int64_t monotonic_minus_realtime_ns() noexcept {
  const auto ns = [](const timespec& t) {
    return static_cast<int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec;
  };
  int64_t best = 0;
  int64_t best_gap = INT64_MAX;
  for (int attempt = 0; attempt < 4 && best_gap > 2000; ++attempt) {  // 2 us: good enough
    timespec r1{};
    timespec m{};
    timespec r2{};
    clock_gettime(CLOCK_REALTIME, &r1);
    clock_gettime(CLOCK_MONOTONIC, &m);
    clock_gettime(CLOCK_REALTIME, &r2);
    const int64_t gap = ns(r2) - ns(r1);
    if (gap >= 0 && gap < best_gap) {
      best_gap = gap;
      best = ns(m) - (ns(r1) + gap / 2);
    }
  }
  return best;
}

}  // namespace rowan
