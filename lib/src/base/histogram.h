// A latency histogram with fixed buckets and plain counters, for the packet
// path: observe() is a short scan over constant bounds, no allocation, no
// lock. The owner's thread observes; an exporter (rowand's Prometheus
// collector) reads a copy published by that thread and turns it into
// cumulative Prometheus buckets at scrape time.
//
// Buckets follow the Prometheus convention (upper bounds, `le`), from 10 us to
// 2 s, roughly 1-2.5-5 per decade: WAN RTTs and queueing delays both fit.
//
// Threading: one writer; copy it to hand it to another thread.
#pragma once

#include <array>
#include <cstdint>

#include "base/units.h"

namespace rowan {

class LatencyHistogram {
 public:
  /// Upper bounds of the finite buckets, in nanoseconds (ascending).
  static constexpr std::array<int64_t, 18> kBoundsNs = {
      10'000,      25'000,      50'000,      100'000,     250'000,       500'000,
      1'000'000,   2'500'000,   5'000'000,   10'000'000,  25'000'000,    50'000'000,
      100'000'000, 250'000'000, 500'000'000, 750'000'000, 1'000'000'000, 2'000'000'000};
  static constexpr size_t kBuckets = kBoundsNs.size() + 1;  ///< the last one is +Inf

  /// Counts `d` (negative durations count as zero).
  void observe(Duration d) noexcept {
    const int64_t ns = d.ns() < 0 ? 0 : d.ns();
    size_t i = 0;
    while (i < kBoundsNs.size() && ns > kBoundsNs[i]) ++i;
    ++counts_[i];
    ++count_;
    sum_ns_ += static_cast<uint64_t>(ns);
  }

  /// Observations in bucket `i` alone (not cumulative); i == kBuckets-1 is +Inf.
  uint64_t bucket(size_t i) const { return counts_[i]; }
  uint64_t count() const { return count_; }
  /// Sum of all observations.
  Duration sum() const { return Duration::from_ns(static_cast<int64_t>(sum_ns_)); }

  /// Adds another histogram's counts (summing per-lcore histograms).
  void merge(const LatencyHistogram& o) noexcept {
    for (size_t i = 0; i < kBuckets; ++i) counts_[i] += o.counts_[i];
    count_ += o.count_;
    sum_ns_ += o.sum_ns_;
  }

 private:
  std::array<uint64_t, kBuckets> counts_{};
  uint64_t count_ = 0;
  uint64_t sum_ns_ = 0;
};

}  // namespace rowan
