// The io_uring UDP backend over loopback: datagrams and ECN marks arrive,
// strangers are dropped and counted, partial bursts are reported, runs of
// equal-size datagrams go as one GSO send and come back split from one GRO
// receive (or one by one to a socket without UDP_GRO), a kernel refusal of
// GSO falls back once and loses nothing, and a real transport connection
// runs over it end to end.
#include "io/udp_uring.h"

#include <gtest/gtest.h>
#include <netinet/udp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <ctime>
#include <numeric>
#include <vector>

#include "base/clock.h"
#include "transport/connection.h"
#include "transport/driver.h"

namespace rowan::io {
namespace {

// Picks n distinct free loopback ports: binds n sockets to port 0 at once,
// so the kernel cannot hand out one port twice, then closes them all. Ports
// picked one at a time, each socket closed before the next bind, may repeat,
// and the second of two sockets bound to a repeated port fails with
// EADDRINUSE.
std::vector<uint16_t> free_ports(size_t n, int family = AF_INET) {
  std::vector<int> fds;
  std::vector<uint16_t> ports;
  for (size_t i = 0; i < n; ++i) {
    const int fd = socket(family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_storage ss{};
    socklen_t len = 0;
    if (family == AF_INET6) {
      auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
      a->sin6_family = AF_INET6;
      a->sin6_addr = in6addr_loopback;
      len = sizeof *a;
    } else {
      auto* a = reinterpret_cast<sockaddr_in*>(&ss);
      a->sin_family = AF_INET;
      a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      len = sizeof *a;
    }
    EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&ss), len), 0);
    EXPECT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len), 0);
    ports.push_back(ntohs(family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port
                                             : reinterpret_cast<sockaddr_in*>(&ss)->sin_port));
    fds.push_back(fd);
  }
  for (const int fd : fds) close(fd);
  return ports;
}

UdpEndpoint loopback(uint16_t port) {
  return UdpEndpoint::parse("127.0.0.1:" + std::to_string(port));
}

// Two endpoints, and a third for a test that needs one more.
struct Pair {
  std::vector<uint16_t> ports = free_ports(3);
  UdpEndpoint a = loopback(ports[0]);
  UdpEndpoint b = loopback(ports[1]);
  UdpEndpoint c = loopback(ports[2]);
};

// A transport connection's settings for a run over loopback.
transport::TransportConfig loopback_transport(uint64_t connection_id) {
  transport::TransportConfig cfg;
  cfg.cc = "cubic";
  cfg.link_rate = BitsPerSec::from_gbps(1);
  cfg.base_rtt = Duration::from_us(100);
  cfg.connection_id = connection_id;
  return cfg;
}

size_t recv_all(UdpUringIo& io, std::vector<RxDatagram>& bufs, size_t want) {
  size_t got = 0;
  for (int spin = 0; spin < 2000 && got < want; ++spin) {
    got += io.recv_burst(std::span(bufs.data() + got, bufs.size() - got), TimePoint());
    if (got < want) io.wait(Duration::from_ms(1));
  }
  return got;
}

TEST(UdpUring, EndpointParsing) {
  EXPECT_EQ(UdpEndpoint::parse("198.19.0.2:47910").to_string(), "198.19.0.2:47910");
  EXPECT_EQ(UdpEndpoint::parse("[2001:2::2]:47910").to_string(), "[2001:2::2]:47910");
  EXPECT_THROW(UdpEndpoint::parse("198.19.0.2"), std::invalid_argument);
  EXPECT_THROW(UdpEndpoint::parse("198.19.0.2:99999"), std::invalid_argument);
  EXPECT_THROW(UdpEndpoint::parse("nohost:1"), std::invalid_argument);
  EXPECT_THROW(UdpEndpoint::parse("[2001:2::2:1"), std::invalid_argument);
}

