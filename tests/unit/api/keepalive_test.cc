// The message channel's liveness on a FakeClock: two channels (the library's
// own rowan_channel, its transport and congestion controller) joined by an
// in-memory LoopbackLink with 10 ms each way. A quiet channel whose ends both
// poll stays open on keepalives; one whose peer went away (stopped polling,
// or never came after the handshake) fails with ROWAN_ERR_TIMEOUT after the
// idle timeout, completing what was posted, so a server can free it.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "api/channel.h"
#include "io/loopback.h"
#include "tools/fake_clock.h"

namespace rowan::test {
namespace {

constexpr int64_t kIdleMs = 3000;
constexpr Duration kTick = Duration::from_ms(1);

api::ChannelParams params(int idle_ms) {
  api::ChannelParams p;
  p.cc = "cubic";
  p.rate_bps = 1e8;
  p.rtt_s = 0.02;
  p.idle_timeout_ms = idle_ms;
  return p;
}

// A client `a` and a server `b` on one loopback link and one fake clock.
class ChannelPair {
 public:
  explicit ChannelPair(int idle_ms = static_cast<int>(kIdleMs))
      : link_(1472, 4096, 7),
        a_(params(idle_ms), link_.a(), clock_, io::UdpEndpoint::parse("198.18.2.10:5201"), 99),
        b_(params(idle_ms), link_.b(), clock_, io::UdpEndpoint::parse("198.18.1.10:40000"), 99) {
    io::Impairment imp;
    imp.delay = Duration::from_ms(10);
    link_.set_impairment(0, imp);
    link_.set_impairment(1, imp);
  }

  /// Runs `d` of fake time in 1 ms ticks; each tick polls `a` (when
  /// `poll_a(t)`, t = ms since the start of this run) and `b` once. Stops
  /// early when a poll fails; returns the first failure's status (or 0) and
  /// sets *at to its time.
  template <typename PollA>
  int run(Duration d, PollA poll_a, Duration* at = nullptr) {
    for (int64_t t = 0; t < d.ns() / kTick.ns(); ++t) {
      clock_.advance(kTick);
      if (poll_a(t)) {
        const int rc = a_.poll(0);
        if (rc < 0) return fail(rc, t, at);
      }
      const int rc = b_.poll(0);
      if (rc < 0) return fail(rc, t, at);
    }
    return 0;
  }
  int run_both(Duration d) {
    return run(d, [](int64_t) { return true; });
  }

  rowan_channel& a() { return a_; }
  rowan_channel& b() { return b_; }
  FakeClock& clock() { return clock_; }

 private:
  static int fail(int rc, int64_t t, Duration* at) {
    if (at != nullptr) *at = kTick * (t + 1);
    return rc;
  }

