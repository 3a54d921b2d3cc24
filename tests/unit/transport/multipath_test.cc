// Several paths per connection on a FakeClock, one LoopbackLink per path:
// per-path packet-number spaces, the scheduler, failover and rejoin.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "harness.h"

namespace rowan::test {
namespace {

using transport::Connection;
using transport::PathConfig;
using transport::PathEvent;
using transport::PathId;
using transport::PathState;
using transport::TransportConfig;
namespace wire = transport::wire;

TransportConfig multi_config(const std::vector<Duration>& rtts, uint64_t rate_bps) {
  TransportConfig c = test_config(Bytes{256} * 1472, rate_bps);
  for (Duration r : rtts) c.paths.push_back(PathConfig{BitsPerSec::from_mbps(100), r});
  return c;
}

// Two connections joined by one LoopbackLink per path.
struct MultiPair {
  MultiPair(const TransportConfig& c, const std::vector<Duration>& one_way, uint64_t seed = 1)
      : a(c, clock, clock.now()), b(c, clock, clock.now()) {
    for (size_t i = 0; i < one_way.size(); ++i) {
      links.push_back(std::make_unique<io::LoopbackLink>(2048, 8192, seed + i));
      delays.push_back(one_way[i]);
      set_path(i, true);
      ios_a.push_back(&links[i]->a());
      ios_b.push_back(&links[i]->b());
    }
    da = std::make_unique<transport::Driver>(a, ios_a);
    db = std::make_unique<transport::Driver>(b, ios_b);
  }
  /// Path i carries everything (up) or nothing (down), both directions.
  void set_path(size_t i, bool alive) {
    io::Impairment imp;
    imp.delay = delays[i];
    imp.loss = alive ? 0.0 : 1.0;
    links[i]->set_impairment(0, imp);
    links[i]->set_impairment(1, imp);
  }
  bool run_until(const std::function<bool()>& done, Duration limit) {
    const TimePoint end = clock.now() + limit;
    while (!done()) {
      if (on_step) on_step();
      TimePoint next = std::min(da->poll(clock.now()), db->poll(clock.now()));
      if (done()) break;
      for (auto& l : links) next = std::min({next, l->a().next_rx_time(), l->b().next_rx_time()});
      if (next > end) {
        clock.set(end);
        da->poll(clock.now());
        db->poll(clock.now());
        return done();
      }
      if (next <= clock.now()) {
        if (++stuck > 100000) return false;
        continue;
      }
      stuck = 0;
      clock.set(next);
    }
    return true;
  }

