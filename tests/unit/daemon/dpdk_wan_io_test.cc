// The DPDK WAN backend (daemon/rowand/datapath/dpdk_wan_io.h) on a real port: a
// net_af_packet vdev on one end of a veth pair inside a network namespace this
// test creates, the Linux kernel on the other end. The kernel is the peer that
// checks our frames: it answers our ARP, ARPs for our address, and its UDP
// stack (the io_uring UDP backend, UdpUringIo) accepts our datagrams only
// when the IPv4 header checksum is right (ours carry no UDP checksum, which
// IPv4 allows), and its datagrams, with UDP checksums, must pass our check. Crafted frames sent
// from a raw AF_PACKET socket on the kernel's end must be dropped under their reasons.
//
// Needs root (namespaces, AF_PACKET); skips without it. Polls with a
// deadline: the kernel runs on its own time, so there is no fake clock here.
#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <rte_mempool.h>

#include "base/clock.h"
#include "codec/bytes.h"
#include "datapath/dpdk_wan_io.h"
#include "io/udp_uring.h"
#include "tools/shell.h"

namespace rowan::gw {
namespace {

using test::shell;

const std::string kNs = "rowan-dwt-" + std::to_string(getpid());
constexpr uint16_t kDpdkPort = 47910;
constexpr uint16_t kKernelPort = 47911;
constexpr const char* kTwoQueues = "net_af_packet1,iface=dw2,qpairs=2";

/// The tests' one DpdkWanIo (closing its port releases the vdev, so they
/// share it); Env closes it before the EAL goes.
std::unique_ptr<DpdkWanIo>& shared_wan() {
  static std::unique_ptr<DpdkWanIo> w;
  return w;
}

/// The namespace, the veth pair and the EAL, once per test process.
class Env : public ::testing::Environment {
 public:
  void SetUp() override {
    if (geteuid() != 0) {
      skip_ = "needs root (network namespace, AF_PACKET)";
      return;
    }
    const std::string ns = "ip netns exec " + kNs + " ";
    const int rc =
        shell("ip netns add " + kNs + " && " + ns + "ip link set lo up && " + ns +
              "sysctl -qw net.ipv6.conf.all.disable_ipv6=1 "
              "net.ipv6.conf.default.disable_ipv6=1 && " +
              ns + "ip link add dw0 type veth peer name dw1 && " + ns +
              "ethtool -K dw0 tx off rx off tso off gso off gro off >/dev/null && " + ns +
              "ethtool -K dw1 tx off rx off tso off gso off gro off >/dev/null && " + ns +
              "ip link set dw0 up && " + ns + "ip link set dw1 up && " + ns +
              "ip addr add 198.18.99.2/24 dev dw1 && " + ns +
              // A second pair for the two-queue port (qpairs=2).
              "ip link add dw2 type veth peer name dw3 && " + ns +
              "ethtool -K dw2 tx off rx off tso off gso off gro off >/dev/null && " + ns +
              "ethtool -K dw3 tx off rx off tso off gso off gro off >/dev/null && " + ns +
              "ip link set dw2 up && " + ns + "ip link set dw3 up && " + ns +
              "ip addr add 198.18.98.2/24 dev dw3")
            .status;
    made_ns_ = true;
    ASSERT_EQ(rc, 0) << "could not build the namespace " << kNs;
    const int fd = open(("/run/netns/" + kNs).c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(setns(fd, CLONE_NEWNET), 0);  // before the EAL starts its threads
    close(fd);
    EalConfig eal;
    eal.file_prefix = kNs;
    eal.no_huge = true;
    eal.memory_mb = 256;
    init_eal(eal, {"net_af_packet0,iface=dw0", std::string(kTwoQueues)});
    eal_ = true;
  }
  void TearDown() override {
    shared_wan().reset();
    if (eal_) cleanup_eal();
    if (made_ns_) shell("ip netns del " + kNs + " 2>/dev/null");
  }
  static const char* skip() { return skip_.empty() ? nullptr : skip_.c_str(); }

 private:
  static inline std::string skip_;
  bool made_ns_ = false;
  bool eal_ = false;
};

roce::IpAddr ip4(uint8_t a, uint8_t b, uint8_t c, uint8_t d) {
  roce::IpAddr x;
  x.version = 4;
  x.bytes[0] = a;
  x.bytes[1] = b;
  x.bytes[2] = c;
  x.bytes[3] = d;
  return x;
}

DpdkWanOptions options() {
  DpdkWanOptions o;
  o.device = "net_af_packet0,iface=dw0";
  o.address = ip4(198, 18, 99, 1);
  o.prefix_len = 24;
  o.port = kDpdkPort;
  o.peer = ip4(198, 18, 99, 2);
  o.peer_port = kKernelPort;
  o.mtu = 1500;
  o.nb_mbufs = 2047;
  return o;
}

void fill(std::vector<uint8_t>& b, uint32_t seed) {
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<uint8_t>(seed * 131 + i * 7);
}

class DpdkWanIoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (Env::skip() != nullptr) GTEST_SKIP() << Env::skip();
  }
  /// Calls `step` until it returns true or 5 s pass.
  template <typename F>
  bool poll_until(F step) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (std::chrono::steady_clock::now() < end) {
      if (step()) return true;
    }
    return false;
  }
  /// Sends probes until the next hop (the kernel) is resolved by ARP: the
  /// first sends are dropped while ARP goes out, and the kernel's reply
  /// arrives through recv_burst.
  bool resolve(DpdkWanIo& wan, io::RxDatagram& rx) {
    const std::vector<uint8_t> probe(16, 0xAB);
    return poll_until([&] {
      const io::TxDatagram d{probe.data(), static_cast<uint32_t>(probe.size())};
      wan.send_burst({&d, 1}, clock_.now());
      wan.recv_burst({&rx, 1}, clock_.now());
      return wan.resolved();
    });
  }
  /// Passes `tx` to send_burst until it has taken all of it.
  bool send_all(DpdkWanIo& wan, std::span<const io::TxDatagram> tx) {
    size_t off = 0;
    return poll_until([&] {
      off += wan.send_burst(tx.subspan(off), clock_.now());
      return off == tx.size();
    });
  }
  /// Up to `n` datagrams the kernel's socket receives within 5 s, in order,
  /// with their ECN codepoints.
  std::vector<std::pair<std::vector<uint8_t>, io::Ecn>> receive(io::UdpUringIo& kernel,
                                                                io::RxDatagram& rx, size_t n) {
    std::vector<std::pair<std::vector<uint8_t>, io::Ecn>> got;
    poll_until([&] {
      if (kernel.recv_burst({&rx, 1}, clock_.now()) == 1) {
        got.emplace_back(std::vector<uint8_t>(rx.data, rx.data + rx.len), rx.ecn);
      }
      return got.size() == n;
    });
    return got;
  }
  /// The kernel's UDP socket at the other end of the veth pair.
  static io::UdpUringOptions kernel_options() {
    io::UdpUringOptions ko;
    ko.bind = io::UdpEndpoint::parse("198.18.99.2:" + std::to_string(kKernelPort));
    ko.peer = io::UdpEndpoint::parse("198.18.99.1:" + std::to_string(kDpdkPort));
    return ko;
  }
  /// One DpdkWanIo per process: closing its port releases the vdev, so the
  /// tests share it and compare counters before and after.
  static DpdkWanIo& wan() {
    if (!shared_wan()) shared_wan() = std::make_unique<DpdkWanIo>(options());
    return *shared_wan();
  }
  MonotonicClock clock_;
};

