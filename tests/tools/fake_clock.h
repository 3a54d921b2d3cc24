// A clock tests drive by hand (quiche MockClock, seastar manual_clock).
#pragma once

#include "base/clock.h"

namespace rowan::test {

class FakeClock final : public Clock {
 public:
  explicit FakeClock(TimePoint start = TimePoint::from_ns(1000000000)) : now_(start) {}
  TimePoint now() const override { return now_; }
  void advance(Duration d) { now_ += d; }
  void set(TimePoint t) { now_ = t; }

 private:
  TimePoint now_;
};

}  // namespace rowan::test