TEST(UdpUring, CarriesDatagramsWithEcnInOrder) {
  Pair p;
  UdpUringIo a({p.a, p.b, 1472, 64, 64});
  UdpUringIo b({p.b, p.a, 1472, 64, 64});
  std::vector<std::vector<uint8_t>> payloads;
  std::vector<TxDatagram> tx;
  payloads.reserve(40);
  tx.reserve(40);
  for (int i = 0; i < 40; ++i) {
    payloads.emplace_back(100 + i, static_cast<uint8_t>(i));
  }
  for (auto& pl : payloads) tx.push_back({pl.data(), static_cast<uint32_t>(pl.size()), Ecn::kEct0});
  ASSERT_EQ(a.send_burst(tx, TimePoint()), tx.size());
  std::vector<uint8_t> mem(size_t{64} * 1472);
  std::vector<RxDatagram> rx(64);
  for (size_t i = 0; i < rx.size(); ++i) rx[i] = {mem.data() + i * 1472, 1472, 0, Ecn::kNotEct};
  ASSERT_EQ(recv_all(b, rx, tx.size()), tx.size());
  for (size_t i = 0; i < tx.size(); ++i) {
    ASSERT_EQ(rx[i].len, payloads[i].size());
    EXPECT_EQ(std::memcmp(rx[i].data, payloads[i].data(), rx[i].len), 0);
    EXPECT_EQ(rx[i].ecn, Ecn::kEct0);  // the socket marks ECT(0), and IP_RECVTOS reports it
  }
  EXPECT_EQ(b.stats().rx_packets, tx.size());
  EXPECT_EQ(a.stats().tx_packets, tx.size());
}

// Only one burst of receives stays posted (UdpUringOptions::rx_slots): more
// datagrams than that, sent before the receiver looks, wait in the socket
// buffer and all arrive, in order, as the receiver re-posts.
TEST(UdpUring, ReceivesMoreDatagramsThanPostedReceives) {
  Pair p;
  UdpUringOptions oa;
  oa.bind = p.a;
  oa.peer = p.b;
  UdpUringOptions ob;
  ob.bind = p.b;
  ob.peer = p.a;
  ASSERT_LE(ob.rx_slots, 64u);
  UdpUringIo a(oa);
  UdpUringIo b(ob);
  constexpr size_t kCount = 256;
  std::vector<uint8_t> payload(kCount * 4);
  for (size_t i = 0; i < kCount; ++i) std::memcpy(&payload[i * 4], &i, 4);
  std::vector<TxDatagram> tx(kCount);
  for (size_t i = 0; i < kCount; ++i) tx[i] = {&payload[i * 4], 4, Ecn::kEct0};
  size_t sent = 0;
  for (int spin = 0; spin < 2000 && sent < kCount; ++spin) {
    sent +=
        a.send_burst(std::span(tx.data() + sent, std::min<size_t>(32, kCount - sent)), TimePoint());
  }
  ASSERT_EQ(sent, kCount);
  std::vector<uint8_t> mem(kCount * 64);
  std::vector<RxDatagram> rx(kCount);
  for (size_t i = 0; i < kCount; ++i) rx[i] = {mem.data() + i * 64, 64, 0, Ecn::kNotEct};
  ASSERT_EQ(recv_all(b, rx, kCount), kCount);
  for (size_t i = 0; i < kCount; ++i) {
    size_t v = 0;
    ASSERT_EQ(rx[i].len, 4u);
    std::memcpy(&v, rx[i].data, 4);
    EXPECT_EQ(v, i);
  }
  EXPECT_EQ(b.stats().rx_packets, kCount);
}

TEST(UdpUring, DropsDatagramsFromStrangers) {
  Pair p;
  UdpUringIo b({p.b, p.a, 1472, 16, 16});
  UdpUringIo stranger({p.c, p.b, 1472, 16, 16});
  uint8_t x[10] = {};
  TxDatagram d{x, sizeof x, Ecn::kEct0};
  ASSERT_EQ(stranger.send_burst({&d, 1}, TimePoint()), 1u);
  std::vector<uint8_t> mem(1472);
  std::vector<RxDatagram> rx(1, RxDatagram{mem.data(), 1472, 0, Ecn::kNotEct});
  for (int i = 0; i < 200 && b.udp_stats().rx_wrong_source == 0; ++i) {
    b.recv_burst(rx, TimePoint());
    b.wait(Duration::from_ms(1));
  }
  EXPECT_EQ(b.udp_stats().rx_wrong_source, 1u);
  EXPECT_EQ(b.stats().rx_packets, 0u);
}