// Port::~Port closes a net_memif port on the EAL's interrupt thread, so that
// its close cannot run beside the PMD's own disconnect there (dpdk_port.cc).
TEST_F(DpdkWanIoTest, RunsAFunctionOnTheInterruptThreadAndWaitsForIt) {
  const std::thread::id caller = std::this_thread::get_id();
  std::thread::id ran_on;
  int runs = 0;
  ASSERT_TRUE(on_interrupt_thread(
      [&] {
        ran_on = std::this_thread::get_id();
        ++runs;
      },
      Duration::from_s(2)));
  EXPECT_EQ(runs, 1);  // done, once, when it returns
  EXPECT_NE(ran_on, caller);
  EXPECT_NE(ran_on, std::thread::id{});
  // Each call waits for its own run.
  for (int i = 0; i < 20; ++i)
    ASSERT_TRUE(on_interrupt_thread([&] { ++runs; }, Duration::from_s(2)));
  EXPECT_EQ(runs, 21);
}

TEST_F(DpdkWanIoTest, ExchangesDatagramsWithTheKernelUdpStack) {
  DpdkWanIo& wan = this->wan();
  const DpdkWanStats before = wan.wan_stats();
  const uint64_t rx_before = wan.stats().rx_packets;
  io::UdpUringIo kernel(kernel_options());
  EXPECT_EQ(wan.max_datagram(), 1472U);

  std::array<uint8_t, 1500> rxmem{};
  io::RxDatagram rx{rxmem.data(), static_cast<uint32_t>(rxmem.size())};
  ASSERT_TRUE(resolve(wan, rx)) << "the kernel never answered ARP";
  EXPECT_GE(wan.wan_stats().arp_requests_sent, 1U);
  EXPECT_GE(wan.wan_stats().arp_learned, 1U);
  EXPECT_GE(wan.wan_stats().drops[static_cast<size_t>(WanDrop::kTxUnresolved)], 1U);
  // Drain probes that went out after resolution.
  poll_until([&] { return kernel.recv_burst({&rx, 1}, clock_.now()) == 0; });

  // DPDK -> kernel: sizes from 1 to the MTU's maximum, ECN kept.
  constexpr int kCount = 64;
  std::vector<std::vector<uint8_t>> sent(kCount);
  std::vector<io::TxDatagram> tx(kCount);
  for (int i = 0; i < kCount; ++i) {
    sent[i].resize(i == kCount - 1 ? 1472 : 1 + i * 23);
    fill(sent[i], static_cast<uint32_t>(i));
    tx[i] = {sent[i].data(), static_cast<uint32_t>(sent[i].size()),
             i % 2 == 0 ? io::Ecn::kCe : io::Ecn::kEct0};
  }
  ASSERT_TRUE(send_all(wan, tx));
  const auto got = receive(kernel, rx, kCount);
  ASSERT_EQ(got.size(), static_cast<size_t>(kCount)) << "the kernel received too few";
  for (int i = 0; i < kCount; ++i) {
    EXPECT_EQ(got[i].first, sent[i]) << "datagram " << i;
    EXPECT_EQ(got[i].second, i % 2 == 0 ? io::Ecn::kCe : io::Ecn::kEct0) << "datagram " << i;
  }
  // Too large for the link: counted, not sent.
  std::vector<uint8_t> big(1473, 1);
  const io::TxDatagram bd{big.data(), static_cast<uint32_t>(big.size())};
  EXPECT_EQ(wan.send_burst({&bd, 1}, clock_.now()), 1U);
  EXPECT_EQ(wan.wan_stats().drops[static_cast<size_t>(WanDrop::kTxOversize)] -
                before.drops[static_cast<size_t>(WanDrop::kTxOversize)],
            1U);

  // Kernel -> DPDK: the kernel ARPs for 198.18.99.1 (we answer) and its UDP
  // checksums pass our check.
  shell("ip neigh flush dev dw1 2>/dev/null");
  std::vector<io::TxDatagram> ktx(kCount);
  for (int i = 0; i < kCount; ++i) ktx[i] = {sent[i].data(), static_cast<uint32_t>(sent[i].size())};
  ASSERT_EQ(kernel.send_burst(ktx, clock_.now()), ktx.size());
  int ours = 0;
  ASSERT_TRUE(poll_until([&] {
    if (wan.recv_burst({&rx, 1}, clock_.now()) == 1) {
      EXPECT_EQ(std::vector<uint8_t>(rx.data, rx.data + rx.len), sent[ours]) << "datagram " << ours;
      ++ours;
    }
    return ours == kCount;
  })) << "we received "
      << ours << " of " << kCount;
  EXPECT_GE(wan.wan_stats().arp_replies_sent, 1U);
  EXPECT_EQ(wan.wan_stats().drops[static_cast<size_t>(WanDrop::kBadUdpChecksum)],
            before.drops[static_cast<size_t>(WanDrop::kBadUdpChecksum)]);
  EXPECT_EQ(wan.wan_stats().drops[static_cast<size_t>(WanDrop::kBadIpChecksum)],
            before.drops[static_cast<size_t>(WanDrop::kBadIpChecksum)]);
  EXPECT_EQ(wan.stats().rx_packets - rx_before, static_cast<uint64_t>(kCount));
}

