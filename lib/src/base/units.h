// Units carried in types: TimePoint, Duration, Bytes, BitsPerSec.
//
// All time is integer nanoseconds (int64: ±292 years). Rates are integer bits
// per second (uint64: up to 1.8e19 bit/s). Products of a rate and a duration
// go through 128-bit intermediates, so 400 Gbit/s × 200 ms (a 10 GB BDP) is
// exact and never overflows.
#pragma once

#include <compare>
#include <cstdint>
#include <limits>

namespace rowan {

// 128-bit intermediates for rate × time products (GCC and clang).
__extension__ typedef unsigned __int128 u128;  // NOLINT(modernize-use-using)

/// A byte count (sizes, windows, in-flight). quiche's QuicByteCount.
using Bytes = uint64_t;

/// A signed span of time in nanoseconds.
class Duration {
 public:
  constexpr Duration() = default;
  static constexpr Duration from_ns(int64_t ns) { return Duration(ns); }
  static constexpr Duration from_us(int64_t us) { return Duration(us * 1000); }
  static constexpr Duration from_ms(int64_t ms) { return Duration(ms * 1000000); }
  static constexpr Duration from_s(int64_t s) { return Duration(s * 1000000000); }
  static constexpr Duration from_seconds(double s) {
    return Duration(static_cast<int64_t>(s * 1e9));
  }
  static constexpr Duration zero() { return Duration(0); }
  static constexpr Duration infinite() { return Duration(std::numeric_limits<int64_t>::max()); }

  constexpr int64_t ns() const { return ns_; }
  constexpr int64_t us() const { return ns_ / 1000; }
  constexpr int64_t ms() const { return ns_ / 1000000; }
  constexpr double seconds() const { return static_cast<double>(ns_) * 1e-9; }
  constexpr bool is_zero() const { return ns_ == 0; }
  constexpr bool is_infinite() const { return ns_ == std::numeric_limits<int64_t>::max(); }

  constexpr Duration operator+(Duration o) const { return Duration(ns_ + o.ns_); }
  constexpr Duration operator-(Duration o) const { return Duration(ns_ - o.ns_); }
  constexpr Duration operator*(int64_t k) const { return Duration(ns_ * k); }
  constexpr Duration operator/(int64_t k) const { return Duration(ns_ / k); }
  constexpr Duration& operator+=(Duration o) {
    ns_ += o.ns_;
    return *this;
  }
  constexpr Duration& operator-=(Duration o) {
    ns_ -= o.ns_;
    return *this;
  }
  /// Scales by a real factor (gains, EWMA weights); control path and CC only.
  constexpr Duration scaled(double f) const {
    return Duration(static_cast<int64_t>(static_cast<double>(ns_) * f));
  }
  // clang-tidy 14 reports the literal 0 of the synthesized comparison.
  constexpr auto operator<=>(const Duration&) const = default;  // NOLINT(modernize-use-nullptr)

 private:
  constexpr explicit Duration(int64_t ns) : ns_(ns) {}
  int64_t ns_ = 0;
};

/// A point on a monotonic clock, nanoseconds since the clock's epoch.
class TimePoint {
 public:
  constexpr TimePoint() = default;
  static constexpr TimePoint from_ns(int64_t ns) { return TimePoint(ns); }
  static constexpr TimePoint zero() { return TimePoint(0); }
  static constexpr TimePoint infinite() { return TimePoint(std::numeric_limits<int64_t>::max()); }

  constexpr int64_t ns() const { return ns_; }
  constexpr bool is_zero() const { return ns_ == 0; }
  constexpr bool is_infinite() const { return ns_ == std::numeric_limits<int64_t>::max(); }

