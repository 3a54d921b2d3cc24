// A set of uint64 values kept as sorted, disjoint, non-adjacent half-open
// ranges [lo, hi). Used for received stream offsets, acked and lost stream
// ranges, and packet-number holes.
//
// The common pattern is append at the back and remove from the front (a
// sliding window), so the ranges live in a vector with a moving head: both
// ends are amortized O(1); only inserts and removals in the middle move
// memory. Storage stops growing once it holds the number of gaps in flight.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

namespace rowan::transport {

class IntervalSet {
 public:
  struct Range {
    uint64_t lo;
    uint64_t hi;  // exclusive
  };

  explicit IntervalSet(size_t reserve = 8) { v_.reserve(reserve); }

  bool empty() const { return h_ == v_.size(); }
  size_t range_count() const { return v_.size() - h_; }
  const Range& front() const { return v_[h_]; }
  const Range& back() const { return v_.back(); }
  std::span<const Range> ranges() const { return std::span<const Range>(v_).subspan(h_); }
  /// Bytes its storage holds.
  size_t memory() const { return v_.capacity() * sizeof(Range); }
  void clear() {
    v_.clear();
    h_ = 0;
  }

  bool contains(uint64_t x) const {
    auto it = upper(x);  // first range with lo > x
    return it != begin() && (it - 1)->hi > x;
  }
  /// True when [lo, hi) is entirely inside the set.
  bool covers(uint64_t lo, uint64_t hi) const {
    if (lo >= hi) return true;
    auto it = upper(lo);
    return it != begin() && (it - 1)->hi >= hi;
  }

  void add(uint64_t lo, uint64_t hi) {
    if (lo >= hi) return;
    // Fast paths: append at the end, or extend the last range (in-order case).
    if (empty() || lo > v_.back().hi) {
      compact();
      v_.push_back({lo, hi});
      return;
    }
    if (lo >= v_.back().lo) {
      v_.back().hi = std::max(v_.back().hi, hi);
      return;
    }
    // First range whose hi >= lo (may merge), last range whose lo <= hi.
    auto first = std::lower_bound(mbegin(), v_.end(), lo,
                                  [](const Range& r, uint64_t x) { return r.hi < x; });
    auto last = first;
    while (last != v_.end() && last->lo <= hi) ++last;
    if (first == last) {
      if (first == mbegin() && h_ > 0) {  // new front: reuse the head's free slot
        v_[--h_] = Range{lo, hi};
        return;
      }
      v_.insert(first, Range{lo, hi});
      return;
    }
    first->lo = std::min(first->lo, lo);
    first->hi = std::max((last - 1)->hi, hi);
    v_.erase(first + 1, last);
  }

  void remove(uint64_t lo, uint64_t hi) {
    if (lo >= hi || empty()) return;
    auto it = std::lower_bound(mbegin(), v_.end(), lo,
                               [](const Range& r, uint64_t x) { return r.hi <= x; });
    while (it != v_.end() && it->lo < hi) {
      if (it->lo < lo && it->hi > hi) {  // split
        const Range right{hi, it->hi};
        it->hi = lo;
        v_.insert(it + 1, right);
        return;
      }
      if (it->lo < lo) {
        it->hi = lo;
        ++it;
      } else if (it->hi > hi) {
        it->lo = hi;
        ++it;
      } else if (it == mbegin()) {
        ++h_;
        it = mbegin();
      } else {
        it = v_.erase(it);
      }
    }
    compact();
  }

  /// Removes every value below x.
  void remove_below(uint64_t x) {
    while (!empty() && v_[h_].hi <= x) ++h_;
    if (!empty() && v_[h_].lo < x) v_[h_].lo = x;
    compact();
  }

  void pop_front() {
    ++h_;
    compact();
  }

  /// Index (into ranges()) of the first range with hi > x.
  size_t first_at_or_after(uint64_t x) const {
    return static_cast<size_t>(
        std::lower_bound(begin(), v_.end(), x,
                         [](const Range& r, uint64_t y) { return r.hi <= y; }) -
        begin());
  }

 private:
  using CIt = std::vector<Range>::const_iterator;
  using It = std::vector<Range>::iterator;
  CIt begin() const { return v_.begin() + static_cast<std::ptrdiff_t>(h_); }
  It mbegin() { return v_.begin() + static_cast<std::ptrdiff_t>(h_); }
  CIt upper(uint64_t x) const {
    return std::upper_bound(begin(), v_.end(), x,
                            [](uint64_t y, const Range& r) { return y < r.lo; });
  }
  // Drops the consumed head once it is at least half the storage (amortized O(1)).
  void compact() {
    if (h_ == v_.size()) {
      v_.clear();
      h_ = 0;
    } else if (h_ >= 16 && h_ * 2 >= v_.size()) {
      v_.erase(v_.begin(), mbegin());
      h_ = 0;
    }
  }

  std::vector<Range> v_;
  size_t h_ = 0;  // ranges before h_ are removed
};

}  // namespace rowan::transport
