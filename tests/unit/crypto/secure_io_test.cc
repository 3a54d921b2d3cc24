// SecureIo over the in-memory loopback link, driven by a FakeClock: the
// handshake, authenticated encryption, anti-replay, rekeying and restarts.
#include "crypto/secure_io.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

#include "io/loopback.h"
#include "tools/fake_clock.h"
#include "tools/rx_lending_io.h"
#include "tools/tx_lending_io.h"

namespace rowan::crypto {
namespace {

constexpr uint32_t kMtu = 1400;
constexpr Duration kStep = Duration::from_ms(1);

struct Keys {
  Key a = generate_private_key();
  Key b = generate_private_key();
};

SecureIoOptions options(const Key& priv, const Key& peer_priv) {
  SecureIoOptions o;
  o.private_key = priv;
  o.peer_public = public_key(peer_priv);
  o.wall_offset = Duration::from_s(1700000000);
  return o;
}

// Two gateways joined by a loopback link with 5 ms one-way delay.
struct Pair {
  explicit Pair(const SecureIoOptions& oa, const SecureIoOptions& ob, uint64_t seed = 1)
      : link(kMtu, 4096, seed) {
    io::Impairment imp;
    imp.delay = Duration::from_ms(5);
    link.set_impairment(0, imp);
    link.set_impairment(1, imp);
    a = std::make_unique<SecureIo>(link.a(), oa, clock.now());
    b = std::make_unique<SecureIo>(link.b(), ob, clock.now());
    mem.resize(size_t{64} * kMtu);
    rx.resize(64);
  }

  // Receives everything due at the current time on one side.
  std::vector<std::vector<uint8_t>> recv(SecureIo& s) {
    for (size_t i = 0; i < rx.size(); ++i) rx[i] = io::RxDatagram{mem.data() + i * kMtu, kMtu};
    std::vector<std::vector<uint8_t>> out;
    const size_t n = s.recv_burst(rx, clock.now());
    for (size_t i = 0; i < n; ++i) out.emplace_back(rx[i].data, rx[i].data + rx[i].len);
    return out;
  }

  void recv_raw(io::PacketIo& port) {
    for (size_t i = 0; i < rx.size(); ++i) rx[i] = io::RxDatagram{mem.data() + i * kMtu, kMtu};
    while (port.recv_burst(rx, clock.now()) > 0) {
    }
  }

  // Runs both sides for `d`, collecting what each delivers.
  void run(Duration d) {
    const TimePoint end = clock.now() + d;
    while (clock.now() < end) {
      if (a) {
        for (auto& p : recv(*a)) got_a.push_back(std::move(p));
      }
      if (b) {
        for (auto& p : recv(*b)) got_b.push_back(std::move(p));
      } else {
        recv_raw(link.b());  // a dead gateway's socket swallows datagrams
      }
      clock.advance(kStep);
    }
  }

  static std::vector<uint8_t> payload(uint32_t seq, uint32_t len = 1000) {
    std::vector<uint8_t> p(len);
    for (uint32_t i = 0; i < len; ++i) p[i] = static_cast<uint8_t>(seq * 31 + i);
    std::memcpy(p.data(), &seq, sizeof seq);
    return p;
  }

  size_t send(SecureIo& s, const std::vector<uint8_t>& p) {
    const io::TxDatagram d{p.data(), static_cast<uint32_t>(p.size()), io::Ecn::kEct0};
    return s.send_burst({&d, 1}, clock.now());
  }