  FakeClock clock_;
  io::LoopbackLink link_;
  rowan_channel a_;
  rowan_channel b_;
};

struct Recv {
  int ok = 0;
  int closed = 0;
  size_t len = 0;
};

void on_recv(rowan_channel*, void* user, void*, size_t len, int status) {
  auto* r = static_cast<Recv*>(user);
  if (status == ROWAN_OK) {
    ++r->ok;
    r->len = len;
  } else if (status == ROWAN_ERR_CLOSED) {
    ++r->closed;
  }
}

TEST(ChannelKeepalive, QuietChannelStaysOpenAndStillCarriesMessages) {
  ChannelPair p;
  // Ten idle timeouts without a message: keepalives keep both ends alive.
  ASSERT_EQ(p.run_both(Duration::from_ms(10 * kIdleMs)), 0);
  const uint64_t pings = p.a().keepalives_sent() + p.b().keepalives_sent();
  // One every third of the timeout from whichever end is quieter; not more
  // than one per interval from each.
  EXPECT_GE(pings, 10U * api::kKeepalivesPerIdleTimeout / 2);
  EXPECT_LE(pings, 2 * (10U * api::kKeepalivesPerIdleTimeout + 1));
  EXPECT_GT(p.b().connection().stats().packets_received, 10U);

  // And the channel still works.
  std::vector<uint8_t> msg(5000, 0x5a);
  std::vector<uint8_t> buf(8192);
  Recv r;
  ASSERT_EQ(p.b().post_recv(buf.data(), buf.size(), on_recv, &r), ROWAN_OK);
  ASSERT_EQ(p.a().send(msg.data(), msg.size(), nullptr, nullptr), ROWAN_OK);
  ASSERT_EQ(p.run_both(Duration::from_ms(500)), 0);
  EXPECT_EQ(r.ok, 1);
  EXPECT_EQ(r.len, msg.size());
  EXPECT_EQ(std::memcmp(buf.data(), msg.data(), msg.size()), 0);
}

TEST(ChannelKeepalive, ServerNoticesAClientThatWentAway) {
  ChannelPair p;
  std::vector<uint8_t> msg(3000, 0x11);
  std::vector<uint8_t> buf(8192);
  Recv r;
  ASSERT_EQ(p.b().post_recv(buf.data(), buf.size(), on_recv, &r), ROWAN_OK);
  ASSERT_EQ(p.a().send(msg.data(), msg.size(), nullptr, nullptr), ROWAN_OK);
  ASSERT_EQ(p.run_both(Duration::from_ms(200)), 0);
  ASSERT_EQ(r.ok, 1);
  ASSERT_EQ(p.b().post_recv(buf.data(), buf.size(), on_recv, &r), ROWAN_OK);

  // The client process is gone: nobody polls `a` any more. The server has
  // nothing unacknowledged, so only keepalives can tell.
  const uint64_t pings_before = p.b().keepalives_sent();
  Duration at;
  const int rc = p.run(
      Duration::from_ms(3 * kIdleMs), [](int64_t) { return false; }, &at);
  EXPECT_EQ(rc, ROWAN_ERR_TIMEOUT);
  // Last news from `a` came within the first ~200 ms (ACKs of its message).
  EXPECT_GE(at, Duration::from_ms(kIdleMs - 200));
  EXPECT_LE(at, Duration::from_ms(kIdleMs + 50));
  EXPECT_GE(p.b().keepalives_sent() - pings_before, 2U) << "keepalives went unanswered";
  // The posted receive completed as closed, and the channel stays failed.
  EXPECT_EQ(r.closed, 1);
  EXPECT_EQ(p.b().poll(0), ROWAN_ERR_TIMEOUT);
  EXPECT_EQ(p.b().send(msg.data(), msg.size(), nullptr, nullptr), ROWAN_ERR_TIMEOUT);
}

TEST(ChannelKeepalive, AcceptedChannelWhoseClientNeverCameTimesOut) {
  // The half-open case: the server accepted a hello, the client never ran
  // its side of the channel.
  ChannelPair p;
  Duration at;
  EXPECT_EQ(p.run(
                Duration::from_ms(2 * kIdleMs), [](int64_t) { return false; }, &at),
            ROWAN_ERR_TIMEOUT);
  EXPECT_GE(at, Duration::from_ms(kIdleMs));
  EXPECT_LE(at, Duration::from_ms(kIdleMs + 50));
}

TEST(ChannelKeepalive, PeerPollingLessOftenThanTheKeepaliveIntervalStaysAlive) {
  // `a` polls for 5 ms every 1.4 s (under half the idle timeout): it
  // answers the server's keepalives late, but in time.
  ChannelPair p;
  EXPECT_EQ(p.run(Duration::from_ms(10 * kIdleMs), [](int64_t t) { return t % 1400 < 5; }), 0);
  EXPECT_GT(p.b().keepalives_sent(), 0U);
}

TEST(ChannelKeepalive, DisabledIdleTimeoutNeverFiresAndSendsNothing) {
  ChannelPair p(0);
  EXPECT_EQ(p.run(Duration::from_ms(20 * kIdleMs), [](int64_t) { return false; }), 0);
  EXPECT_EQ(p.b().keepalives_sent(), 0U);
  EXPECT_EQ(p.b().connection().stats().packets_sent, 0U);
}

TEST(ChannelKeepalive, NegativeIdleTimeoutOptionDisables) {
  rowan_channel_options o{};  // what rowan_channel_options_init gives
  EXPECT_EQ(api::channel_params(&o).idle_timeout_ms, 15000);
  o.idle_timeout_ms = -1;
  EXPECT_EQ(api::channel_params(&o).idle_timeout_ms, 0);
  o.idle_timeout_ms = 2500;
  EXPECT_EQ(api::channel_params(&o).idle_timeout_ms, 2500);
}

}  // namespace
}  // namespace rowan::test