TEST(UdpUring, PartialBurstWhenSlotsRunOut) {
  Pair p;
  UdpUringIo a({p.a, p.b, 1472, 8, 4});
  std::vector<uint8_t> pl(1000, 1);
  std::vector<TxDatagram> tx(64, TxDatagram{pl.data(), 1000, Ecn::kEct0});
  // At most 4 sends can be in flight; the kernel may complete some at once,
  // so the first burst takes at least 4 and never more than asked.
  const size_t n = a.send_burst(tx, TimePoint());
  EXPECT_GE(n, 4u);
  EXPECT_LE(n, tx.size());
}

// Datagrams of the given sizes, each filled with its index, sent in one
// burst from a to b; checks that b gets every one, whole and in order.
struct GsoRun {
  Pair p;
  UdpUringIo a;
  UdpUringIo b;
  explicit GsoRun(UdpUringOptions oa = {}, UdpUringOptions ob = {})
      : a(with(oa, p.a, p.b)), b(with(ob, p.b, p.a)) {}
  static UdpUringOptions with(UdpUringOptions o, const UdpEndpoint& bind, const UdpEndpoint& peer) {
    o.bind = bind;
    o.peer = peer;
    return o;
  }
  void carry(const std::vector<uint32_t>& sizes) {
    std::vector<std::vector<uint8_t>> payloads;
    std::vector<TxDatagram> tx;
    for (size_t i = 0; i < sizes.size(); ++i) {
      payloads.emplace_back(sizes[i], static_cast<uint8_t>(i));
    }
    for (auto& pl : payloads) tx.push_back({pl.data(), static_cast<uint32_t>(pl.size())});
    const uint64_t rx_before = b.stats().rx_packets;
    const uint64_t tx_before = a.stats().tx_packets;
    ASSERT_EQ(a.send_burst(tx, TimePoint()), tx.size());
    std::vector<uint8_t> mem(sizes.size() * 1472);
    std::vector<RxDatagram> rx(sizes.size());
    for (size_t i = 0; i < rx.size(); ++i) rx[i] = {mem.data() + i * 1472, 1472};
    ASSERT_EQ(recv_all(b, rx, sizes.size()), sizes.size());
    for (size_t i = 0; i < sizes.size(); ++i) {
      ASSERT_EQ(rx[i].len, sizes[i]) << "datagram " << i;
      EXPECT_EQ(std::count(rx[i].data, rx[i].data + rx[i].len, static_cast<uint8_t>(i)),
                static_cast<std::ptrdiff_t>(sizes[i]))
          << "datagram " << i;
      EXPECT_EQ(rx[i].ecn, Ecn::kEct0);
      EXPECT_FALSE(rx[i].rx_time.is_zero());
    }
    EXPECT_EQ(b.stats().rx_packets - rx_before, sizes.size());
    EXPECT_EQ(a.stats().tx_packets - tx_before, sizes.size());
    EXPECT_EQ(a.udp_stats().tx_errors, 0u);
  }
};

// A run of equal datagrams with a shorter last one: one sendmsg; on
// loopback the kernel hands the GSO skb whole to b's UDP_GRO socket, which
// splits it back into the same datagrams.
TEST(UdpUring, GsoSendsARunAsOneAndGroSplitsItBack) {
  GsoRun r;
  ASSERT_TRUE(r.a.gso_enabled());
  ASSERT_TRUE(r.b.gro_enabled());
  std::vector<uint32_t> sizes(31, 1000);
  sizes.push_back(500);
  r.carry(sizes);
  EXPECT_EQ(r.a.udp_stats().tx_gso_sends, 1u);
  EXPECT_EQ(r.a.udp_stats().tx_gso_datagrams, 32u);
  EXPECT_EQ(r.b.udp_stats().rx_gro_trains, 1u);
  EXPECT_EQ(r.b.udp_stats().rx_gro_datagrams, 32u);
  EXPECT_EQ(r.a.udp_stats().gso_fallbacks, 0u);
}

