#include "registry.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "tools/fake_clock.h"

namespace rowan::cc {
namespace {

TEST(Params, RatesTakeEverySpellingOfBitsPerSecond) {
  EXPECT_EQ(parse_rate("10mbps").bps(), 10000000U);
  EXPECT_EQ(parse_rate("2gbps").bps(), 2000000000U);
  EXPECT_EQ(parse_rate("100bps").bps(), 100U);
  EXPECT_EQ(parse_rate("10mbit").bps(), 10000000U);
  EXPECT_EQ(parse_rate("1.5gbit/s").bps(), 1500000000U);
  EXPECT_THROW(parse_rate("10mbbit"), CcParamError);
}

TEST(Registry, AllAlgorithmsPresent) {
  const auto names = Registry::names();
  for (const char* n : {"cubic", "bbr", "swift", "copa", "rowan"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
    EXPECT_NE(Registry::find(n), nullptr) << n;
  }
  EXPECT_NE(std::find(names.begin(), names.end(), std::string(kDefaultAlgorithm)), names.end());
}

TEST(Registry, CreatesEachByNameWithDefaults) {
  rowan::test::FakeClock clock;
  PathHints hints{BitsPerSec::from_gbps(10), Duration::from_ms(20), 1400};
  for (const auto& n : Registry::names()) {
    auto cc = Registry::create(n, clock, hints, CcParams());
    ASSERT_NE(cc, nullptr);
    EXPECT_EQ(cc->name(), n);
    EXPECT_GE(cc->cwnd(), 1400u);
    EXPECT_GT(cc->pacing_rate().bps(), 0u);
    EXPECT_GE(cc->send_quantum(), 1400u);
  }
}

TEST(Registry, UnknownNameIsAnError) {
  rowan::test::FakeClock clock;
  try {
    Registry::create("reno-classic", clock, PathHints{}, CcParams());
    FAIL() << "expected CcParamError";
  } catch (const CcParamError& e) {
    EXPECT_NE(std::string(e.what()).find("reno-classic"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("cubic"), std::string::npos) << "lists the known names";
  }
  EXPECT_EQ(Registry::find("nope"), nullptr);
}

ControllerPtr dummy_factory(const Clock&, const PathHints&, const CcParams&) { return nullptr; }

TEST(RegistryDeathTest, DuplicateNameIsFatal) {
  EXPECT_DEATH(Registry::add("cubic", &dummy_factory), "registered twice");
}

}  // namespace
}  // namespace rowan::cc
