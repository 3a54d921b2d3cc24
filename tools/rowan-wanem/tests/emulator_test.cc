// Unit tests of the control surface: settings by key, atomic updates, JSON
// requests, flap schedules.
#include "emulator.h"

#include <gtest/gtest.h>

#include "parse.h"

namespace rowan::wanem {
namespace {

using nlohmann::json;

TimePoint t0() { return TimePoint::from_ns(5000000000); }

TEST(EmulatorTest, SetAppliesToBothOrOneDirection) {
  Emulator emu(64, 1);
  emu.set({{"rate", "100mbit"}, {"delay", "10ms"}, {"b2a.loss", "1%"}}, t0());
  EXPECT_EQ(emu.dir(kA2B).settings().rate, BitsPerSec::from_mbps(100));
  EXPECT_EQ(emu.dir(kB2A).settings().rate, BitsPerSec::from_mbps(100));
  EXPECT_EQ(emu.dir(kA2B).settings().delay, Duration::from_ms(10));
  EXPECT_DOUBLE_EQ(emu.dir(kA2B).settings().loss, 0.0);
  EXPECT_DOUBLE_EQ(emu.dir(kB2A).settings().loss, 0.01);
}

TEST(EmulatorTest, SetIsAllOrNothing) {
  Emulator emu(64, 1);
  EXPECT_THROW(emu.set({{"rate", "100mbit"}, {"a2b.bogus", "1"}}, t0()), ParseError);
  EXPECT_THROW(emu.set({{"rate", "100mbit"}, {"loss", "150%"}}, t0()), ParseError);
  EXPECT_TRUE(emu.dir(kA2B).settings().rate.is_zero());
}

TEST(EmulatorTest, HandlesJsonRequests) {
  Emulator emu(64, 1);
  bool quit = false;
  json r = emu.handle(
      json{{"cmd", "set"}, {"settings", {{"a2b.delay", "5ms"}, {"queue", "64KiB"}}}}, t0(), &quit);
  EXPECT_TRUE(r["ok"].get<bool>()) << r.dump();
  EXPECT_EQ(r["settings"]["a2b"]["delay"], "5ms");
  EXPECT_EQ(r["settings"]["b2a"]["queue"], 65536);
  r = emu.handle(json{{"cmd", "get"}}, t0(), &quit);
  EXPECT_TRUE(r["ok"].get<bool>());
  EXPECT_TRUE(r["stats"]["a2b"].contains("dropped"));
  EXPECT_EQ(r["stats"]["a2b"]["forwarded_frames"], 0);
  r = emu.handle(json{{"cmd", "set"}, {"settings", {{"loss", "x"}}}}, t0(), &quit);
  EXPECT_FALSE(r["ok"].get<bool>());
  EXPECT_NE(r["error"].get<std::string>().find("probability"), std::string::npos);
  r = emu.handle(json{{"cmd", "nope"}}, t0(), &quit);
  EXPECT_FALSE(r["ok"].get<bool>());
  r = emu.handle(json::array(), t0(), &quit);
  EXPECT_FALSE(r["ok"].get<bool>());
  EXPECT_FALSE(quit);
  emu.handle(json{{"cmd", "quit"}}, t0(), &quit);
  EXPECT_TRUE(quit);
}

TEST(EmulatorTest, FlapTakesTheLinkDownForItsLength) {
  Emulator emu(64, 1);
  bool quit = false;
  json r =
      emu.handle(json{{"cmd", "flap"}, {"dir", "a2b"}, {"for", "2s"}, {"in", "1s"}}, t0(), &quit);
  ASSERT_TRUE(r["ok"].get<bool>()) << r.dump();
  EXPECT_TRUE(emu.dir(kA2B).settings().up);
  EXPECT_EQ(emu.next_event(), t0() + Duration::from_s(1));
  emu.run_schedule(t0() + Duration::from_s(1));
  EXPECT_FALSE(emu.dir(kA2B).settings().up);
  EXPECT_TRUE(emu.dir(kB2A).settings().up);
  emu.run_schedule(t0() + Duration::from_ms(2999));
  EXPECT_FALSE(emu.dir(kA2B).settings().up);
  emu.run_schedule(t0() + Duration::from_s(3));
  EXPECT_TRUE(emu.dir(kA2B).settings().up);
  EXPECT_TRUE(emu.next_event().is_infinite());
}

TEST(EmulatorTest, PeriodicFlaps) {
  Emulator emu(64, 1);
  emu.flap_every(Duration::from_s(10), Duration::from_s(1), kDirMaskBoth, t0());
  for (int k = 1; k <= 3; ++k) {
    const TimePoint down = t0() + Duration::from_s(int64_t{10} * k);
    emu.run_schedule(down - Duration::from_ns(1));
    EXPECT_TRUE(emu.dir(kA2B).settings().up);
    emu.run_schedule(down);
    EXPECT_FALSE(emu.dir(kA2B).settings().up);
    EXPECT_FALSE(emu.dir(kB2A).settings().up);
    emu.run_schedule(down + Duration::from_s(1));
    EXPECT_TRUE(emu.dir(kB2A).settings().up);
  }
  EXPECT_THROW(emu.flap_every(Duration::from_s(1), Duration::from_s(2), 3, t0()), ParseError);
}

TEST(EmulatorTest, LinkCommand) {
  Emulator emu(64, 1);
  bool quit = false;
  emu.handle(json{{"cmd", "link"}, {"state", "down"}}, t0(), &quit);
  EXPECT_FALSE(emu.dir(kA2B).settings().up);
  EXPECT_FALSE(emu.dir(kB2A).settings().up);
  emu.set({{"b2a.link", "up"}}, t0());
  EXPECT_TRUE(emu.dir(kB2A).settings().up);
}

}  // namespace
}  // namespace rowan::wanem