// A caller that asked for lending reads each datagram where the kernel
// wrote it, GRO trains included, and the slots go back to the kernel only
// at rx_done: without it the socket stops receiving once every slot is
// held, and after it what waited in the socket arrives intact.
TEST(UdpUring, LendsReceivedDatagramsInTheirSlotsUntilRxDone) {
  UdpUringOptions ob;
  ob.rx_slots = 4;
  GsoRun r({}, ob);
  ASSERT_TRUE(r.b.lend_rx(true));
  std::vector<uint8_t> own(size_t{64} * 1472);
  std::vector<RxDatagram> rx(64);
  auto reset = [&] {
    for (size_t i = 0; i < rx.size(); ++i) rx[i] = {own.data() + i * 1472, 1472};
  };
  auto send = [&](int first, int count, uint32_t size) {
    std::vector<std::vector<uint8_t>> pl;
    std::vector<TxDatagram> tx;
    for (int i = 0; i < count; ++i) pl.emplace_back(size, static_cast<uint8_t>(first + i));
    for (auto& b : pl) tx.push_back({b.data(), static_cast<uint32_t>(b.size())});
    ASSERT_EQ(r.a.send_burst(tx, TimePoint()), tx.size());
  };
  // Eight sends of distinct sizes (no coalescing): 8 datagrams for 4 slots.
  for (int i = 0; i < 8; ++i) send(i, 1, 100 + static_cast<uint32_t>(i));
  std::vector<int> seen;
  auto take = [&] {
    reset();
    const size_t n = r.b.recv_burst(rx, TimePoint());
    for (size_t i = 0; i < n; ++i) {
      EXPECT_TRUE(rx[i].data < own.data() || rx[i].data >= own.data() + own.size())
          << "copied into the caller's buffer";
      const int tag = rx[i].data[0];
      EXPECT_EQ(rx[i].len, 100U + static_cast<uint32_t>(tag));
      EXPECT_EQ(std::count(rx[i].data, rx[i].data + rx[i].len, rx[i].data[0]),
                static_cast<std::ptrdiff_t>(rx[i].len));
      seen.push_back(tag);
    }
    if (n == 0) r.b.wait(Duration::from_ms(1));
  };
  // Without rx_done: the 4 slots' datagrams, and no more however long it waits.
  for (int spin = 0; spin < 50; ++spin) take();
  EXPECT_EQ(seen.size(), 4U) << "slots went back to the kernel before rx_done";
  for (int spin = 0; spin < 200 && seen.size() < 8; ++spin) {
    r.b.rx_done();
    take();
  }
  r.b.rx_done();
  ASSERT_EQ(seen.size(), 8U);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(seen[static_cast<size_t>(i)], i);
  // A GRO train: every datagram read in place from the one slot.
  send(50, 20, 1000);
  size_t got = 0;
  for (int spin = 0; spin < 200 && got < 20; ++spin) {
    reset();
    const size_t n = r.b.recv_burst(rx, TimePoint());
    for (size_t i = 0; i < n; ++i, ++got) {
      EXPECT_EQ(rx[i].len, 1000U);
      EXPECT_EQ(rx[i].data[0], 50 + got);
      EXPECT_EQ(rx[i].data[999], 50 + got);
    }
    r.b.rx_done();
    if (n == 0) r.b.wait(Duration::from_ms(1));
  }
  EXPECT_EQ(got, 20U);
  EXPECT_GE(r.b.udp_stats().rx_gro_trains, 1U);
}

TEST(UdpUring, OneDatagramGoesAlone) {
  GsoRun r;
  r.carry({1000});
  EXPECT_EQ(r.a.udp_stats().tx_gso_sends, 0u);
  EXPECT_EQ(r.b.udp_stats().rx_gro_trains, 0u);
}

// Never more than 64 datagrams in one send, nor more than IPv4's 65507 bytes.
TEST(UdpUring, GsoRunsStopAtTheKernelsLimits) {
  UdpUringOptions o;
  o.tx_slots = 256;
  GsoRun r(o);
  r.carry(std::vector<uint32_t>(100, 200));  // 64 + 36
  EXPECT_EQ(r.a.udp_stats().tx_gso_sends, 2u);
  EXPECT_EQ(r.a.udp_stats().tx_gso_datagrams, 100u);
  GsoRun big(o);
  big.carry(std::vector<uint32_t>(60, 1472));  // 44 x 1472 = 64768 <= 65507, then 16
  EXPECT_EQ(big.a.udp_stats().tx_gso_sends, 2u);
  EXPECT_EQ(big.a.udp_stats().tx_gso_datagrams, 60u);
  EXPECT_EQ(big.b.udp_stats().rx_gro_datagrams, 60u);
}