// Datagrams written into the port's lent mbufs (tx_buffer) go out framed in
// place, with headers the kernel accepts, mixed in one burst with ones
// from the caller's own memory, and every mbuf goes back to the pool.
TEST_F(DpdkWanIoTest, SendsFromLentBuffersWithoutACopy) {
  DpdkWanIo& wan = this->wan();
  io::UdpUringIo kernel(kernel_options());
  std::array<uint8_t, 1500> rxmem{};
  io::RxDatagram rx{rxmem.data(), static_cast<uint32_t>(rxmem.size())};
  ASSERT_TRUE(resolve(wan, rx)) << "the kernel never answered ARP";
  poll_until([&] { return kernel.recv_burst({&rx, 1}, clock_.now()) == 0; });

  unsigned first_avail = 0;
  for (int round = 0; round < 3; ++round) {
    constexpr int kCount = 40;  // 32 lent (the port lends 32), 8 from our memory
    std::vector<std::vector<uint8_t>> want(kCount);
    std::vector<io::TxDatagram> tx(kCount);
    for (int i = 0; i < kCount; ++i) {
      want[i].resize(i == 0 ? 1472 : 1 + ((i * 37 + round * 11) % 1400));
      fill(want[i], static_cast<uint32_t>(round * 100 + i));
      uint8_t* buf = wan.tx_buffer(static_cast<size_t>(i));
      if (i < 32) {
        ASSERT_NE(buf, nullptr) << "slot " << i;
        EXPECT_EQ(wan.tx_buffer(static_cast<size_t>(i)), buf) << "a lent buffer stays lent";
        std::memcpy(buf, want[i].data(), want[i].size());
      } else {
        EXPECT_EQ(buf, nullptr);
        buf = want[i].data();
      }
      tx[i] = {buf, static_cast<uint32_t>(want[i].size())};
    }
    ASSERT_TRUE(send_all(wan, tx));
    const auto got = receive(kernel, rx, kCount);
    ASSERT_EQ(got.size(), static_cast<size_t>(kCount)) << "round " << round;
    for (int i = 0; i < kCount; ++i) {
      EXPECT_EQ(got[i].first, want[i]) << "round " << round << " datagram " << i;
    }
    // The sent mbufs went back to the pool through the port, and the slots
    // lend again: no mbuf leaks.
    for (int i = 0; i < 32; ++i) ASSERT_NE(wan.tx_buffer(static_cast<size_t>(i)), nullptr);
    const unsigned avail = rte_mempool_avail_count(wan.port().pool());
    if (round == 0) first_avail = avail;
    EXPECT_EQ(avail, first_avail) << "round " << round;
  }
}

