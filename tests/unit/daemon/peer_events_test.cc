// PeerEvents: up, down, handshakes and peer restarts each give one line with
// the peer's name when they happen, and a flapping peer is rate-limited with
// the count of what was left out.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "datapath/peer_events.h"

namespace rowan::gw {
namespace {

std::vector<std::string> texts(const std::vector<PeerEvents::Line>& lines) {
  std::vector<std::string> out;
  for (const auto& l : lines) out.push_back(l.text);
  return out;
}

TEST(PeerEvents, EachEventOnceWithThePeersName) {
  PeerEvents ev("site-b");
  TimePoint t = TimePoint::from_ns(1'000'000'000);
  PeerEvents::Observation o;
  EXPECT_TRUE(ev.observe(o, t).empty());  // waiting: nothing to say
  o.up = o.seen = true;
  o.handshakes = 1;
  auto lines = ev.observe(o, t);
  EXPECT_EQ(texts(lines),
            (std::vector<std::string>{
                "peer site-b: up", "peer site-b: link-security handshake completed (1 so far)"}));
  EXPECT_EQ(lines[0].level, PeerEvents::Level::kInfo);
  EXPECT_TRUE(ev.observe(o, t + Duration::from_ms(100)).empty());  // nothing changed
  t = t + Duration::from_s(20);
  o.up = false;
  o.outages = 1;
  lines = ev.observe(o, t);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].text, "peer site-b: down: no datagram for 3 s (outage 1)");
  EXPECT_EQ(lines[0].level, PeerEvents::Level::kWarn);
  t = t + Duration::from_s(20);
  o.up = true;
  o.last_outage = Duration::from_ms(4500);
  o.peer_restarts = 1;
  EXPECT_EQ(texts(ev.observe(o, t)),
            (std::vector<std::string>{
                "peer site-b: up again after an outage of 4.5 s (1 outage(s) so far)",
                "peer site-b: the peer restarted (a new incarnation); its transport is reset"}));
}

TEST(PeerEvents, AFlappingPeerIsRateLimited) {
  PeerEvents ev("b");
  TimePoint t = TimePoint::from_ns(1'000'000'000);
  PeerEvents::Observation o;
  int lines = 0;
  // Up and down every second for 9 s: one "up" and one "down" line.
  for (int i = 0; i < 18; ++i) {
    o.up = !o.up;
    o.seen = true;
    if (!o.up) ++o.outages;
    lines += static_cast<int>(ev.observe(o, t).size());
    t = t + Duration::from_ms(500);
  }
  EXPECT_EQ(lines, 2);
  // After the interval, the next down says how many were left out.
  t = t + PeerEvents::kMinInterval;
  o.up = true;
  (void)ev.observe(o, t);
  o.up = false;
  ++o.outages;
  const auto out = ev.observe(o, t);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_NE(out[0].text.find("(8 more like it in the last"), std::string::npos) << out[0].text;
}

// A path's transitions: one line each, with the peer's and the link's
// name; a flapping path is rate-limited on its own, without holding back
// another path's lines.
TEST(PeerEvents, PathTransitionsOnceEachPerPathRateLimited) {
  PeerEvents ev("site-b");
  TimePoint t = TimePoint::from_ns(1'000'000'000);
  auto lines = ev.path_event(1, "wan1", false, t);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].level, PeerEvents::Level::kWarn);
  EXPECT_EQ(lines[0].text.rfind("peer site-b: path 1 (link wan1) down", 0), 0u) << lines[0].text;
  lines = ev.path_event(1, "wan1", true, t + Duration::from_s(2));
  EXPECT_EQ(texts(lines), std::vector<std::string>{"peer site-b: path 1 (link wan1) up again"});
  EXPECT_EQ(lines[0].level, PeerEvents::Level::kInfo);
  // Flapping within kMinInterval: left out and counted...
  EXPECT_TRUE(ev.path_event(1, "wan1", false, t + Duration::from_s(3)).empty());
  EXPECT_TRUE(ev.path_event(1, "wan1", true, t + Duration::from_s(4)).empty());
  // ...while path 0's first transition is logged at once.
  EXPECT_EQ(ev.path_event(0, "wan0", false, t + Duration::from_s(4)).size(), 1u);
  lines = ev.path_event(1, "wan1", false, t + Duration::from_s(11));
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].text.find("(1 more like it in the last"), std::string::npos) << lines[0].text;
}

}  // namespace
}  // namespace rowan::gw