// A run holds one size; a larger datagram starts a new run, a smaller one
// ends the current run.
TEST(UdpUring, MixedSizesDoNotCoalesce) {
  GsoRun r;
  // runs: [100] [200] [300 300 300 100] [300] [50 50]
  r.carry({100, 200, 300, 300, 300, 100, 300, 50, 50});
  EXPECT_EQ(r.a.udp_stats().tx_gso_sends, 2u);
  EXPECT_EQ(r.a.udp_stats().tx_gso_datagrams, 6u);
}

// A receiver without UDP_GRO: the kernel cuts the GSO skb for it, and it
// reads the datagrams one by one.
TEST(UdpUring, GsoToASocketWithoutGro) {
  UdpUringOptions ob;
  ob.gro = false;
  GsoRun r({}, ob);
  ASSERT_FALSE(r.b.gro_enabled());
  r.carry(std::vector<uint32_t>(20, 700));
  EXPECT_EQ(r.a.udp_stats().tx_gso_sends, 1u);
  EXPECT_EQ(r.b.udp_stats().rx_gro_trains, 0u);
}

// With GSO off the same burst goes one sendmsg per datagram.
TEST(UdpUring, GsoOffSendsOneByOne) {
  UdpUringOptions oa;
  oa.gso = false;
  GsoRun r(oa);
  ASSERT_FALSE(r.a.gso_enabled());
  r.carry(std::vector<uint32_t>(20, 700));
  EXPECT_EQ(r.a.udp_stats().tx_gso_sends, 0u);
  EXPECT_EQ(r.a.udp_stats().gso_fallbacks, 0u);
  EXPECT_EQ(r.b.udp_stats().rx_gro_trains, 0u);
}

// The kernel refuses GSO on a socket that sends without UDP checksums
// (SO_NO_CHECK: udp_send_skb returns EINVAL): the socket turns GSO off
// once, counts it, and sends the refused run again one datagram each, so
// nothing is lost; later bursts go one by one.
TEST(UdpUring, GsoRefusalFallsBackWithoutLoss) {
  GsoRun r;
  const int one = 1;
  ASSERT_EQ(setsockopt(r.a.fd(), SOL_SOCKET, SO_NO_CHECK, &one, sizeof one), 0);
  r.carry(std::vector<uint32_t>(10, 900));
  EXPECT_FALSE(r.a.gso_enabled());
  EXPECT_EQ(r.a.udp_stats().gso_fallbacks, 1u);
  r.carry(std::vector<uint32_t>(10, 900));
  EXPECT_EQ(r.a.udp_stats().gso_fallbacks, 1u);
  EXPECT_EQ(r.a.udp_stats().tx_gso_sends, 1u);  // the refused one, counted when queued
  EXPECT_EQ(r.b.stats().rx_packets, 20u);
}

// IPv6: the same runs over ::1 (its 16-bit payload length excludes the
// IPv6 header, so a run may hold 44 datagrams of 1472 bytes there too).
TEST(UdpUring, GsoOverIpv6) {
  UdpUringOptions o;
  o.tx_slots = 128;
  const std::vector<uint16_t> ports = free_ports(2, AF_INET6);
  const std::string pa = std::to_string(ports[0]);
  const std::string pb = std::to_string(ports[1]);
  UdpUringOptions oa = o;
  oa.bind = UdpEndpoint::parse("[::1]:" + pa);
  oa.peer = UdpEndpoint::parse("[::1]:" + pb);
  UdpUringOptions ob = o;
  ob.bind = oa.peer;
  ob.peer = oa.bind;
  UdpUringIo a(oa);
  UdpUringIo b(ob);
  std::vector<uint8_t> pl(1472 * 50);
  for (size_t i = 0; i < pl.size(); ++i) pl[i] = static_cast<uint8_t>(i / 1472);
  std::vector<TxDatagram> tx(50);
  for (size_t i = 0; i < tx.size(); ++i) tx[i] = {pl.data() + i * 1472, 1472};
  ASSERT_EQ(a.send_burst(tx, TimePoint()), tx.size());
  std::vector<uint8_t> mem(50 * 1472);
  std::vector<RxDatagram> rx(50);
  for (size_t i = 0; i < rx.size(); ++i) rx[i] = {mem.data() + i * 1472, 1472};
  ASSERT_EQ(recv_all(b, rx, 50), 50u);
  EXPECT_EQ(std::memcmp(mem.data(), pl.data(), pl.size()), 0);
  EXPECT_EQ(a.udp_stats().tx_gso_sends, 2u);  // 44 + 6
  EXPECT_EQ(b.udp_stats().rx_gro_datagrams, 50u);
  EXPECT_EQ(a.udp_stats().tx_errors, 0u);
}