  constexpr TimePoint operator+(Duration d) const { return TimePoint(ns_ + d.ns()); }
  constexpr TimePoint operator-(Duration d) const { return TimePoint(ns_ - d.ns()); }
  constexpr Duration operator-(TimePoint o) const { return Duration::from_ns(ns_ - o.ns_); }
  constexpr TimePoint& operator+=(Duration d) {
    ns_ += d.ns();
    return *this;
  }
  // clang-tidy 14 reports the literal 0 of the synthesized comparison.
  constexpr auto operator<=>(const TimePoint&) const = default;  // NOLINT(modernize-use-nullptr)

 private:
  constexpr explicit TimePoint(int64_t ns) : ns_(ns) {}
  int64_t ns_ = 0;
};

/// A rate in bits per second. quiche's QuicBandwidth.
class BitsPerSec {
 public:
  constexpr BitsPerSec() = default;
  static constexpr BitsPerSec from_bps(uint64_t bps) { return BitsPerSec(bps); }
  static constexpr BitsPerSec from_mbps(uint64_t m) { return BitsPerSec(m * 1000000ULL); }
  static constexpr BitsPerSec from_gbps(uint64_t g) { return BitsPerSec(g * 1000000000ULL); }
  static constexpr BitsPerSec zero() { return BitsPerSec(0); }
  static constexpr BitsPerSec infinite() {
    return BitsPerSec(std::numeric_limits<uint64_t>::max());
  }

  /// The rate at which `bytes` are delivered in `d`; zero when d <= 0.
  static constexpr BitsPerSec from_bytes_per(Bytes bytes, Duration d) {
    if (d.ns() <= 0) return zero();
    const u128 bits = static_cast<u128>(bytes) * 8U * 1000000000U;
    const u128 r = bits / static_cast<u128>(d.ns());
    return BitsPerSec(r > std::numeric_limits<uint64_t>::max()
                          ? std::numeric_limits<uint64_t>::max()
                          : static_cast<uint64_t>(r));
  }

  constexpr uint64_t bps() const { return bps_; }
  constexpr double gbps() const { return static_cast<double>(bps_) * 1e-9; }
  constexpr bool is_zero() const { return bps_ == 0; }

  /// Bytes sent at this rate in `d` (rounded down; the BDP when d is an RTT).
  constexpr Bytes bytes_in(Duration d) const {
    if (d.ns() <= 0) return 0;
    const u128 b = static_cast<u128>(bps_) * static_cast<u128>(d.ns()) / 8000000000U;
    return b > std::numeric_limits<Bytes>::max() ? std::numeric_limits<Bytes>::max()
                                                 : static_cast<Bytes>(b);
  }
  /// Time to serialize `bytes` at this rate (rounded up); infinite at zero rate.
  constexpr Duration transfer_time(Bytes bytes) const {
    if (bps_ == 0) return Duration::infinite();
    const u128 num = static_cast<u128>(bytes) * 8000000000U;
    const u128 ns = (num + bps_ - 1) / bps_;
    return ns > static_cast<u128>(std::numeric_limits<int64_t>::max())
               ? Duration::infinite()
               : Duration::from_ns(static_cast<int64_t>(ns));
  }
  constexpr BitsPerSec scaled(double f) const {
    const double v = static_cast<double>(bps_) * f;
    return BitsPerSec(v <= 0        ? 0
                      : v >= 1.8e19 ? std::numeric_limits<uint64_t>::max()
                                    : static_cast<uint64_t>(v));
  }
  constexpr BitsPerSec operator+(BitsPerSec o) const { return BitsPerSec(bps_ + o.bps_); }
  constexpr BitsPerSec operator-(BitsPerSec o) const {
    return BitsPerSec(bps_ > o.bps_ ? bps_ - o.bps_ : 0);
  }
  // clang-tidy 14 reports the literal 0 of the synthesized comparison.
  constexpr auto operator<=>(const BitsPerSec&) const = default;  // NOLINT(modernize-use-nullptr)

 private:
  constexpr explicit BitsPerSec(uint64_t bps) : bps_(bps) {}
  uint64_t bps_ = 0;
};

}  // namespace rowan