  test::FakeClock clock;
  io::LoopbackLink link;
  std::unique_ptr<SecureIo> a, b;
  std::vector<uint8_t> mem;
  std::vector<io::RxDatagram> rx;
  std::vector<std::vector<uint8_t>> got_a, got_b;
};

size_t drops(const SecureIo& s, SecureDrop d) {
  return s.secure_stats().drops[static_cast<size_t>(d)];
}

TEST(SecureIo, HandshakeThenRoundTrip) {
  Keys k;
  Pair p(options(k.a, k.b), options(k.b, k.a));
  EXPECT_FALSE(p.a->has_session(p.clock.now()));
  EXPECT_EQ(p.a->max_datagram(), kMtu - SecureIo::kOverhead);
  // Data before any session is not sent in plaintext: it is dropped.
  ASSERT_EQ(p.send(*p.a, Pair::payload(99)), 1U);
  EXPECT_EQ(p.a->secure_stats().tx_no_session, 1U);
  p.run(Duration::from_ms(50));
  ASSERT_TRUE(p.a->has_session(p.clock.now()));
  ASSERT_TRUE(p.b->has_session(p.clock.now()));
  EXPECT_TRUE(p.got_b.empty());
  for (uint32_t i = 0; i < 100; ++i) {
    ASSERT_EQ(p.send(*p.a, Pair::payload(i)), 1U);
    ASSERT_EQ(p.send(*p.b, Pair::payload(i + 1000, 200)), 1U);
  }
  p.run(Duration::from_ms(20));
  ASSERT_EQ(p.got_b.size(), 100U);
  ASSERT_EQ(p.got_a.size(), 100U);
  for (uint32_t i = 0; i < 100; ++i) {
    EXPECT_EQ(p.got_b[i], Pair::payload(i));
    EXPECT_EQ(p.got_a[i], Pair::payload(i + 1000, 200));
  }
  EXPECT_TRUE(p.a->peer_up(p.clock.now()));
  EXPECT_FALSE(p.a->secure_stats().last_handshake.is_zero());
  EXPECT_EQ(p.a->secure_stats().drops_total(), 0U);
  EXPECT_EQ(p.b->secure_stats().drops_total(), 0U);
  // The wire never carries the plaintext.
  std::vector<uint8_t> seen;
  p.link.set_filter(0, [&](const uint8_t* d, uint32_t len, uint64_t) {
    seen.assign(d, d + len);
    return io::Verdict::kPass;
  });
  const auto pl = Pair::payload(7);
  p.send(*p.a, pl);
  ASSERT_EQ(seen.size(), pl.size() + SecureIo::kOverhead);
  EXPECT_EQ(std::search(seen.begin(), seen.end(), pl.begin() + 4, pl.begin() + 40), seen.end());
}

// Over a backend that lends what it receives (the DPDK WAN's mbufs),
// SecureIo opens each record where it lies and hands the plaintext up from
// there: no copy into the caller's buffer. Tampered records are still
// refused, and rx_done reaches the backend.
TEST(SecureIo, OpensInPlaceOverALendingBackend) {
  Keys k;
  test::FakeClock clock;
  io::LoopbackLink link(kMtu, 4096, 1);
  test::RxLendingIo lender(link.b(), kMtu);
  SecureIo a(link.a(), options(k.a, k.b), clock.now());
  SecureIo b(lender, options(k.b, k.a), clock.now());
  ASSERT_TRUE(b.lend_rx(true));
  std::vector<uint8_t> own(size_t{16} * kMtu);
  std::vector<io::RxDatagram> rx(16);
  std::vector<std::vector<uint8_t>> got;
  auto pump = [&](Duration d) {
    for (const TimePoint end = clock.now() + d; clock.now() < end; clock.advance(kStep)) {
      std::vector<uint8_t> a_mem(kMtu);  // a's side of the handshake
      io::RxDatagram a_rx{a_mem.data(), kMtu};
      while (a.recv_burst({&a_rx, 1}, clock.now()) > 0) {
      }
      for (size_t i = 0; i < rx.size(); ++i) rx[i] = io::RxDatagram{own.data() + i * kMtu, kMtu};
      const size_t n = b.recv_burst(rx, clock.now());
      for (size_t i = 0; i < n; ++i) {
        EXPECT_TRUE(lender.lent_memory(rx[i].data)) << "copied, not opened in place";
        got.emplace_back(rx[i].data, rx[i].data + rx[i].len);
      }
      b.rx_done();
    }
  };
  pump(Duration::from_ms(50));
  ASSERT_TRUE(a.has_session(clock.now()));
  for (uint32_t i = 0; i < 40; ++i) {
    const auto pl = Pair::payload(i, 1 + i * 31);
    const io::TxDatagram d{pl.data(), static_cast<uint32_t>(pl.size())};
    ASSERT_EQ(a.send_burst({&d, 1}, clock.now()), 1U);
  }
  pump(Duration::from_ms(20));
  ASSERT_EQ(got.size(), 40U);
  for (uint32_t i = 0; i < 40; ++i) EXPECT_EQ(got[i], Pair::payload(i, 1 + i * 31)) << i;
  EXPECT_GE(lender.lent, 40U);
  EXPECT_EQ(lender.stale_buffers, 0U);
  link.set_filter(0, [](const uint8_t*, uint32_t, uint64_t) { return io::Verdict::kCorrupt; });
  const auto pl = Pair::payload(99);
  const io::TxDatagram d{pl.data(), static_cast<uint32_t>(pl.size())};
  a.send_burst({&d, 1}, clock.now());
  pump(Duration::from_ms(20));
  EXPECT_EQ(got.size(), 40U);
  EXPECT_EQ(b.secure_stats().drops_total(), 1U);
}

// a over a backend that lends its transmit buffers and takes 5 datagrams
// per burst (tools/tx_lending_io.h), b over the plain loopback; pump() runs
// a's handshake side and collects what b delivers.
struct LendingPair {
  Keys k;
  test::FakeClock clock;
  io::LoopbackLink link{kMtu, 4096, 1};
  test::TxLendingIo lender{link.a()};
  SecureIo a{lender, options(k.a, k.b), clock.now()};
  SecureIo b{link.b(), options(k.b, k.a), clock.now()};
  std::vector<uint8_t> mem = std::vector<uint8_t>(size_t{16} * kMtu);
  std::vector<io::RxDatagram> rx = std::vector<io::RxDatagram>(16);
  std::vector<std::vector<uint8_t>> got;