// A caller that asked for lending (lend_rx) reads each datagram from its
// mbuf, not from its own buffer: intact, held until rx_done, and no more
// held at once than the port can keep (a caller that never calls rx_done
// stops receiving rather than exhausting the pool).
TEST_F(DpdkWanIoTest, LendsReceivedDatagramsInTheirMbufsUntilRxDone) {
  DpdkWanIo& wan = this->wan();
  io::UdpUringIo kernel(kernel_options());
  std::array<uint8_t, 1500> rxmem{};
  io::RxDatagram rx{rxmem.data(), static_cast<uint32_t>(rxmem.size())};
  ASSERT_TRUE(resolve(wan, rx)) << "the kernel never answered ARP";
  while (wan.recv_burst({&rx, 1}, clock_.now()) == 1) {
  }
  const unsigned idle_avail = rte_mempool_avail_count(wan.port().pool());
  ASSERT_TRUE(wan.lend_rx(true));

  constexpr int kCount = 48;
  std::vector<std::vector<uint8_t>> sent(kCount);
  std::vector<io::TxDatagram> ktx(kCount);
  for (int i = 0; i < kCount; ++i) {
    sent[i].resize(1 + (i * 61) % 1472);
    fill(sent[i], static_cast<uint32_t>(1000 + i));
    ktx[i] = {sent[i].data(), static_cast<uint32_t>(sent[i].size())};
  }
  ASSERT_EQ(kernel.send_burst(ktx, clock_.now()), ktx.size());
  std::vector<std::array<uint8_t, 1500>> own(16);
  std::vector<io::RxDatagram> bufs(own.size());
  int got = 0;
  ASSERT_TRUE(poll_until([&] {
    for (size_t i = 0; i < bufs.size(); ++i) {
      bufs[i] = io::RxDatagram{own[i].data(), static_cast<uint32_t>(own[i].size())};
    }
    const size_t n = wan.recv_burst(bufs, clock_.now());
    for (size_t i = 0; i < n; ++i, ++got) {
      const uint8_t* d = bufs[i].data;
      EXPECT_FALSE(d >= own.front().data() && d < own.back().data() + own.back().size())
          << "datagram " << got << " was copied into the caller's buffer";
      EXPECT_EQ(std::vector<uint8_t>(d, d + bufs[i].len), sent[got]) << "datagram " << got;
    }
    // Held, not yet back in the pool, until the caller is done with them.
    if (n > 0) {
      EXPECT_LE(rte_mempool_avail_count(wan.port().pool()), idle_avail - n);
    }
    wan.rx_done();
    return got == kCount;
  })) << "received "
      << got << " of " << kCount;
  EXPECT_EQ(rte_mempool_avail_count(wan.port().pool()), idle_avail) << "an mbuf leaked";

  // A caller that never calls rx_done receives no more than the port holds.
  std::vector<std::vector<uint8_t>> many(300, std::vector<uint8_t>(64, 0x42));
  std::vector<io::TxDatagram> mtx;
  for (auto& m : many) mtx.push_back({m.data(), static_cast<uint32_t>(m.size())});
  for (size_t off = 0; off < mtx.size(); off += 32) {
    const auto chunk = std::span(mtx).subspan(off, std::min<size_t>(32, mtx.size() - off));
    ASSERT_EQ(kernel.send_burst(chunk, clock_.now()), chunk.size());
  }
  size_t held = 0;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (std::chrono::steady_clock::now() < until) {
    for (size_t i = 0; i < bufs.size(); ++i) {
      bufs[i] = io::RxDatagram{own[i].data(), static_cast<uint32_t>(own[i].size())};
    }
    held += wan.recv_burst(bufs, clock_.now());
  }
  EXPECT_GE(held, 200U) << "the datagrams did not arrive";
  EXPECT_LE(held, 256U) << "the port held more than it may";
  wan.rx_done();
  ASSERT_TRUE(wan.lend_rx(false));
  while (wan.recv_burst({&rx, 1}, clock_.now()) == 1) {  // what the hold left in the ring
  }
  EXPECT_EQ(rte_mempool_avail_count(wan.port().pool()), idle_avail) << "an mbuf leaked";
}