// One socket, several destinations: each send_burst_to is one peer's burst,
// and every receiver gets its own datagrams only.
TEST(UdpUring, RunsNeverCrossDestinations) {
  Pair p;
  UdpUringOptions oa;
  oa.bind = p.a;  // unconnected
  UdpUringIo a(oa);
  const UdpEndpoint c = p.c;
  UdpUringIo b({p.b, p.a});
  UdpUringIo cc({c, p.a});
  std::vector<uint8_t> for_b(800, 'b'), for_c(800, 'c');
  const std::vector<TxDatagram> tb(8, TxDatagram{for_b.data(), 800});
  const std::vector<TxDatagram> tc(8, TxDatagram{for_c.data(), 800});
  ASSERT_EQ(a.send_burst_to(tb, p.b, TimePoint()), 8u);
  ASSERT_EQ(a.send_burst_to(tc, c, TimePoint()), 8u);
  ASSERT_EQ(a.send_burst_to(tb, p.b, TimePoint()), 8u);
  EXPECT_EQ(a.udp_stats().tx_gso_sends, 3u);
  std::vector<uint8_t> mem(32 * 1472);
  std::vector<RxDatagram> rx(32);
  for (size_t i = 0; i < rx.size(); ++i) rx[i] = {mem.data() + i * 1472, 1472};
  ASSERT_EQ(recv_all(b, rx, 16), 16u);
  for (size_t i = 0; i < 16; ++i) EXPECT_EQ(rx[i].data[0], 'b');
  ASSERT_EQ(recv_all(cc, rx, 8), 8u);
  for (size_t i = 0; i < 8; ++i) EXPECT_EQ(rx[i].data[799], 'c');
  EXPECT_EQ(b.udp_stats().rx_wrong_source + cc.udp_stats().rx_wrong_source, 0u);
}

TEST(UdpUring, TransportConnectionRunsOverIt) {
  Pair p;
  UdpUringIo ia({p.a, p.b, 1472, 128, 128});
  UdpUringIo ib({p.b, p.a, 1472, 128, 128});
  MonotonicClock clock;
  const transport::TransportConfig cfg = loopback_transport(77);
  transport::Connection ca(cfg, clock, clock.now());
  transport::Connection cb(cfg, clock, clock.now());
  transport::Driver da(ca, ia);
  transport::Driver db(cb, ib);

  std::vector<uint8_t> data(1 << 20);
  std::iota(data.begin(), data.end(), 0);
  size_t written = 0;
  std::vector<uint8_t> got;
  got.reserve(data.size());
  std::vector<uint8_t> buf(65536);
  const TimePoint deadline = clock.now() + Duration::from_s(20);
  while (got.size() < data.size() && clock.now() < deadline) {
    const TimePoint now = clock.now();
    if (written < data.size()) {
      written += ca.write(3, data.data() + written, data.size() - written, true, now);
    }
    da.poll(now);
    db.poll(now);
    bool fin = false;
    const size_t n = cb.read(3, buf.data(), buf.size(), &fin, now);
    got.insert(got.end(), buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(n));
    if (n == 0) ib.wait(Duration::from_us(200));
  }
  ASSERT_EQ(got.size(), data.size());
  EXPECT_TRUE(got == data);
  EXPECT_GT(ia.stats().tx_packets, 700u);
  // The transport's bursts of full-size datagrams went as GSO runs.
  EXPECT_GT(ia.udp_stats().tx_gso_sends, 0u);
  EXPECT_EQ(ia.udp_stats().tx_errors, 0u);
}

// Waits on the clock itself: these tests are about when the kernel saw a
// datagram, which no fake clock can stand in for.
void pause_until(const Clock& clock, TimePoint t) {
  while (clock.now() < t) {
    const Duration left = t - clock.now();
    timespec ts{left.ns() / 1000000000, left.ns() % 1000000000};
    nanosleep(&ts, nullptr);
  }
}

