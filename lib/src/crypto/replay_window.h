// Sliding anti-replay window over 64-bit packet counters (RFC 6479: a ring of
// 64-bit words; sliding the window clears whole words, never shifts bits).
//
// kBits = 2048 bits of ring, of which kWindow = 2048 - 64 counters below the
// highest one seen are tracked (one word is always being recycled). A counter
// more than kWindow below the highest is stale; a counter seen before is a
// replay. `check` is cheap and done before the AEAD; `update` only after the
// datagram authenticated, so forgeries cannot move the window.
//
// Threading: one thread per object.
#pragma once

#include <array>
#include <cstdint>

namespace rowan::crypto {

class ReplayWindow {
 public:
  static constexpr uint64_t kWordBits = 64;
  static constexpr uint64_t kWords = 32;
  static constexpr uint64_t kBits = kWords * kWordBits;
  static constexpr uint64_t kWindow = kBits - kWordBits;

  enum class Result : uint8_t { kOk, kReplay, kStale };

  /// Would `counter` be accepted? Does not change the window.
  Result check(uint64_t counter) const noexcept {
    if (!any_) return Result::kOk;
    if (counter > top_) return Result::kOk;
    if (top_ - counter >= kWindow) return Result::kStale;
    const uint64_t word = (counter / kWordBits) % kWords;
    const uint64_t bit = uint64_t{1} << (counter % kWordBits);
    return (ring_[word] & bit) != 0 ? Result::kReplay : Result::kOk;
  }

  /// Marks `counter` seen (after check returned kOk and the datagram
  /// authenticated); returns check's verdict at that moment.
  Result update(uint64_t counter) noexcept {
    const Result r = check(counter);
    if (r != Result::kOk) return r;
    if (!any_ || counter > top_) {
      const uint64_t cur = any_ ? top_ / kWordBits : 0;
      const uint64_t next = counter / kWordBits;
      if (!any_ || next - cur >= kWords) {
        ring_.fill(0);
      } else {
        for (uint64_t w = cur + 1; w <= next; ++w) ring_[w % kWords] = 0;
      }
      top_ = counter;
      any_ = true;
    }
    ring_[(counter / kWordBits) % kWords] |= uint64_t{1} << (counter % kWordBits);
    return Result::kOk;
  }

  uint64_t top() const { return top_; }

 private:
  std::array<uint64_t, kWords> ring_{};
  uint64_t top_ = 0;
  bool any_ = false;
};

}  // namespace rowan::crypto