// Crafted frames from a raw socket on dw1 toward the vdev's MAC.
class Injector {
 public:
  explicit Injector(const std::array<uint8_t, 6>& to) : to_(to) {
    fd_ = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0);
    sockaddr_ll sll{};
    sll.sll_family = AF_PACKET;
    sll.sll_ifindex = static_cast<int>(if_nametoindex("dw1"));
    sll.sll_halen = 6;
    std::memcpy(sll.sll_addr, to.data(), 6);
    addr_ = sll;
  }
  ~Injector() {
    if (fd_ >= 0) close(fd_);
  }
  Injector(const Injector&) = delete;
  Injector& operator=(const Injector&) = delete;
  bool ok() const { return fd_ >= 0 && addr_.sll_ifindex > 0; }

  /// A valid Ethernet/IPv4/UDP frame from 198.18.99.2:kKernelPort to us.
  std::vector<uint8_t> frame(const std::vector<uint8_t>& payload) const {
    std::vector<uint8_t> f(14 + 20 + 8 + payload.size());
    uint8_t* e = f.data();
    std::memcpy(e, to_.data(), 6);
    const std::array<uint8_t, 6> src = {0x02, 0, 0, 0, 0x99, 2};
    std::memcpy(e + 6, src.data(), 6);
    wire::store_be16(e + 12, 0x0800);
    uint8_t* ip = e + 14;
    ip[0] = 0x45;
    wire::store_be16(ip + 2, static_cast<uint16_t>(28 + payload.size()));
    ip[8] = 64;
    ip[9] = 17;
    const std::array<uint8_t, 8> addrs = {198, 18, 99, 2, 198, 18, 99, 1};
    std::memcpy(ip + 12, addrs.data(), 8);
    uint8_t* udp = ip + 20;
    wire::store_be16(udp, kKernelPort);
    wire::store_be16(udp + 2, kDpdkPort);
    wire::store_be16(udp + 4, static_cast<uint16_t>(8 + payload.size()));
    std::memcpy(udp + 8, payload.data(), payload.size());
    fix(f);
    return f;
  }
  /// Recomputes the IPv4 header and UDP checksums (big-endian arithmetic).
  static void fix(std::vector<uint8_t>& f) {
    uint8_t* ip = f.data() + 14;
    wire::store_be16(ip + 10, 0);
    wire::store_be16(ip + 10, static_cast<uint16_t>(~sum(ip, 20, 0)));
    const uint32_t ulen = wire::load_be16(ip + 2) - 20U;
    uint8_t* udp = ip + 20;
    wire::store_be16(udp + 6, 0);
    uint32_t pseudo = 17 + ulen;
    for (int i = 12; i < 20; i += 2) pseudo += wire::load_be16(ip + i);
    auto ck = static_cast<uint16_t>(~sum(udp, ulen, pseudo));
    wire::store_be16(udp + 6, ck == 0 ? 0xFFFF : ck);
  }
  static uint16_t sum(const uint8_t* p, uint32_t n, uint32_t s) {
    for (uint32_t i = 0; i + 1 < n; i += 2) s += wire::load_be16(p + i);
    if ((n & 1U) != 0) s += static_cast<uint32_t>(p[n - 1]) << 8;
    while ((s >> 16) != 0) s = (s & 0xFFFF) + (s >> 16);
    return static_cast<uint16_t>(s);
  }
  bool send(const std::vector<uint8_t>& f) {
    return sendto(fd_, f.data(), f.size(), 0, reinterpret_cast<const sockaddr*>(&addr_),
                  sizeof addr_) == static_cast<ssize_t>(f.size());
  }

 private:
  std::array<uint8_t, 6> to_;
  int fd_ = -1;
  sockaddr_ll addr_{};
};