  FakeClock clock;
  Connection a;
  Connection b;
  std::vector<std::unique_ptr<io::LoopbackLink>> links;
  std::vector<Duration> delays;
  std::vector<io::PacketIo*> ios_a, ios_b;
  std::unique_ptr<transport::Driver> da, db;
  std::function<void()> on_step;
  int stuck = 0;
};

struct Bulk {
  MultiPair& p;
  Writer writer;
  Reader reader;
  Bulk(MultiPair& pair, uint64_t total) : p(pair), writer{pair.a, 0, total}, reader{pair.b} {
    p.on_step = [this] {
      writer.pump(p.clock.now());
      reader.pump(p.clock.now());
    };
  }
  bool done() const { return reader.fin[0] && reader.got[0] == writer.total; }
  bool run(Duration limit) {
    return p.run_until([this] { return done(); }, limit);
  }
};

TEST(Multipath, ReorderingBetweenPathsIsNeverLoss) {
  // 5 ms and 30 ms one way, each path paced at 20 Mbit/s: packets of one
  // stream arrive 25 ms out of order between the paths, all the time.
  const TransportConfig c =
      multi_config({Duration::from_ms(10), Duration::from_ms(60)}, 20'000'000);
  MultiPair p(c, {Duration::from_ms(5), Duration::from_ms(30)});
  Bulk t(p, 4'000'000);
  ASSERT_TRUE(t.run(Duration::from_s(20)));
  EXPECT_EQ(t.reader.bad, 0U);
  const auto& s0 = p.a.path_stats(PathId{0});
  const auto& s1 = p.a.path_stats(PathId{1});
  EXPECT_GT(s0.bytes_acked, 1'000'000U);
  EXPECT_GT(s1.bytes_acked, 500'000U);
  EXPECT_EQ(p.a.stats().lost_packets, 0U);
  EXPECT_EQ(p.a.stats().spurious_losses, 0U);
  EXPECT_EQ(p.a.stats().retransmitted_bytes, 0U);
  // Each path measures its own RTT.
  EXPECT_NEAR(p.a.path_stats(PathId{0}).min_rtt.seconds(), 0.010, 0.002);
  EXPECT_NEAR(p.a.path_stats(PathId{1}).min_rtt.seconds(), 0.060, 0.002);
  PathEvent ev;
  EXPECT_FALSE(p.a.next_path_event(&ev));
}

// Time to move `total` bytes over paths of these one-way delays, each paced
// at 20 Mbit/s.
Duration transfer_time(const std::vector<Duration>& one_way, uint64_t total) {
  std::vector<Duration> rtts;
  for (Duration d : one_way) rtts.push_back(d * 2);
  MultiPair p(multi_config(rtts, 20'000'000), one_way);
  Bulk t(p, total);
  const TimePoint start = p.clock.now();
  EXPECT_TRUE(t.run(Duration::from_s(60)));
  EXPECT_EQ(t.reader.bad, 0U);
  return p.clock.now() - start;
}

TEST(Multipath, StripingAddsThePathsRates) {
  const uint64_t total = 4'000'000;
  const Duration one = transfer_time({Duration::from_ms(10)}, total);
  const Duration two = transfer_time({Duration::from_ms(10), Duration::from_ms(15)}, total);
  // Two equal-rate paths: about half the time (one RTT of start-up aside).
  const double ratio = one.seconds() / two.seconds();
  EXPECT_GE(ratio, 1.8) << one.seconds() << " s on one path, " << two.seconds() << " s on two";
}

TEST(Multipath, LittleDataTakesOnlyTheFastestPath) {
  // 20 kB every 200 ms: the 10 ms path delivers each burst well before the
  // 50 ms path could, so the slow path carries no stream data.
  const TransportConfig c =
      multi_config({Duration::from_ms(20), Duration::from_ms(100)}, 50'000'000);
  MultiPair p(c, {Duration::from_ms(10), Duration::from_ms(50)});
  Reader reader{p.b};
  std::vector<uint8_t> buf(20'000);
  uint64_t written = 0;
  for (int i = 0; i < 10; ++i) {
    for (size_t k = 0; k < buf.size(); ++k) buf[k] = pattern(0, written + k);
    ASSERT_EQ(p.a.write(0, buf.data(), buf.size(), false, p.clock.now()), buf.size());
    written += buf.size();
    p.on_step = [&] { reader.pump(p.clock.now()); };
    const TimePoint until = p.clock.now() + Duration::from_ms(200);
    p.run_until([&] { return p.clock.now() >= until; }, Duration::from_ms(200));
  }
  EXPECT_EQ(reader.got[0], written);
  EXPECT_EQ(reader.bad, 0U);
  EXPECT_EQ(p.a.path_stats(PathId{1}).bytes_acked, 0U);
  EXPECT_GT(p.a.path_stats(PathId{0}).bytes_acked, written);
}

TEST(Multipath, DeadPathGoesDownItsDataMovesAndItRejoins) {
  TransportConfig c = multi_config({Duration::from_ms(20), Duration::from_ms(20)}, 20'000'000);
  c.path_down_floor = Duration::from_ms(100);
  c.path_probe_max = Duration::from_ms(400);
  MultiPair p(c, {Duration::from_ms(10), Duration::from_ms(10)});
  Bulk t(p, 8'000'000);
  p.run_until([&] { return p.b.stats().stream_bytes_received > 1'000'000; }, Duration::from_s(10));
  p.set_path(1, false);
  const TimePoint cut = p.clock.now();
  PathEvent ev;
  ASSERT_TRUE(p.run_until([&] { return p.a.path_stats(PathId{1}).state == PathState::kDown; },
                          Duration::from_s(2)));
  // max(3 x 20 ms, 100 ms) after the last ACK, which came about 20 ms before the cut.
  EXPECT_LE((p.clock.now() - cut).seconds(), 0.2);
  ASSERT_TRUE(p.a.next_path_event(&ev));
  EXPECT_EQ(ev.path, PathId{1});
  EXPECT_EQ(ev.state, PathState::kDown);
  EXPECT_FALSE(p.a.next_path_event(&ev));  // once
  // The survivor carries everything meanwhile: delivery goes on.
  const uint64_t at_down = p.b.stats().stream_bytes_received;
  p.run_until([] { return false; }, Duration::from_s(1));
  EXPECT_GT(p.b.stats().stream_bytes_received, at_down + 1'500'000);
  EXPECT_GT(p.a.path_stats(PathId{1}).probes_sent, 0U);
  // Back: the next probe's ACK brings it up, and it carries data again.
  p.set_path(1, true);
  const uint64_t acked_before = p.a.path_stats(PathId{1}).bytes_acked;
  const TimePoint healed = p.clock.now();
  ASSERT_TRUE(p.run_until([&] { return p.a.path_stats(PathId{1}).state == PathState::kUp; },
                          Duration::from_s(2)));
  EXPECT_LE((p.clock.now() - healed).seconds(), 0.5);
  ASSERT_TRUE(p.a.next_path_event(&ev));
  EXPECT_EQ(ev.state, PathState::kUp);
  ASSERT_TRUE(t.run(Duration::from_s(30)));
  EXPECT_EQ(t.reader.bad, 0U);
  EXPECT_GT(p.a.path_stats(PathId{1}).bytes_acked, acked_before);
  EXPECT_EQ(p.a.path_stats(PathId{1}).downs, 1U);
  EXPECT_EQ(p.a.path_stats(PathId{1}).ups, 1U);
}

TEST(Multipath, TheLastUpPathIsNeverDeclaredDown) {
  TransportConfig c = multi_config({Duration::from_ms(20), Duration::from_ms(20)}, 20'000'000);
  MultiPair p(c, {Duration::from_ms(10), Duration::from_ms(10)});
  Bulk t(p, 4'000'000);
  p.run_until([&] { return p.b.stats().stream_bytes_received > 1'000'000; }, Duration::from_s(10));
  p.set_path(0, false);
  p.set_path(1, false);
  p.run_until([] { return false; }, Duration::from_s(3));
  const int down = (p.a.path_stats(PathId{0}).state == PathState::kDown ? 1 : 0) +
                   (p.a.path_stats(PathId{1}).state == PathState::kDown ? 1 : 0);
  EXPECT_EQ(down, 1);
  EXPECT_GE(p.a.stats().rtos, 1U);  // the survivor recovers as a single path does
  p.set_path(0, true);
  p.set_path(1, true);
  ASSERT_TRUE(t.run(Duration::from_s(30)));
  EXPECT_EQ(t.reader.bad, 0U);
}

TEST(Multipath, AnIdleCutPathGoesDownAndComesBackUp) {
  TransportConfig c = multi_config({Duration::from_ms(20), Duration::from_ms(20)}, 20'000'000);
  MultiPair p(c, {Duration::from_ms(10), Duration::from_ms(10)});
  // No traffic at all: every path is kept measured by keepalives, timer-driven.
  int steps = 0;
  p.on_step = [&] { ++steps; };
  p.run_until([] { return false; }, Duration::from_s(2));
  for (uint16_t i = 0; i < 2; ++i) {
    const transport::PathStats& s = p.a.path_stats(PathId{i});
    EXPECT_EQ(s.state, PathState::kUp);
    EXPECT_GE(s.keepalives_sent, 15U);  // one per 100 ms of silence
    EXPECT_LE(s.keepalives_sent, 21U);
    EXPECT_GT(s.packets_received, 10U);  // the peer's ACKs (and keepalives)
    EXPECT_NEAR(s.srtt.seconds(), 0.020, 0.002);
    EXPECT_EQ(s.bytes_in_flight, 0U);
  }
  EXPECT_EQ(p.a.stats().lost_packets, 0U);
  EXPECT_LT(steps, 1000);  // a few wake-ups per keepalive, not a spin
  PathEvent ev;
  EXPECT_FALSE(p.a.next_path_event(&ev));
  auto both_ends = [&](PathState st) {  // path 1 in `st` at both ends
    return p.a.path_stats(PathId{1}).state == st && p.b.path_stats(PathId{1}).state == st;
  };
  // Cut path 1 while idle: down within path_keepalive + max(3 x srtt, floor).
  p.set_path(1, false);
  const TimePoint cut = p.clock.now();
  ASSERT_TRUE(p.run_until([&] { return both_ends(PathState::kDown); }, Duration::from_s(2)));
  const Duration bound = c.path_keepalive + std::max(Duration::from_ms(60), c.path_down_floor);
  EXPECT_LE((p.clock.now() - cut).seconds(), bound.seconds() + 0.002);
  EXPECT_EQ(p.a.path_stats(PathId{0}).state, PathState::kUp);
  ASSERT_TRUE(p.a.next_path_event(&ev));
  EXPECT_EQ(ev.path, PathId{1});
  EXPECT_EQ(ev.state, PathState::kDown);
  // Stays down, logged once, probed at a bounded interval.
  p.run_until([] { return false; }, Duration::from_s(3));
  EXPECT_FALSE(p.a.next_path_event(&ev));
  EXPECT_EQ(p.a.path_stats(PathId{1}).downs, 1U);
  EXPECT_GE(p.a.path_stats(PathId{1}).probes_sent, 5U);
  // Back: up within path_probe_max and a round trip.
  p.set_path(1, true);
  const TimePoint healed = p.clock.now();
  ASSERT_TRUE(p.run_until([&] { return both_ends(PathState::kUp); }, Duration::from_s(2)));
  EXPECT_LE((p.clock.now() - healed).seconds(), c.path_probe_max.seconds() + 0.025);
  ASSERT_TRUE(p.a.next_path_event(&ev));
  EXPECT_EQ(ev.state, PathState::kUp);
  EXPECT_FALSE(p.a.next_path_event(&ev));
  EXPECT_EQ(p.a.path_stats(PathId{1}).ups, 1U);
  // And it carries data again.
  Bulk t(p, 2'000'000);
  ASSERT_TRUE(t.run(Duration::from_s(10)));
  EXPECT_EQ(t.reader.bad, 0U);
}

TEST(Multipath, KeepalivesOnALossyIdlePathDoNotFlapIt) {
  TransportConfig c = multi_config({Duration::from_ms(20), Duration::from_ms(20)}, 20'000'000);
  MultiPair p(c, {Duration::from_ms(10), Duration::from_ms(10)}, 7);
  io::Impairment imp;
  imp.delay = Duration::from_ms(10);
  imp.loss = 0.1;  // one keepalive or ACK in ten lost, both directions
  p.links[1]->set_impairment(0, imp);
  p.links[1]->set_impairment(1, imp);
  p.run_until([] { return false; }, Duration::from_s(30));
  EXPECT_EQ(p.a.path_stats(PathId{1}).downs, 0U);
  EXPECT_EQ(p.b.path_stats(PathId{1}).downs, 0U);
  EXPECT_EQ(p.a.path_stats(PathId{1}).state, PathState::kUp);
  // A keepalive is outside the path's flight: its loss is no loss of data
  // and never reaches the controller.
  EXPECT_EQ(p.a.stats().lost_packets, 0U);
  EXPECT_EQ(p.a.stats().ptos, 0U);
}

// A path the peer never answered (its gateway not up yet) is not judged on
// keepalives; once answered, it is.
TEST(Multipath, AnUnansweredPathIsNotJudgedOnKeepalives) {
  TransportConfig c = multi_config({Duration::from_ms(20), Duration::from_ms(20)}, 20'000'000);
  MultiPair p(c, {Duration::from_ms(10), Duration::from_ms(10)});
  p.set_path(1, false);
  p.run_until([] { return false; }, Duration::from_s(2));
  EXPECT_EQ(p.a.path_stats(PathId{1}).state, PathState::kUp);
  EXPECT_EQ(p.a.path_stats(PathId{1}).downs, 0U);
  EXPECT_GT(p.a.path_stats(PathId{1}).keepalives_sent, 5U);
  p.set_path(1, true);
  p.run_until([] { return false; }, Duration::from_ms(300));
  p.set_path(1, false);
  EXPECT_TRUE(p.run_until([&] { return p.a.path_stats(PathId{1}).state == PathState::kDown; },
                          Duration::from_s(1)));
}

TEST(Multipath, OnePathSendsNoKeepalives) {
  TransportConfig c = multi_config({Duration::from_ms(20)}, 20'000'000);
  MultiPair p(c, {Duration::from_ms(10)});
  p.run_until([] { return false; }, Duration::from_s(2));
  EXPECT_EQ(p.a.path_stats(PathId{0}).keepalives_sent, 0U);
  EXPECT_EQ(p.a.stats().packets_sent, 0U);
}

TEST(Multipath, AddPathAfterConstruction) {
  TransportConfig c = test_config(Bytes{256} * 1472, 20'000'000);
  FakeClock clock;
  Connection conn(c, clock, clock.now());
  EXPECT_EQ(conn.path_count(), 1U);
  const PathId id = conn.add_path(PathConfig{BitsPerSec::from_mbps(10), Duration::from_ms(50)},
                                  clock, clock.now());
  EXPECT_EQ(id, PathId{1});
  EXPECT_EQ(conn.path_count(), 2U);
  EXPECT_EQ(conn.path_stats(id).base_rtt, Duration::from_ms(50));
  EXPECT_EQ(conn.path_stats(id).state, PathState::kUp);
  TransportConfig many = c;
  many.paths.resize(transport::kMaxPaths + 1);
  EXPECT_THROW(Connection(many, clock, clock.now()), std::invalid_argument);
}

TEST(Multipath, UnknownPathsAreCountedDrops) {
  FakeClock clock;
  const TransportConfig c = multi_config({Duration::from_ms(20), Duration::from_ms(20)}, 0);
  Connection conn(c, clock, clock.now());
  std::vector<uint8_t> d(wire::kMaxOverhead + 1, 0);
  wire::Header h;
  h.connection_id = c.connection_id;
  h.path = 7;  // the connection has 2
  wire::write_header(d.data(), h);
  d[wire::kHeaderSize] = wire::kFramePing;
  wire::end_datagram(d.data(), 1, true);
  conn.on_datagram(d.data(), d.size(), io::Ecn::kNotEct, clock.now());
  EXPECT_EQ(conn.stats().drop_bad_path, 1U);
  conn.on_datagram(d.data(), d.size(), io::Ecn::kNotEct, clock.now(), TimePoint(), PathId{9});
  EXPECT_EQ(conn.stats().drop_bad_path, 2U);
  // An ACK of path 5's space.
  wire::AckFrame a;
  a.path = 5;
  a.largest = 0;
  a.range_count = 1;
  a.ranges[0] = {0, 0};
  std::vector<uint8_t> f(wire::kMaxOverhead + wire::ack_frame_size(1, 5), 0);
  h.path = 0;
  wire::write_header(f.data(), h);
  wire::FrameWriter w(f.data() + wire::kHeaderSize, wire::ack_frame_size(1, 5));
  w.ack(a);
  wire::end_datagram(f.data(), w.size(), true);
  conn.on_datagram(f.data(), f.size(), io::Ecn::kNotEct, clock.now());
  EXPECT_EQ(conn.stats().drop_bad_path, 3U);
  EXPECT_EQ(conn.stats().drop_malformed, 1U);
}

}  // namespace
}  // namespace rowan::test
