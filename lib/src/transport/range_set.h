// A set of uint64 stream offsets kept as disjoint, non-adjacent half-open
// ranges [lo, hi) in a B-tree (absl::btree_map, lo → hi): the received,
// acked and lost ranges of a stream.
//
// Why not IntervalSet's vector: over several paths a stream's packets arrive
// and are acknowledged in the order of the paths' delays, not of their
// offsets, so the ranges above a stream's contiguous point number about the
// packets that one path's extra delay spans on all the others (65,536 for 16
// paths of 10 Gbit/s at 100 ms in rowan-sim). A vector moves the tail on
// every insert in the middle: O(ranges) per packet, which made a 64-path
// simulation quadratic. Here every operation is O(log ranges).
//
// A set that stays empty costs nothing (the tree allocates its first node on
// the first insert and frees its last on the last erase); callers keep the
// in-order case out of it (the contiguous point moves without an insert).
#pragma once

#include <absl/container/btree_map.h>

#include <cstdint>
#include <iterator>

namespace rowan::transport {

class RangeSet {
 public:
  struct Range {
    uint64_t lo;
    uint64_t hi;  // exclusive
  };

  bool empty() const { return m_.empty(); }
  size_t range_count() const { return m_.size(); }
  Range front() const { return {m_.begin()->first, m_.begin()->second}; }
  Range back() const {
    const auto it = std::prev(m_.end());
    return {it->first, it->second};
  }
  void pop_front() { m_.erase(m_.begin()); }

  bool contains(uint64_t x) const { return covers(x, x + 1); }
  /// True when [lo, hi) is entirely inside the set.
  bool covers(uint64_t lo, uint64_t hi) const {
    if (lo >= hi) return true;
    auto it = m_.upper_bound(lo);  // first range with lo > the value
    if (it == m_.begin()) return false;
    --it;
    return it->second >= hi;
  }

  /// The first range with hi > x (the one holding x, or the next above it);
  /// false when there is none.
  bool first_at_or_after(uint64_t x, Range* out) const {
    auto it = m_.upper_bound(x);
    if (it != m_.begin()) {
      auto prev = std::prev(it);
      if (prev->second > x) it = prev;
    }
    if (it == m_.end()) return false;
    *out = {it->first, it->second};
    return true;
  }

  void add(uint64_t lo, uint64_t hi) {
    if (lo >= hi) return;
    // The ranges that touch [lo, hi): from the last one starting at or
    // below lo (if it reaches lo) to the last one starting at or below hi.
    auto it = m_.upper_bound(lo);
    if (it != m_.begin()) {
      auto prev = std::prev(it);
      if (prev->second >= lo) {
        if (prev->second >= hi) return;  // already inside
        lo = prev->first;
        it = prev;
      }
    }
    while (it != m_.end() && it->first <= hi) {
      if (it->second > hi) hi = it->second;
      it = m_.erase(it);
    }
    m_.emplace_hint(it, lo, hi);
  }

  void remove(uint64_t lo, uint64_t hi) {
    if (lo >= hi || m_.empty()) return;
    // A range from at or below lo that reaches past it keeps what lies below
    // lo and above hi. (An erase invalidates every iterator of the tree but
    // the one it returns.)
    auto it = m_.upper_bound(lo);
    if (it != m_.begin()) {
      auto prev = std::prev(it);
      if (prev->second > lo) {
        const uint64_t old_hi = prev->second;
        if (prev->first < lo) {
          prev->second = lo;
        } else {
          m_.erase(prev);
        }
        if (old_hi > hi) {
          m_.emplace(hi, old_hi);
          return;
        }
        it = m_.lower_bound(lo);
      }
    }
    while (it != m_.end() && it->first < hi) {
      if (it->second > hi) {
        const uint64_t old_hi = it->second;
        it = m_.erase(it);
        m_.emplace_hint(it, hi, old_hi);
        return;
      }
      it = m_.erase(it);
    }
  }

 private:
  absl::btree_map<uint64_t, uint64_t> m_;
};

}  // namespace rowan::transport
