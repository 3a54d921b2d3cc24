// The driver's optional clock: a caller's stale `now` must not stamp ACKs
// earlier than they arrived (an RTT sample below the path's minimum).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <vector>

#include "crypto/secure_io.h"
#include "harness.h"
#include "tools/rx_lending_io.h"
#include "tools/tx_lending_io.h"

namespace rowan::test {
namespace {

// a sends one packet over a 10 ms one-way link; b acks at once. The ACK is
// due back at a at 20 ms. a's owner then polls with a `now` read 3 ms before
// (it did other work since): without a clock the driver receives nothing yet
// (the ACK is not there at that time); with the clock it receives the ACK at
// the real time, and the RTT sample is the path's 20 ms, not 17.
TEST(Driver, ClockKeepsRttSamplesAboveThePath) {
  for (const bool with_clock : {false, true}) {
    FakeClock clock{TimePoint::from_ns(1'000'000)};
    io::LoopbackLink link(2048, 64, 1);
    io::Impairment imp;
    imp.delay = Duration::from_ms(10);
    link.set_impairment(0, imp);
    link.set_impairment(1, imp);
    transport::TransportConfig cfg = test_config();
    cfg.ack_every = 1;
    transport::Connection a(cfg, clock, clock.now());
    transport::Connection b(cfg, clock, clock.now());
    transport::Driver da(a, link.a(), 32, with_clock ? &clock : nullptr);
    transport::Driver db(b, link.b());
    const uint8_t byte = 1;
    ASSERT_EQ(a.write(0, &byte, 1, false, clock.now()), 1U);
    const TimePoint sent = clock.now();
    da.poll(clock.now());
    clock.set(sent + Duration::from_ms(10));
    db.poll(clock.now());  // data in, ACK out
    clock.set(sent + Duration::from_ms(20));
    const TimePoint stale = clock.now() - Duration::from_ms(3);
    da.poll(stale);
    if (with_clock) {
      EXPECT_EQ(a.stats().acks_received, 1U);
      EXPECT_GE(a.stats().latest_rtt, Duration::from_ms(20));
    } else {
      EXPECT_EQ(a.stats().acks_received, 0U);
    }
  }
}

// A pass that finds the connection owing more than one burst (an unpaced
// window of 200 datagrams, all data written) sends several bursts while each
// is full and the link takes it, not one burst per pass: a loop that sleeps
// between passes must not have its wake-up rate cap its sending rate.
TEST(Driver, OnePassSendsSeveralFullBursts) {
  FakeClock clock{TimePoint::from_ns(1'000'000)};
  io::LoopbackLink link(2048, 4096, 1);
  transport::Connection a(test_config(Bytes{200} * 1472), clock, clock.now());
  transport::Driver da(a, link.a(), 32);
  std::vector<uint8_t> data(1 << 20, 7);
  ASSERT_EQ(a.write(0, data.data(), data.size(), false, clock.now()), data.size());
  da.poll(clock.now());
  const uint64_t sent = a.stats().packets_sent;
  EXPECT_GT(sent, 32U * 4);
  EXPECT_LE(sent, 32U * transport::Driver::kMaxSendBursts);
}

TEST(Driver, WritesIntoLentBuffersAndPassesARefusedOneAgainAsItIsAndReadsLentOnesInPlace) {
  FakeClock clock{TimePoint::from_ns(1'000'000)};
  io::LoopbackLink link(2048, 4096, 1);
  RxLendingIo rx_a(link.a()), rx_b(link.b());  // both ends read in place
  TxLendingIo lending(rx_a);
  TxLendingIo lending_b(rx_b);
  transport::TransportConfig cfg = test_config(Bytes{200} * 1472);
  transport::Connection a(cfg, clock, clock.now());
  transport::Connection b(cfg, clock, clock.now());
  transport::Driver da(a, lending, 32);
  transport::Driver db(b, lending_b, 32);
  std::vector<uint8_t> data(512 * 1024);
  for (size_t i = 0; i < data.size(); ++i) data[i] = pattern(0, i);
  size_t written = 0;
  std::vector<uint8_t> got;
  for (int step = 0; step < 20000 && got.size() < data.size(); ++step) {
    written += a.write(0, data.data() + written, data.size() - written, false, clock.now());
    da.poll(clock.now());
    db.poll(clock.now());
    uint8_t buf[65536];
    bool fin = false;
    const size_t n = b.read(0, buf, sizeof buf, &fin, clock.now());
    got.insert(got.end(), buf, buf + n);
    clock.advance(Duration::from_us(100));
  }
  ASSERT_EQ(got.size(), data.size());
  EXPECT_TRUE(got == data) << "a datagram was sent from a buffer reused after it went out";
  EXPECT_GT(lending.refused, 0U);  // the retry path ran
  EXPECT_GT(lending.lent_sent, 0U);
  // Only the first 16 of a burst have a lent buffer (the rest: the Driver's own).
  EXPECT_GT(lending.lent_sent, lending.own_sent);
  // Every datagram b received (and a's ACKs) came in lent memory, each
  // burst given back by rx_done, and no lent buffer came back as the Driver's.
  EXPECT_GE(rx_b.lent, data.size() / 1472);
  EXPECT_GT(rx_a.lent, 0U);
  EXPECT_EQ(rx_a.stale_buffers + rx_b.stale_buffers, 0U);
}

// Under link security the stream bytes are not copied into the datagram:
// SecureIo seals them from the send buffer (packet_io.h pieces). Several
// streams (several frames per datagram, frames across 16 KiB chunks), 2 %
// loss each way (retransmissions, whose originals may be acknowledged while
// they wait) and a backend that takes 5 datagrams per burst (refused ones
// wait in the Driver): every byte arrives as written.
TEST(Driver, UnderLinkSecurityStreamBytesAreSealedFromTheSendBufferAndArriveIntact) {
  FakeClock clock{TimePoint::from_ns(1'000'000)};
  io::LoopbackLink link(2048, 4096, 3);
  io::Impairment imp;
  imp.delay = Duration::from_ms(1);
  imp.loss = 0.02;
  link.set_impairment(0, imp);
  link.set_impairment(1, imp);
  TxLendingIo lend_a(link.a()), lend_b(link.b());
  const crypto::Key ka = crypto::generate_private_key(), kb = crypto::generate_private_key();
  auto opts = [](const crypto::Key& priv, const crypto::Key& peer) {
    crypto::SecureIoOptions o;
    o.private_key = priv;
    o.peer_public = crypto::public_key(peer);
    o.wall_offset = Duration::from_s(1700000000);
    return o;
  };
  crypto::SecureIo sa(lend_a, opts(ka, kb), clock.now());
  crypto::SecureIo sb(lend_b, opts(kb, ka), clock.now());
  transport::TransportConfig cfg = test_config(Bytes{100} * 1472);
  cfg.integrity_check = false;  // as under link security (worker.cc)
  transport::Connection a(cfg, clock, clock.now());
  transport::Connection b(cfg, clock, clock.now());
  transport::Driver da(a, sa, 32);
  transport::Driver db(b, sb, 32);
  constexpr uint64_t kStreams = 3;
  constexpr size_t kLen = 300 * 1024;
  std::array<std::vector<uint8_t>, kStreams> data, got;
  std::array<size_t, kStreams> written{};
  for (uint64_t s = 0; s < kStreams; ++s) {
    data[s].resize(kLen);
    for (size_t i = 0; i < kLen; ++i) data[s][i] = pattern(s, i);
  }
  auto done = [&] {
    for (uint64_t s = 0; s < kStreams; ++s)
      if (got[s].size() < kLen) return false;
    return true;
  };
  for (int step = 0; step < 40000 && !done(); ++step) {
    for (uint64_t s = 0; s < kStreams; ++s) {
      // Odd-sized writes: records that do not line up with datagrams.
      const size_t want = std::min<size_t>(kLen - written[s], 1000 + 37 * s);
      written[s] += a.write(s, data[s].data() + written[s], want, false, clock.now());
    }
    da.poll(clock.now());
    db.poll(clock.now());
    for (uint64_t s = 0; s < kStreams; ++s) {
      uint8_t buf[65536];
      bool fin = false;
      const size_t n = b.read(s, buf, sizeof buf, &fin, clock.now());
      got[s].insert(got[s].end(), buf, buf + n);
    }
    clock.advance(Duration::from_us(100));
  }
  for (uint64_t s = 0; s < kStreams; ++s) {
    ASSERT_EQ(got[s].size(), kLen) << s;
    EXPECT_TRUE(got[s] == data[s]) << "stream " << s << " arrived corrupted";
  }
  EXPECT_GT(a.stats().retransmitted_packets, 0U);
  EXPECT_GT(lend_a.refused, 0U);
  // Nearly every data datagram was sealed from pieces.
  EXPECT_GT(sa.secure_stats().tx_sealed_pieces, 3 * kLen / 1472);
  EXPECT_EQ(sb.secure_stats().drops_total(), 0U);
}

}  // namespace
}  // namespace rowan::test