  void pump(Duration d) {
    for (const TimePoint end = clock.now() + d; clock.now() < end; clock.advance(kStep)) {
      a.recv_burst({rx.data(), 1}, clock.now());  // a's side of the handshake
      for (size_t i = 0; i < rx.size(); ++i) rx[i] = io::RxDatagram{mem.data() + i * kMtu, kMtu};
      const size_t n = b.recv_burst(rx, clock.now());
      for (size_t i = 0; i < n; ++i) got.emplace_back(rx[i].data, rx[i].data + rx[i].len);
    }
  }
};

// Over a backend that lends its transmit buffers and takes 5 datagrams per
// burst, the sender writes each plaintext where SecureIo lends (inside the
// backend's buffer, past the record header) and passes refused ones again as
// they are, as the transport's Driver does: each record is sealed where its
// plaintext lies, a refused one holds its plaintext again when send_burst
// returns, and every payload arrives intact and in order.
TEST(SecureIo, SealsInPlaceInALentBufferAndGivesARefusedOneItsPlaintextBack) {
  LendingPair t;
  SecureIo& a = t.a;
  const SecureIo& b = t.b;
  test::TxLendingIo& lender = t.lender;
  test::FakeClock& clock = t.clock;
  auto pump = [&t](Duration d) { t.pump(d); };
  const auto& got = t.got;
  pump(Duration::from_ms(50));
  ASSERT_TRUE(a.has_session(clock.now()));
  const uint64_t sent_before = lender.lent_sent;
  const uint64_t own_before = lender.own_sent;  // the handshake's messages
  // Bursts of 12: the backend takes 5, and the sender passes the rest again.
  std::vector<io::TxDatagram> pending;
  uint32_t seq = 0;
  for (int burst = 0; burst < 6; ++burst) {
    for (size_t i = 0; i < 12; ++i, ++seq) {
      uint8_t* buf = a.tx_buffer(i);
      ASSERT_NE(buf, nullptr);
      ASSERT_TRUE(lender.lent_memory(buf));
      ASSERT_GE(kMtu - SecureIo::kOverhead, 200U + i * 50);
      const auto pl = Pair::payload(seq, 200 + static_cast<uint32_t>(i) * 50);
      std::memcpy(buf, pl.data(), pl.size());
      pending.push_back(io::TxDatagram{buf, static_cast<uint32_t>(pl.size())});
    }
    uint32_t first = seq - 12;
    while (!pending.empty()) {
      const size_t n = a.send_burst(pending, clock.now());
      ASSERT_GT(n, 0U);
      first += static_cast<uint32_t>(n);
      pending.erase(pending.begin(), pending.begin() + static_cast<std::ptrdiff_t>(n));
      // A refused datagram's buffer holds its plaintext again.
      for (size_t r = 0; r < pending.size(); ++r) {
        const auto pl = Pair::payload(first + static_cast<uint32_t>(r), pending[r].len);
        ASSERT_EQ(std::memcmp(pending[r].data, pl.data(), pl.size()), 0) << "refused " << r;
      }
    }
    pump(Duration::from_ms(2));
  }
  pump(Duration::from_ms(20));
  ASSERT_EQ(got.size(), 72U);
  for (uint32_t i = 0; i < 72; ++i) {
    EXPECT_EQ(got[i], Pair::payload(i, 200 + (i % 12) * 50)) << i;
  }
  EXPECT_GT(lender.refused, 0U);
  EXPECT_EQ(lender.lent_sent - sent_before, 72U);  // every record went from a lent buffer
  EXPECT_EQ(lender.own_sent, own_before);
  // The first datagram of each retry sits in a later buffer than the one it
  // is sealed into (the backend took the lower ones): those are copied, the
  // rest are sealed where they lie.
  EXPECT_GE(a.secure_stats().tx_sealed_in_place, 6U * 5);
  EXPECT_EQ(b.secure_stats().drops_total(), 0U);
}

// Datagrams with pieces (packet_io.h): holes in the lent buffer whose bytes
// lie elsewhere. Each is sealed from its buffer and its pieces, in place in
// a lent buffer or from a later one, and arrives whole; a refused one is
// passed again as it is.
TEST(SecureIo, SealsDatagramsWithPiecesReadWhereTheyLie) {
  LendingPair t;
  SecureIo& a = t.a;
  const SecureIo& b = t.b;
  test::FakeClock& clock = t.clock;
  auto pump = [&t](Duration d) { t.pump(d); };
  const auto& got = t.got;
  ASSERT_TRUE(a.takes_pieces());
  pump(Duration::from_ms(50));
  ASSERT_TRUE(a.has_session(clock.now()));
  std::vector<std::vector<uint8_t>> sources(72);  // where the pieces lie
  std::vector<std::array<io::TxPiece, 3>> pieces(72);
  std::vector<io::TxDatagram> pending;
  uint32_t seq = 0;
  for (int burst = 0; burst < 6; ++burst) {
    for (size_t i = 0; i < 12; ++i, ++seq) {
      uint8_t* buf = a.tx_buffer(i);
      ASSERT_NE(buf, nullptr);
      const auto len = 300 + static_cast<uint32_t>(i) * 70;
      sources[seq] = Pair::payload(seq, len);
      std::memcpy(buf, sources[seq].data(), len);
      // Three holes: one inside the first block, one across blocks, one at the end.
      const uint32_t holes[3][2] = {{5, 7}, {40, 233}, {len - 17, 17}};
      auto& pc = pieces[seq];
      for (size_t h = 0; h < 3; ++h) {
        std::memset(buf + holes[h][0], 0xEE, holes[h][1]);
        pc[h] = io::TxPiece{sources[seq].data() + holes[h][0], holes[h][0], holes[h][1]};
      }
      pending.push_back(io::TxDatagram{buf, len, io::Ecn::kEct0, pc.data(), 3});
    }
    while (!pending.empty()) {
      const size_t n = a.send_burst(pending, clock.now());
      ASSERT_GT(n, 0U);
      pending.erase(pending.begin(), pending.begin() + static_cast<std::ptrdiff_t>(n));
    }
    pump(Duration::from_ms(2));
  }
  pump(Duration::from_ms(20));
  ASSERT_EQ(got.size(), 72U);
  for (uint32_t i = 0; i < 72; ++i) EXPECT_EQ(got[i], sources[i]) << i;
  EXPECT_GT(t.lender.refused, 0U);
  EXPECT_GE(a.secure_stats().tx_sealed_pieces, 72U);
  EXPECT_EQ(b.secure_stats().drops_total(), 0U);
  // Pieces out of order or past the datagram are refused, never sent.
  uint8_t* buf = a.tx_buffer(0);
  const io::TxPiece bad[2] = {{sources[0].data(), 100, 10}, {sources[0].data(), 50, 10}};
  const io::TxDatagram d{buf, 200, io::Ecn::kEct0, bad, 2};
  const uint64_t errors = a.secure_stats().tx_crypto_errors;
  EXPECT_EQ(a.send_burst({&d, 1}, clock.now()), 1U);
  EXPECT_EQ(a.secure_stats().tx_crypto_errors, errors + 1);
}

TEST(SecureIo, TamperedDatagramsAreDropped) {
  Keys k;
  Pair p(options(k.a, k.b), options(k.b, k.a));
  p.run(Duration::from_ms(50));
  ASSERT_TRUE(p.b->has_session(p.clock.now()));
  // Corrupt every data datagram a→b: one random byte (payload, header or tag).
  p.link.set_filter(0, [](const uint8_t*, uint32_t, uint64_t) { return io::Verdict::kCorrupt; });
  for (uint32_t i = 0; i < 50; ++i) p.send(*p.a, Pair::payload(i));
  p.run(Duration::from_ms(20));
  EXPECT_TRUE(p.got_b.empty());
  const SecureStats& s = p.b->secure_stats();
  // A flipped byte fails the tag, or (in the index/counter) names no session,
  // or (in the type) is no message at all; nothing is delivered.
  EXPECT_EQ(s.drops_total(), 50U);
  EXPECT_GE(drops(*p.b, SecureDrop::kBadAuth), 40U);
  // Flows are unaffected once the corruption stops.
  p.link.set_filter(0, nullptr);
  p.send(*p.a, Pair::payload(1));
  p.run(Duration::from_ms(20));
  ASSERT_EQ(p.got_b.size(), 1U);
}

TEST(SecureIo, ReplaysAndStaleCountersAreDropped) {
  Keys k;
  Pair p(options(k.a, k.b), options(k.b, k.a));
  p.run(Duration::from_ms(50));
  std::vector<std::vector<uint8_t>> captured;
  p.link.set_filter(0, [&](const uint8_t* d, uint32_t len, uint64_t) {
    captured.emplace_back(d, d + len);
    return io::Verdict::kPass;
  });
  for (uint32_t i = 0; i < 10; ++i) p.send(*p.a, Pair::payload(i));
  p.run(Duration::from_ms(20));
  ASSERT_EQ(p.got_b.size(), 10U);
  p.link.set_filter(0, nullptr);
  // An attacker re-sends what it captured: none is delivered again.
  for (const auto& c : captured) {
    const io::TxDatagram d{c.data(), static_cast<uint32_t>(c.size())};
    p.link.a().send_burst({&d, 1}, p.clock.now());
  }
  p.run(Duration::from_ms(20));
  EXPECT_EQ(p.got_b.size(), 10U);
  EXPECT_EQ(drops(*p.b, SecureDrop::kReplay), 10U);
  // Once the window moved past them, the same datagrams are stale.
  for (uint32_t i = 0; i < ReplayWindow::kWindow + 10; ++i) {
    p.send(*p.a, Pair::payload(i, 64));
    if (i % 256 == 0) p.run(Duration::from_ms(1));
  }
  p.run(Duration::from_ms(20));
  for (const auto& c : captured) {
    const io::TxDatagram d{c.data(), static_cast<uint32_t>(c.size())};
    p.link.a().send_burst({&d, 1}, p.clock.now());
  }
  p.run(Duration::from_ms(20));
  EXPECT_EQ(drops(*p.b, SecureDrop::kStale), 10U);
  EXPECT_EQ(drops(*p.b, SecureDrop::kBadAuth), 0U);
}

TEST(SecureIo, ReorderedWithinWindowIsAccepted) {
  Keys k;
  Pair p(options(k.a, k.b), options(k.b, k.a));
  p.run(Duration::from_ms(50));
  std::vector<std::vector<uint8_t>> held;
  p.link.set_filter(0, [&](const uint8_t* d, uint32_t len, uint64_t) {
    held.emplace_back(d, d + len);
    return io::Verdict::kDrop;
  });
  for (uint32_t i = 0; i < 200; ++i) p.send(*p.a, Pair::payload(i));
  p.link.set_filter(0, nullptr);
  // Deliver them in reverse order.
  for (auto it = held.rbegin(); it != held.rend(); ++it) {
    const io::TxDatagram d{it->data(), static_cast<uint32_t>(it->size())};
    p.link.a().send_burst({&d, 1}, p.clock.now());
    if (p.link.in_flight(0) >= 32) p.run(Duration::from_ms(6));
  }
  p.run(Duration::from_ms(20));
  ASSERT_EQ(p.got_b.size(), 200U);
  for (uint32_t i = 0; i < 200; ++i) EXPECT_EQ(p.got_b[i], Pair::payload(199 - i));
  EXPECT_EQ(p.b->secure_stats().drops_total(), 0U);
}

// A continuous stream both ways across many rekeys (byte budget and time
// budget): every datagram is delivered exactly once, in order.
TEST(SecureIo, RekeyWithoutLoss) {
  Keys k;
  SecureIoOptions oa = options(k.a, k.b), ob = options(k.b, k.a);
  oa.rekey_after_bytes = Bytes{200} * 1000;  // ~200 datagrams per key on a's side
  ob.rekey_after_time = Duration::from_s(3);
  oa.rekey_after_time = Duration::from_s(3);
  oa.handshake_retry = ob.handshake_retry = Duration::from_ms(100);
  Pair p(oa, ob);
  p.run(Duration::from_ms(50));
  uint32_t sent = 0;
  for (int ms = 0; ms < 10000; ++ms) {
    for (int j = 0; j < 2; ++j) {
      ASSERT_EQ(p.send(*p.a, Pair::payload(sent)), 1U);
      ASSERT_EQ(p.send(*p.b, Pair::payload(sent, 300)), 1U);
      ++sent;
    }
    p.run(kStep);
  }
  p.run(Duration::from_ms(50));
  ASSERT_EQ(p.got_b.size(), sent);
  ASSERT_EQ(p.got_a.size(), sent);
  for (uint32_t i = 0; i < sent; ++i) {
    ASSERT_EQ(p.got_b[i], Pair::payload(i)) << i;
    ASSERT_EQ(p.got_a[i], Pair::payload(i, 300)) << i;
  }
  // 20000 × 1032 B / 200 kB = 100 budgets, paced to one handshake per 100 ms.
  EXPECT_GE(p.a->secure_stats().rekeys, 50U);
  EXPECT_GE(p.b->secure_stats().handshakes_completed, 50U);
  EXPECT_EQ(p.a->secure_stats().peer_restarts, 0U);
  EXPECT_EQ(p.b->secure_stats().peer_restarts, 0U);
  EXPECT_EQ(p.a->secure_stats().tx_no_session, 0U);
  EXPECT_EQ(p.b->secure_stats().tx_no_session, 0U);
  EXPECT_EQ(p.a->secure_stats().drops_total(), 0U);
  EXPECT_EQ(p.b->secure_stats().drops_total(), 0U);
}

TEST(SecureIo, SessionsExpireWithoutHandshakes) {
  Keys k;
  SecureIoOptions oa = options(k.a, k.b), ob = options(k.b, k.a);
  Pair p(oa, ob);
  p.run(Duration::from_ms(50));
  ASSERT_TRUE(p.a->peer_up(p.clock.now()));
  // Cut the link both ways: sessions age out at reject_after_time.
  p.link.set_filter(0, [](const uint8_t*, uint32_t, uint64_t) { return io::Verdict::kDrop; });
  p.link.set_filter(1, [](const uint8_t*, uint32_t, uint64_t) { return io::Verdict::kDrop; });
  p.clock.advance(oa.reject_after_time);
  p.run(Duration::from_ms(10));
  EXPECT_FALSE(p.a->has_session(p.clock.now()));
  EXPECT_FALSE(p.a->peer_up(p.clock.now()));
  // Retries are paced by handshake_retry, not sent in a loop.
  const uint64_t before = p.a->secure_stats().initiations_sent;
  p.run(Duration::from_s(5));
  EXPECT_LE(p.a->secure_stats().initiations_sent - before, 6U);
  // The link heals: a new handshake, and data flows.
  p.link.set_filter(0, nullptr);
  p.link.set_filter(1, nullptr);
  p.run(Duration::from_s(2));
  ASSERT_TRUE(p.a->has_session(p.clock.now()));
  p.send(*p.a, Pair::payload(3));
  p.run(Duration::from_ms(20));
  EXPECT_EQ(p.got_b.size(), 1U);
}

// Persistent keepalives: an idle link keeps hearing its peer (so silence
// means an outage), a 30 s cut is noticed and survived, and without the
// option nothing is sent while idle.
TEST(SecureIo, KeepalivesKeepAnIdleLinkUpAndSurviveALongOutage) {
  Keys k;
  SecureIoOptions oa = options(k.a, k.b), ob = options(k.b, k.a);
  oa.keepalive = ob.keepalive = Duration::from_s(1);
  Pair p(oa, ob);
  p.run(Duration::from_ms(50));
  ASSERT_TRUE(p.a->peer_up(p.clock.now()));
  // Idle for a minute: about one keepalive a second each way, peer stays up,
  // and the last datagram heard is never older than the interval (+ delay).
  const uint64_t ka0 = p.a->secure_stats().tx_keepalives;
  Duration worst = Duration::zero();
  for (int i = 0; i < 600; ++i) {
    p.run(Duration::from_ms(100));
    worst = std::max(worst, p.clock.now() - p.a->secure_stats().last_rx);
  }
  EXPECT_TRUE(p.a->peer_up(p.clock.now()));
  EXPECT_TRUE(p.b->peer_up(p.clock.now()));
  const uint64_t sent = p.a->secure_stats().tx_keepalives - ka0;
  EXPECT_GE(sent, 58U);
  EXPECT_LE(sent, 61U);
  EXPECT_LE(worst, Duration::from_ms(1100));
  EXPECT_GE(p.b->secure_stats().rx_keepalives, 58U);
  EXPECT_TRUE(p.got_a.empty() && p.got_b.empty()) << "keepalives are not delivered";
  // A 30 s cut both ways: silence, re-handshake attempts (paced), then recovery.
  p.link.set_filter(0, [](const uint8_t*, uint32_t, uint64_t) { return io::Verdict::kDrop; });
  p.link.set_filter(1, [](const uint8_t*, uint32_t, uint64_t) { return io::Verdict::kDrop; });
  const TimePoint cut = p.clock.now();
  const uint64_t init0 = p.a->secure_stats().initiations_sent;
  p.run(Duration::from_s(30));
  EXPECT_FALSE(p.a->peer_up(p.clock.now()));
  EXPECT_GE(p.clock.now() - p.a->secure_stats().last_rx, Duration::from_s(29));
  EXPECT_LE(p.a->secure_stats().initiations_sent - init0, 22U) << "retries are paced";
  p.link.set_filter(0, nullptr);
  p.link.set_filter(1, nullptr);
  p.run(Duration::from_s(2));
  EXPECT_TRUE(p.a->peer_up(p.clock.now()));
  EXPECT_TRUE(p.b->peer_up(p.clock.now()));
  EXPECT_GT(p.a->secure_stats().last_rx, cut + Duration::from_s(30));
  p.send(*p.a, Pair::payload(5));
  p.send(*p.b, Pair::payload(6));
  p.run(Duration::from_ms(20));
  ASSERT_EQ(p.got_b.size(), 1U);
  EXPECT_EQ(p.got_b[0], Pair::payload(5));
  ASSERT_EQ(p.got_a.size(), 1U);
  EXPECT_EQ(p.got_a[0], Pair::payload(6));
  EXPECT_EQ(p.a->secure_stats().drops_total() + p.b->secure_stats().drops_total(), 0U);
}

TEST(SecureIo, NoKeepalivesUnlessAsked) {
  Keys k;
  Pair p(options(k.a, k.b), options(k.b, k.a));
  p.run(Duration::from_ms(50));
  const uint64_t tx0 = p.a->stats().tx_packets;
  const uint64_t rx0 = p.b->secure_stats().rx_keepalives;
  p.run(Duration::from_s(5));
  EXPECT_EQ(p.a->secure_stats().tx_keepalives, 0U);
  EXPECT_EQ(p.b->secure_stats().rx_keepalives, rx0);
  EXPECT_EQ(p.a->stats().tx_packets, tx0);
}

TEST(SecureIo, PeerRestartReHandshakes) {
  Keys k;
  SecureIoOptions ob = options(k.b, k.a);
  Pair p(options(k.a, k.b), ob);
  p.run(Duration::from_ms(50));
  p.send(*p.a, Pair::payload(1));
  p.run(Duration::from_ms(20));
  ASSERT_EQ(p.got_b.size(), 1U);
  const uint64_t hs = p.a->secure_stats().handshakes_completed;
  const uint64_t inc_before = p.a->peer_incarnation();
  ASSERT_NE(inc_before, 0U);
  // b restarts: all its session state is gone.
  p.b.reset();
  p.run(Duration::from_ms(500));
  p.b = std::make_unique<SecureIo>(p.link.b(), ob, p.clock.now());
  p.run(Duration::from_ms(50));
  ASSERT_TRUE(p.b->has_session(p.clock.now()));
  EXPECT_GT(p.a->secure_stats().handshakes_completed, hs);
  // a learns that b restarted (b does not think a did); rekeys do not count.
  EXPECT_EQ(p.a->secure_stats().peer_restarts, 1U);
  EXPECT_EQ(p.b->secure_stats().peer_restarts, 0U);
  EXPECT_NE(p.a->peer_incarnation(), inc_before);
  p.send(*p.a, Pair::payload(2));
  p.send(*p.b, Pair::payload(3));
  p.run(Duration::from_ms(20));
  ASSERT_EQ(p.got_b.size(), 2U);
  EXPECT_EQ(p.got_b[1], Pair::payload(2));
  ASSERT_EQ(p.got_a.size(), 1U);
  EXPECT_EQ(p.got_a[0], Pair::payload(3));
}

TEST(SecureIo, ReplayedInitiationDoesNotDisturb) {
  Keys k;
  SecureIoOptions oa = options(k.a, k.b);
  oa.rekey_after_time = Duration::from_s(1);
  Pair p(oa, options(k.b, k.a));
  std::vector<uint8_t> init;  // a's rekey initiation
  p.link.set_filter(0, [&](const uint8_t* d, uint32_t len, uint64_t) {
    if (d[0] == kMsgInitiation && init.empty()) init.assign(d, d + len);
    return io::Verdict::kPass;
  });
  p.run(Duration::from_s(5));
  ASSERT_EQ(init.size(), kInitiationSize);
  const uint64_t resp = p.b->secure_stats().responses_sent;
  const io::TxDatagram d{init.data(), static_cast<uint32_t>(init.size())};
  p.link.a().send_burst({&d, 1}, p.clock.now());
  p.run(Duration::from_ms(20));
  EXPECT_EQ(drops(*p.b, SecureDrop::kReplay), 1U);
  EXPECT_EQ(p.b->secure_stats().responses_sent, resp);
  p.send(*p.a, Pair::payload(5));
  p.run(Duration::from_ms(20));
  EXPECT_EQ(p.got_b.size(), 1U);
}

TEST(SecureIo, WrongKeysNeverGetASession) {
  Keys k;
  const Key stranger = generate_private_key();
  // b expects someone else: a's initiations name an unknown static key.
  {
    Pair p(options(k.a, k.b), options(k.b, stranger));
    p.run(Duration::from_s(3));
    EXPECT_FALSE(p.a->has_session(p.clock.now()));
    EXPECT_FALSE(p.b->has_session(p.clock.now()));
    EXPECT_GE(drops(*p.b, SecureDrop::kUnknownPeer), 2U);
    // b's own initiations are addressed to the key b believes in: a fails them.
    EXPECT_GE(drops(*p.a, SecureDrop::kBadAuth), 2U);
    p.send(*p.a, Pair::payload(1));
    p.run(Duration::from_ms(20));
    EXPECT_TRUE(p.got_b.empty());
  }
  // A stranger holding a's public key but not its private key.
  {
    Pair p(options(stranger, k.b), options(k.b, k.a));
    p.run(Duration::from_s(3));
    EXPECT_FALSE(p.b->has_session(p.clock.now()));
    EXPECT_GE(drops(*p.b, SecureDrop::kUnknownPeer), 2U);
  }
}

TEST(SecureIo, ShortLongAndUnknownDatagramsAreCounted) {
  Keys k;
  Pair p(options(k.a, k.b), options(k.b, k.a));
  p.run(Duration::from_ms(50));
  auto inject = [&](std::vector<uint8_t> bytes) {
    const io::TxDatagram d{bytes.data(), static_cast<uint32_t>(bytes.size())};
    p.link.a().send_burst({&d, 1}, p.clock.now());
  };
  inject({kMsgData, 0, 0});                                           // truncated
  inject(std::vector<uint8_t>(20, 0));                                // type 0: unknown
  inject({kMsgData, 0, 0, 0, 1, 2, 3, 4, 0, 0, 0, 0, 0, 0, 0, 1});    // shorter than header+tag
  inject(std::vector<uint8_t>(kInitiationSize + 1, kMsgInitiation));  // oversize initiation
  std::vector<uint8_t> data(200, 0);
  data[0] = kMsgData;
  inject(data);  // receiver index 0: no session
  p.run(Duration::from_ms(20));
  EXPECT_EQ(drops(*p.b, SecureDrop::kTruncated), 2U);
  EXPECT_EQ(drops(*p.b, SecureDrop::kBadType), 1U);
  EXPECT_EQ(drops(*p.b, SecureDrop::kOversize), 1U);
  EXPECT_EQ(drops(*p.b, SecureDrop::kNoSession), 1U);
  EXPECT_TRUE(p.got_b.empty());
}

}  // namespace
}  // namespace rowan::crypto