// The kernel's receive timestamp, not the caller's clock: a datagram that
// arrives after the caller read its clock (a loop preempted before it
// reaped) carries its real arrival time, and is counted.
TEST(UdpUring, ReceiveTimeIsTheKernelsArrivalTime) {
  Pair p;
  UdpUringIo a({p.a, p.b, 1472, 16, 16});
  UdpUringIo b({p.b, p.a, 1472, 16, 16});
  MonotonicClock clock;
  const TimePoint stale = clock.now();
  pause_until(clock, stale + Duration::from_ms(2));
  const TimePoint before = clock.now();
  uint8_t x[100] = {};
  TxDatagram d{x, sizeof x, Ecn::kEct0};
  ASSERT_EQ(a.send_burst({&d, 1}, TimePoint()), 1u);
  std::vector<uint8_t> mem(1472);
  std::vector<RxDatagram> rx(1, RxDatagram{mem.data(), 1472, 0, Ecn::kNotEct});
  size_t got = 0;
  TimePoint reaped;
  for (int i = 0; i < 200 && got == 0; ++i) {
    b.wait(Duration::from_ms(1));
    if (i == 0) pause_until(clock, before + Duration::from_ms(3));  // reaped late
    reaped = clock.now();
    got = b.recv_burst(rx, stale);
  }
  const TimePoint after = clock.now();
  ASSERT_EQ(got, 1u);
  // One conversion from CLOCK_REALTIME; a few microseconds of slack for it.
  const Duration slack = Duration::from_us(50);
  EXPECT_GE(rx[0].rx_time, before - slack);
  EXPECT_LT(rx[0].rx_time, reaped);  // when it arrived, not when it was reaped
  EXPECT_LE(rx[0].rx_time, after);
  EXPECT_EQ(b.udp_stats().rx_timestamped, 1u);
  EXPECT_EQ(b.udp_stats().rx_after_now, 1u);
  EXPECT_GE(b.udp_stats().rx_after_now_max, Duration::from_ms(2) - slack);
}

// The RTT sample of an ACK is measured from its arrival. a sends; b answers
// 2 ms later; a's loop then handles the ACK with a `now` it read when it
// sent (it was preempted between its clock read and the reap). Stamped with
// that `now` the sample was 0 (below any path, and a delay-based controller
// keeps it as its base RTT for 10 s); from the kernel's timestamp it is at
// least the 2 ms b held the data.
TEST(UdpUring, RttSampleIsMeasuredFromArrivalNotFromAStaleClockRead) {
  Pair p;
  UdpUringIo ia({p.a, p.b, 1472, 16, 16});
  UdpUringIo ib({p.b, p.a, 1472, 16, 16});
  MonotonicClock clock;
  transport::TransportConfig cfg = loopback_transport(78);
  cfg.ack_every = 1;
  transport::Connection ca(cfg, clock, clock.now());
  transport::Connection cb(cfg, clock, clock.now());
  transport::Driver da(ca, ia);  // no clock: `now` is used as given
  transport::Driver db(cb, ib);
  const uint8_t byte = 7;
  const TimePoint sent = clock.now();
  ASSERT_EQ(ca.write(0, &byte, 1, false, sent), 1u);
  da.poll(sent);
  ASSERT_EQ(ca.stats().packets_sent, 1u);
  pause_until(clock, sent + Duration::from_ms(2));
  const TimePoint b_start = clock.now();
  for (int i = 0; i < 200 && cb.stats().acks_sent == 0; ++i) {
    db.poll(clock.now());
    if (cb.stats().acks_sent == 0) ib.wait(Duration::from_ms(1));
  }
  ASSERT_EQ(cb.stats().acks_sent, 1u);
  for (int i = 0; i < 200 && ca.stats().acks_received == 0; ++i) {
    ia.wait(Duration::from_ms(1));
    da.poll(sent);  // the stale clock read
  }
  ASSERT_EQ(ca.stats().acks_received, 1u);
  EXPECT_GE(ca.stats().latest_rtt, b_start - sent - Duration::from_us(50));
  EXPECT_GE(ca.stats().min_rtt, Duration::from_ms(2) - Duration::from_us(50));
  EXPECT_EQ(ca.stats().rx_after_now, 1u);
}

}  // namespace
}  // namespace rowan::io