TEST_F(DpdkWanIoTest, DropsMalformedFramesByReason) {
  DpdkWanIo& wan = this->wan();
  Injector inj(wan.port().mac());
  // Nothing else is in flight: take what is queued, then count from here.
  std::array<uint8_t, 1500> rxmem{};
  io::RxDatagram rx{rxmem.data(), static_cast<uint32_t>(rxmem.size())};
  while (wan.recv_burst({&rx, 1}, clock_.now()) != 0) {
  }
  const DpdkWanStats before = wan.wan_stats();
  const uint64_t truncated_before = wan.stats().rx_truncated;
  ASSERT_TRUE(inj.ok());
  const std::vector<uint8_t> payload(100, 0x5A);
  const auto good = inj.frame(payload);

  std::vector<std::pair<WanDrop, std::vector<uint8_t>>> bad;
  auto with = [&](auto change) {
    auto f = good;
    change(f);
    return f;
  };
  bad.emplace_back(WanDrop::kBadIpChecksum, with([](auto& f) { f[14 + 10] ^= 0x55; }));
  bad.emplace_back(WanDrop::kBadUdpChecksum, with([](auto& f) { f[14 + 28 + 5] ^= 0x01; }));
  bad.emplace_back(WanDrop::kWrongPort, with([](auto& f) {
                     wire::store_be16(f.data() + 14 + 22, 9999);
                     Injector::fix(f);
                   }));
  bad.emplace_back(WanDrop::kWrongSource, with([](auto& f) {
                     wire::store_be16(f.data() + 14 + 20, 9999);
                     Injector::fix(f);
                   }));
  bad.emplace_back(WanDrop::kWrongSource, with([](auto& f) {
                     f[14 + 15] = 77;  // source 198.18.99.77
                     Injector::fix(f);
                   }));
  // No kFragment case: net_af_packet's socket joins a fanout group with
  // PACKET_FANOUT_FLAG_DEFRAG, so the kernel holds a lone fragment and
  // reassembles complete sets before the port sees them.
  bad.emplace_back(WanDrop::kNotUdp, with([](auto& f) {
                     f[14 + 9] = 6;
                     Injector::fix(f);
                   }));
  bad.emplace_back(WanDrop::kNotForUs, with([](auto& f) {
                     f[14 + 19] = 3;  // to 198.18.99.3
                     Injector::fix(f);
                   }));
  bad.emplace_back(WanDrop::kNotForUs, with([](auto& f) { f[5] ^= 0x10; }));  // another MAC
  bad.emplace_back(WanDrop::kMalformedIp, with([](auto& f) { f[14] = 0x65; }));
  bad.emplace_back(WanDrop::kRunt, with([](auto& f) {
                     wire::store_be16(f.data() + 14 + 2, 1400);  // longer than the frame
                   }));
  bad.emplace_back(WanDrop::kRunt, with([](auto& f) { f.resize(30); }));
  bad.emplace_back(WanDrop::kUnsupportedL2,
                   with([](auto& f) { wire::store_be16(f.data() + 12, 0x86DD); }));
  bad.emplace_back(WanDrop::kMalformedArp, with([](auto& f) {
                     wire::store_be16(f.data() + 12, 0x0806);  // an "ARP" of UDP bytes
                   }));
  std::array<uint64_t, static_cast<size_t>(WanDrop::kCount)> want{};
  for (const auto& [why, f] : bad) {
    ASSERT_TRUE(inj.send(f));
    ++want[static_cast<size_t>(why)];
  }
  ASSERT_TRUE(inj.send(good));

  size_t got = 0;
  ASSERT_TRUE(poll_until([&] {
    got += wan.recv_burst({&rx, 1}, clock_.now());
    return got == 1;
  }));
  EXPECT_EQ(std::vector<uint8_t>(rx.data, rx.data + rx.len), payload);
  // The good frame went last, so every bad one has been looked at.
  for (size_t i = 0; i < want.size(); ++i) {
    if (static_cast<WanDrop>(i) == WanDrop::kTxUnresolved) continue;
    EXPECT_EQ(wan.wan_stats().drops[i] - before.drops[i], want[i]) << kWanDropNames[i];
  }
  // A datagram larger than the caller's buffer is dropped as truncated.
  auto big = inj.frame(std::vector<uint8_t>(1000, 7));
  ASSERT_TRUE(inj.send(big));
  ASSERT_TRUE(inj.send(good));
  std::array<uint8_t, 200> small{};
  io::RxDatagram srx{small.data(), static_cast<uint32_t>(small.size())};
  got = 0;
  ASSERT_TRUE(poll_until([&] {
    got += wan.recv_burst({&srx, 1}, clock_.now());
    return got == 1;
  }));
  EXPECT_EQ(srx.len, payload.size());
  EXPECT_EQ(wan.wan_stats().drops[static_cast<size_t>(WanDrop::kTruncated)] -
                before.drops[static_cast<size_t>(WanDrop::kTruncated)],
            1U);
  EXPECT_EQ(wan.stats().rx_truncated - truncated_before, 1U);
}

