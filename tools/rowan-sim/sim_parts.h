// The simulator's two containers: a FIFO of datagrams in flight on a path
// (Pipe) and a log-linear latency histogram (Histogram). Used by sim.cc only.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "base/units.h"

namespace rowan::sim::detail {

/// A FIFO of datagrams in flight on one path, each with its delivery time.
class Pipe {
 public:
  explicit Pipe(uint32_t slot) : slot_(slot) { grow(256); }
  bool empty() const { return size_ == 0; }
  TimePoint head_time() const { return meta_[head_].at; }
  /// Makes room for k more and returns the buffer of the i-th free slot.
  void reserve(size_t k) {
    if (size_ + k > cap_) grow(std::max(cap_ * 2, size_ + k));
  }
  uint8_t* free_slot(size_t i) { return data_.data() + idx(size_ + i) * slot_; }
  /// Appends the datagram already written in free_slot(from).
  void commit(size_t from, TimePoint at, uint32_t len, uint32_t wire_len) {
    if (from != 0) std::memmove(free_slot(0), free_slot(from), len);
    meta_[idx(size_)] = Meta{at, len, wire_len};
    ++size_;
  }
  const uint8_t* head_data() const { return data_.data() + head_ * slot_; }
  uint32_t head_len() const { return meta_[head_].len; }
  void pop() {
    head_ = (head_ + 1) & (cap_ - 1);
    --size_;
  }
  uint32_t slot_size() const { return slot_; }
  /// Drops everything in it (a cut link); returns how many.
  size_t clear() {
    const size_t n = size_;
    head_ = 0;
    size_ = 0;
    return n;
  }

 private:
  struct Meta {
    TimePoint at;
    uint32_t len;
    uint32_t wire_len;
  };
  size_t idx(size_t i) const { return (head_ + i) & (cap_ - 1); }
  void grow(size_t need) {
    size_t cap = 1;
    while (cap < need) cap <<= 1;
    std::vector<Meta> meta(cap);
    std::vector<uint8_t> data(cap * slot_);
    for (size_t i = 0; i < size_; ++i) {
      meta[i] = meta_[idx(i)];
      std::memcpy(data.data() + i * slot_, data_.data() + idx(i) * slot_, meta_[idx(i)].len);
    }
    meta_.swap(meta);
    data_.swap(data);
    cap_ = cap;
    head_ = 0;
  }
  uint32_t slot_;
  std::vector<Meta> meta_;
  std::vector<uint8_t> data_;
  size_t cap_ = 0, head_ = 0, size_ = 0;
};

/// Log-linear histogram of non-negative nanosecond values (≤ 3% error).
class Histogram {
 public:
  void add(int64_t v) {
    ++count_;
    ++bins_[index(static_cast<uint64_t>(std::max<int64_t>(v, 0)))];
  }
  uint64_t count() const { return count_; }
  double quantile(double q) const {
    if (count_ == 0) return 0;
    const auto target = static_cast<uint64_t>(std::ceil(q * static_cast<double>(count_)));
    uint64_t seen = 0;
    for (size_t i = 0; i < bins_.size(); ++i) {
      seen += bins_[i];
      if (seen >= target && bins_[i] > 0) return value(i);
    }
    return value(bins_.size() - 1);
  }

 private:
  static size_t index(uint64_t v) {
    if (v < 64) return v;
    const int e = 63 - __builtin_clzll(v);  // >= 6
    return 64 + static_cast<size_t>(e - 6) * 32 + ((v >> (e - 5)) & 31);
  }
  static double value(size_t i) {
    if (i < 64) return static_cast<double>(i);
    const int e = static_cast<int>((i - 64) / 32) + 6;
    const uint64_t sub = (i - 64) % 32;
    const double lo = std::ldexp(static_cast<double>(32 + sub), e - 5);
    return lo + std::ldexp(0.5, e - 5);
  }
  std::vector<uint64_t> bins_ = std::vector<uint64_t>(64 + 58 * 32, 0);
  uint64_t count_ = 0;
};

}  // namespace rowan::sim::detail
