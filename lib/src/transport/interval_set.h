// A set of uint64 values kept as sorted, disjoint, non-adjacent half-open
// ranges [lo, hi). Used for received stream offsets, acked and lost stream
// ranges, and packet-number holes. Storage is a vector reserved up front;
// after warm-up it stops growing (the number of ranges is bounded by the
// number of gaps in flight).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace rowan::transport {

class IntervalSet {
 public:
  struct Range {
    uint64_t lo;
    uint64_t hi;  // exclusive
  };

  explicit IntervalSet(size_t reserve = 8) { v_.reserve(reserve); }

  bool empty() const { return v_.empty(); }
  size_t range_count() const { return v_.size(); }
  const Range& front() const { return v_.front(); }
  const Range& back() const { return v_.back(); }
  const std::vector<Range>& ranges() const { return v_; }
  void clear() { v_.clear(); }

  bool contains(uint64_t x) const {
    auto it = upper(x);  // first range with lo > x
    return it != v_.begin() && (it - 1)->hi > x;
  }
  /// True when [lo, hi) is entirely inside the set.
  bool covers(uint64_t lo, uint64_t hi) const {
    if (lo >= hi) return true;
    auto it = upper(lo);
    return it != v_.begin() && (it - 1)->hi >= hi;
  }

  void add(uint64_t lo, uint64_t hi) {
    if (lo >= hi) return;
    // Fast path: append at the end (the common in-order case).
    if (v_.empty() || lo > v_.back().hi) {
      v_.push_back({lo, hi});
      return;
    }
    if (lo >= v_.back().lo) {
      v_.back().hi = std::max(v_.back().hi, hi);
      return;
    }
    // First range whose hi >= lo (may merge), last range whose lo <= hi.
    auto first = std::lower_bound(v_.begin(), v_.end(), lo,
                                  [](const Range& r, uint64_t x) { return r.hi < x; });
    auto last = first;
    while (last != v_.end() && last->lo <= hi) ++last;
    if (first == last) {
      v_.insert(first, Range{lo, hi});
      return;
    }
    first->lo = std::min(first->lo, lo);
    first->hi = std::max((last - 1)->hi, hi);
    v_.erase(first + 1, last);
  }

  void remove(uint64_t lo, uint64_t hi) {
    if (lo >= hi || v_.empty()) return;
    auto it = std::lower_bound(v_.begin(), v_.end(), lo,
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
      } else {
        it = v_.erase(it);
      }
    }
  }

  /// Removes every value below x.
  void remove_below(uint64_t x) {
    size_t n = 0;
    while (n < v_.size() && v_[n].hi <= x) ++n;
    if (n > 0) v_.erase(v_.begin(), v_.begin() + static_cast<std::ptrdiff_t>(n));
    if (!v_.empty() && v_.front().lo < x) v_.front().lo = x;
  }

  void pop_front() { v_.erase(v_.begin()); }

  /// Index of the first range with hi > x (ranges at or after x).
  size_t first_at_or_after(uint64_t x) const {
    return static_cast<size_t>(
        std::lower_bound(v_.begin(), v_.end(), x,
                         [](const Range& r, uint64_t y) { return r.hi <= y; }) -
        v_.begin());
  }

 private:
  std::vector<Range>::const_iterator upper(uint64_t x) const {
    return std::upper_bound(v_.begin(), v_.end(), x,
                            [](uint64_t y, const Range& r) { return y < r.lo; });
  }
  std::vector<Range> v_;
};

}  // namespace rowan::transport