// Two workers on one port (DpdkWanPort, a queue pair each): worker w sends
// from and receives on UDP port base + w, whatever queue the kernel's fanout
// hash puts a datagram on; what lands on the other worker's queue is handed
// to it through its steering ring, and nothing is lost or counted twice.
TEST_F(DpdkWanIoTest, TwoQueuesEachGetTheirWorkersDatagramsWhereverTheyLand) {
  DpdkWanOptions o = options();
  o.device = kTwoQueues;
  o.address = ip4(198, 18, 98, 1);
  o.peer = ip4(198, 18, 98, 2);
  DpdkWanPort port(o, 2);
  ASSERT_EQ(port.queues(), 2);
  ASSERT_NE(port.ring(0), nullptr);
  ASSERT_NE(port.ring(1), nullptr);
  EXPECT_EQ(port.flow_rules(), 0) << "net_af_packet takes no rte_flow rules";
  std::array<std::unique_ptr<DpdkWanIo>, 2> q{std::make_unique<DpdkWanIo>(port, 0),
                                              std::make_unique<DpdkWanIo>(port, 1)};
  std::array<std::array<uint8_t, 1500>, 2> rxmem{};
  std::array<io::RxDatagram, 2> rx{io::RxDatagram{rxmem[0].data(), 1500},
                                   io::RxDatagram{rxmem[1].data(), 1500}};
  // The kernel's end of each worker's flow.
  std::vector<std::unique_ptr<io::UdpUringIo>> kernel;
  for (uint16_t w = 0; w < 2; ++w) {
    io::UdpUringOptions ko;
    ko.bind = io::UdpEndpoint::parse("198.18.98.2:" + std::to_string(kKernelPort + w));
    ko.peer = io::UdpEndpoint::parse("198.18.98.1:" + std::to_string(kDpdkPort + w));
    kernel.push_back(std::make_unique<io::UdpUringIo>(ko));
  }
  // One worker learns the next hop; the other knows it too.
  const std::vector<uint8_t> probe(16, 0xAB);
  ASSERT_TRUE(poll_until([&] {
    const io::TxDatagram d{probe.data(), static_cast<uint32_t>(probe.size())};
    q[0]->send_burst({&d, 1}, clock_.now());
    for (auto& x : q) x->recv_burst({&rx[0], 1}, clock_.now());
    return q[1]->resolved();
  })) << "the kernel never answered ARP";
  for (auto& k : kernel) poll_until([&] { return k->recv_burst({&rx[0], 1}, clock_.now()) == 0; });

  // kCount datagrams of `size` bytes, each filled from seed + its index,
  // and the TxDatagrams that point at them.
  constexpr int kCount = 32;
  std::vector<std::vector<uint8_t>> sent;
  std::vector<io::TxDatagram> tx(kCount);
  auto make = [&](uint32_t size, uint32_t seed) {
    sent.assign(kCount, std::vector<uint8_t>(size));
    for (int i = 0; i < kCount; ++i) {
      fill(sent[i], seed + static_cast<uint32_t>(i));
      tx[i] = {sent[i].data(), size};
    }
  };
  // Each worker -> the kernel: from its own UDP port.
  for (uint16_t w = 0; w < 2; ++w) {
    make(200, 100U * w);
    ASSERT_TRUE(send_all(*q[w], tx));
    const auto got = receive(*kernel[w], rx[0], kCount);
    ASSERT_EQ(got.size(), static_cast<size_t>(kCount)) << "worker " << w;
    for (int i = 0; i < kCount; ++i) EXPECT_EQ(got[i].first, sent[i]) << w << ": " << i;
  }

  // The kernel -> each worker, from its flow's port; then from 32 more
  // sockets (ports the kernel picks) to both workers' ports: the fanout
  // hash spreads those over the queues, yet each reaches the worker whose
  // port it is for (which drops the strangers as wrong_source).
  const std::array<DpdkWanStats, 2> before{q[0]->wan_stats(), q[1]->wan_stats()};
  for (uint16_t w = 0; w < 2; ++w) {
    make(300, 1000U * w);
    ASSERT_EQ(kernel[w]->send_burst(tx, clock_.now()), tx.size());
    int ours = 0;
    ASSERT_TRUE(poll_until([&] {
      EXPECT_EQ(q[1 - w]->recv_burst({&rx[1 - w], 1}, clock_.now()), 0U);  // steers only
      if (q[w]->recv_burst({&rx[w], 1}, clock_.now()) == 1) {
        EXPECT_EQ(std::vector<uint8_t>(rx[w].data, rx[w].data + rx[w].len), sent[ours])
            << w << ": " << ours;
        ++ours;
      }
      return ours == kCount;
    })) << "worker "
        << w << " received " << ours << " of " << kCount;
  }
  constexpr uint64_t kStrangers = 32;
  const std::vector<uint8_t> stray(64, 0x3C);
  for (uint64_t i = 0; i < kStrangers; ++i) {
    const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(fd, 0);
    sockaddr_in from{};
    from.sin_family = AF_INET;
    inet_pton(AF_INET, "198.18.98.2", &from.sin_addr);
    ASSERT_EQ(bind(fd, reinterpret_cast<const sockaddr*>(&from), sizeof from), 0);
    for (uint16_t w = 0; w < 2; ++w) {
      sockaddr_in to{};
      to.sin_family = AF_INET;
      to.sin_port = htons(static_cast<uint16_t>(kDpdkPort + w));
      inet_pton(AF_INET, "198.18.98.1", &to.sin_addr);
      EXPECT_EQ(sendto(fd, stray.data(), stray.size(), 0, reinterpret_cast<const sockaddr*>(&to),
                       sizeof to),
                static_cast<ssize_t>(stray.size()));
    }
    close(fd);
  }
  auto strangers_at = [&](int w) {
    return q[w]->wan_stats().drops[static_cast<size_t>(WanDrop::kWrongSource)] -
           before[w].drops[static_cast<size_t>(WanDrop::kWrongSource)];
  };
  ASSERT_TRUE(poll_until([&] {
    for (int w = 0; w < 2; ++w) q[w]->recv_burst({&rx[w], 1}, clock_.now());
    return strangers_at(0) == kStrangers && strangers_at(1) == kStrangers;
  })) << strangers_at(0)
      << " and " << strangers_at(1) << " of " << kStrangers;
  uint64_t out = 0;
  uint64_t in = 0;
  for (int w = 0; w < 2; ++w) {
    out += q[w]->wan_stats().steered_out - before[w].steered_out;
    in += q[w]->wan_stats().steered_in - before[w].steered_in;
    EXPECT_EQ(q[w]->wan_stats().drops[static_cast<size_t>(WanDrop::kWrongPort)],
              before[w].drops[static_cast<size_t>(WanDrop::kWrongPort)]);
    EXPECT_EQ(q[w]->wan_stats().drops[static_cast<size_t>(WanDrop::kSteerFull)], 0U);
  }
  // 64 more flows over two queues: some landed on the other worker's queue.
  EXPECT_GT(out, 0U) << "the fanout put every flow on its own worker's queue";
  EXPECT_EQ(in, out);
}

TEST_F(DpdkWanIoTest, RejectsAnOffLinkPeerWithoutNextHop) {
  DpdkWanOptions o = options();
  o.peer = ip4(198, 19, 5, 5);
  EXPECT_THROW(DpdkWanIo{o}, std::invalid_argument);
}

}  // namespace
}  // namespace rowan::gw

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(
      new rowan::gw::Env);  // NOLINT(cppcoreguidelines-owning-memory)
  return RUN_ALL_TESTS();
}
