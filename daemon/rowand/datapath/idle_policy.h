// When rowand's packet loop sleeps, and for how long (DPDK l3fwd-power's
// idea, with NIC-style interrupt moderation on top).
//
// After traffic the loop spins kSpinPolls empty polls, then sleeps. With a
// doorbell (Worker::can_block: a local frame or a WAN datagram ends the
// sleep) it first empties the doorbell and polls once more, then blocks until
// a frame, a datagram or its next timer. Without one it sleeps in growing
// steps (5 us .. 1 ms).
//
// Wake-up coalescing (`coalesce`, [local] wake_coalesce): a loop woken for
// every frame spends most of its time waking. On the two-core testbed a
// soft-RoCE guest sends a frame every ~300 us, and each one woke both
// gateways and preempted a guest's vCPU; the gateways used 0.1-0.2 of a core
// each at 2,500 packets/s. When a sleep ended with traffic less than
// `coalesce` after it began (packets are arriving faster than that), the
// next sleep is a plain nap until `coalesce` after that wake-up, with no
// doorbell: whatever arrives meanwhile waits in the port's ring and the
// socket and is handled in one pass. A nap that finds traffic is followed by
// another; a nap that finds nothing, or a block that lasted longer than
// `coalesce`, returns to blocking. A lone packet after a quiet spell is
// therefore handled at once; under load the loop wakes at most once per
// `coalesce`, and a packet waits at most that long. Zero: never nap.
//
// Pure decision logic (times passed in); one instance per packet loop.
#pragma once

#include <algorithm>
#include <cstdint>

#include "base/units.h"

namespace rowan::gw {

class IdlePolicy {
 public:
  enum class Action : uint8_t {
    kPoll,   ///< poll again now
    kArm,    ///< empty the doorbell, then poll once more (can_block only)
    kBlock,  ///< sleep until a frame, a datagram or `duration` (can_block only)
    kNap,    ///< sleep `duration` without the doorbell (coalescing)
    kSleep,  ///< sleep `duration` (no doorbell: the back-off step)
  };
  struct Decision {
    Action action = Action::kPoll;
    Duration duration = Duration::zero();
  };

  static constexpr uint32_t kSpinPolls = 32;
  static constexpr Duration kMinSleep = Duration::from_us(5);
  static constexpr Duration kMaxSleep = Duration::from_ms(1);
  /// The longest block: the loop's own checks (publish, reload, stop) run
  /// at least this often.
  static constexpr Duration kMaxBlock = Duration::from_ms(10);

  IdlePolicy(bool can_block, Duration coalesce) : can_block_(can_block), coalesce_(coalesce) {}

  /// A poll at `now` that found work.
  void on_work(TimePoint now) noexcept {
    if (slept_ != Slept::kNo) {
      // Woken for traffic: soon after the sleep began (frequent traffic),
      // or after a nap (still under load), the next sleep is a nap.
      const bool busy = slept_ == Slept::kNap || now - sleep_start_ < coalesce_;
      nap_until_ = busy && coalesce_.ns() > 0 ? now + coalesce_ : TimePoint::zero();
    }
    slept_ = Slept::kNo;
    idle_polls_ = 0;
    step_ = kMinSleep;
    armed_ = false;
  }

  /// A poll at `now` that found nothing; `next_timer` is when the
  /// gateway's earliest timer is due. Says what to do next (the caller
  /// does it, then polls again).
  Decision on_idle(TimePoint now, TimePoint next_timer) noexcept {
    if (++idle_polls_ <= kSpinPolls) return {};
    const Duration until_timer = next_timer - now;
    if (can_block_) {
      if (nap_until_ > now) {
        const Duration d = std::min(nap_until_ - now, until_timer);
        nap_until_ = TimePoint::zero();
        idle_polls_ = 0;
        if (d.ns() <= 0) return {};
        begin_sleep(now, Slept::kNap);
        return {Action::kNap, d};
      }
      nap_until_ = TimePoint::zero();
      if (!armed_) {
        armed_ = true;
        return {Action::kArm, Duration::zero()};
      }
      const Duration d = std::min(until_timer, kMaxBlock);
      if (d.ns() <= 0) return {};
      begin_sleep(now, Slept::kBlock);
      return {Action::kBlock, d};
    }
    const Duration d = std::min(step_, until_timer);
    step_ = std::min(step_ * 2, kMaxSleep);
    if (d.ns() <= 0) return {};
    begin_sleep(now, Slept::kBlock);
    return {Action::kSleep, d};
  }

 private:
  enum class Slept : uint8_t { kNo, kBlock, kNap };
  void begin_sleep(TimePoint now, Slept kind) noexcept {
    slept_ = kind;
    sleep_start_ = now;
  }

  bool can_block_;
  Duration coalesce_;
  uint32_t idle_polls_ = 0;
  Duration step_ = kMinSleep;
  bool armed_ = false;  ///< the doorbell was emptied since the last traffic
  Slept slept_ = Slept::kNo;
  TimePoint sleep_start_;
  TimePoint nap_until_;  ///< zero: no nap pending
};

}  // namespace rowan::gw
