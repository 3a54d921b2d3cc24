// rowand's idle loop policy (daemon/rowand/datapath/idle_policy.h) with a fake clock:
// the spin, the doorbell arm and the block; wake-up coalescing under load
// and not for a lone packet; the timer bound; the back-off without a doorbell.
#include "datapath/idle_policy.h"

#include <gtest/gtest.h>

namespace rowan::gw {
namespace {

using Action = IdlePolicy::Action;
constexpr TimePoint kFar = TimePoint::from_ns(int64_t{1} << 60);

TimePoint at_us(int64_t us) { return TimePoint::from_ns(us * 1000); }

// Runs empty polls at `now` until the policy says something other than poll.
IdlePolicy::Decision idle_until_action(IdlePolicy& p, TimePoint now, TimePoint timer = kFar) {
  for (int i = 0; i < 1000; ++i) {
    const IdlePolicy::Decision d = p.on_idle(now, timer);
    if (d.action != Action::kPoll) return d;
  }
  ADD_FAILURE() << "the policy never stopped polling";
  return {};
}

// A policy (1 ms coalescing) that armed and blocked at 0, then was woken for
// traffic at `woken_us`.
IdlePolicy woken_at(int64_t woken_us) {
  IdlePolicy p(true, Duration::from_ms(1));
  EXPECT_EQ(idle_until_action(p, at_us(0)).action, Action::kArm);
  EXPECT_EQ(idle_until_action(p, at_us(0)).action, Action::kBlock);
  p.on_work(at_us(woken_us));
  return p;
}

TEST(IdlePolicyTest, SpinsThenArmsThenBlocksUntilTheTimerAtMostTenMs) {
  IdlePolicy p(true, Duration::from_ms(1));
  for (uint32_t i = 0; i < IdlePolicy::kSpinPolls; ++i) {
    EXPECT_EQ(p.on_idle(at_us(0), kFar).action, Action::kPoll) << i;
  }
  EXPECT_EQ(p.on_idle(at_us(0), kFar).action, Action::kArm);
  IdlePolicy::Decision d = p.on_idle(at_us(0), kFar);
  EXPECT_EQ(d.action, Action::kBlock);
  EXPECT_EQ(d.duration, IdlePolicy::kMaxBlock);
  // Armed once per quiet spell: the next sleep blocks again at once, bounded by the timer.
  d = p.on_idle(at_us(10'000), at_us(12'500));
  EXPECT_EQ(d.action, Action::kBlock);
  EXPECT_EQ(d.duration, Duration::from_us(2'500));
}

TEST(IdlePolicyTest, ALonePacketAfterAQuietSpellIsNotFollowedByANap) {
  IdlePolicy p(true, Duration::from_ms(1));
  idle_until_action(p, at_us(0));                                    // arm
  ASSERT_EQ(idle_until_action(p, at_us(0)).action, Action::kBlock);  // blocks at 0
  p.on_work(at_us(5'000));  // woken 5 ms later: traffic is sparse
  EXPECT_EQ(idle_until_action(p, at_us(5'010)).action, Action::kArm);
  EXPECT_EQ(idle_until_action(p, at_us(5'010)).action, Action::kBlock);
}

TEST(IdlePolicyTest, UnderLoadTheLoopNapsUntilOneCoalescePeriodAfterTheWakeUp) {
  IdlePolicy p = woken_at(300);  // 300 us into the block: frames are frequent
  IdlePolicy::Decision d = idle_until_action(p, at_us(320));
  EXPECT_EQ(d.action, Action::kNap);
  EXPECT_EQ(d.duration, Duration::from_us(980));  // until 1 ms after the wake-up
  // The nap found frames: nap again, one period after that pass.
  p.on_work(at_us(1'300));
  d = idle_until_action(p, at_us(1'340));
  EXPECT_EQ(d.action, Action::kNap);
  EXPECT_EQ(d.duration, Duration::from_us(960));
  // A nap that finds nothing goes back to the doorbell: arm, then block.
  EXPECT_EQ(idle_until_action(p, at_us(2'310)).action, Action::kArm);
  EXPECT_EQ(idle_until_action(p, at_us(2'310)).action, Action::kBlock);
}

TEST(IdlePolicyTest, ANapNeverOutlastsTheNextTimer) {
  IdlePolicy p = woken_at(100);
  const IdlePolicy::Decision d = idle_until_action(p, at_us(110), at_us(400));
  EXPECT_EQ(d.action, Action::kNap);
  EXPECT_EQ(d.duration, Duration::from_us(290));
}

TEST(IdlePolicyTest, ZeroCoalesceWakesForEveryFrame) {
  IdlePolicy p(true, Duration::zero());
  for (int round = 0; round < 3; ++round) {
    const TimePoint t = at_us(round * 100);
    EXPECT_EQ(idle_until_action(p, t).action, Action::kArm);
    EXPECT_EQ(idle_until_action(p, t).action, Action::kBlock);
    p.on_work(t + Duration::from_us(50));
  }
}

TEST(IdlePolicyTest, WithoutADoorbellTheSleepGrowsFromFiveUsToOneMsAndNeverNaps) {
  IdlePolicy p(false, Duration::from_ms(1));
  std::vector<int64_t> steps;
  for (int i = 0; i < 10; ++i) {
    const IdlePolicy::Decision d = idle_until_action(p, at_us(0));
    ASSERT_EQ(d.action, Action::kSleep);
    steps.push_back(d.duration.ns() / 1000);
  }
  EXPECT_EQ(steps, (std::vector<int64_t>{5, 10, 20, 40, 80, 160, 320, 640, 1000, 1000}));
  // Traffic starts the steps over; a short sleep before it does not make a nap.
  p.on_work(at_us(1));
  const IdlePolicy::Decision d = idle_until_action(p, at_us(2));
  EXPECT_EQ(d.action, Action::kSleep);
  EXPECT_EQ(d.duration, Duration::from_us(5));
}

}  // namespace
}  // namespace rowan::gw
