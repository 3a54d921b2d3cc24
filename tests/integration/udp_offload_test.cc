// UDP GSO/GRO of the io_uring backend (lib/src/io/udp_uring.h) across a veth
// pair between two network namespaces the test creates (198.18.77.0/24), the
// paths loopback cannot show:
// - with the testbed's offloads (scripts/two-site: tx, rx, tso, gso, gro off)
//   a GSO run is cut into datagrams by the kernel before the veth, so the
//   far side (and the emulator's AF_PACKET ring on the testbed) sees
//   ordinary datagrams: all arrive, none as a GRO train;
// - with the veth's default offloads the run crosses it as one GSO packet:
//   a UDP_GRO socket takes it as one train and the backend splits it back,
//   and a socket without UDP_GRO gets it cut by its own kernel.
// Needs root (namespaces); no testbed, no lock.
#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "io/udp_uring.h"
#include "tools/shell.h"

namespace rowan::test {
namespace {

using io::UdpEndpoint;
using io::UdpUringIo;
using io::UdpUringOptions;

class UdpOffloadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (network namespaces)";
    for (const char* tool : {"ip", "ethtool"}) {
      if (!have_tool(tool)) GTEST_SKIP() << tool << " is not installed (scripts/setup-deps)";
    }
    const std::string id = std::to_string(getpid());
    ns_a_ = "rowan-gso-" + id + "-a";
    ns_b_ = "rowan-gso-" + id + "-b";
    dev_a_ = "rgso" + id + "a";
    dev_b_ = "rgso" + id + "b";
    ASSERT_EQ(
        shell("ip netns add " + ns_a_ + " && ip netns add " + ns_b_ + " && ip link add " + dev_a_ +
              " netns " + ns_a_ + " type veth peer name " + dev_b_ + " netns " + ns_b_ +
              " && ip -n " + ns_a_ + " addr add " + kA + "/24 dev " + dev_a_ + " && ip -n " +
              ns_b_ + " addr add " + kB + "/24 dev " + dev_b_ + " && ip -n " + ns_a_ +
              " link set " + dev_a_ + " up && ip -n " + ns_b_ + " link set " + dev_b_ + " up")
            .status,
        0);
  }
  void TearDown() override {
    if (!ns_a_.empty())
      shell("ip netns del " + ns_a_ + " 2>/dev/null; ip netns del " + ns_b_ + " 2>/dev/null");
  }

  // The testbed's settings (scripts/two-site) on both ends.
  void testbed_offloads() {
    for (const auto& [ns, dev] : {std::pair{ns_a_, dev_a_}, std::pair{ns_b_, dev_b_}}) {
      ASSERT_EQ(shell("ip netns exec " + ns + " ethtool -K " + dev +
                      " tx off rx off tso off gso off gro off >/dev/null 2>&1; ip netns exec " +
                      ns + " ethtool -k " + dev + " | grep -q 'tx-udp-segmentation: off'")
                    .status,
                0);
    }
  }

  // Constructs a backend inside namespace `ns` (its socket stays there).
  static std::unique_ptr<UdpUringIo> open_in(const std::string& ns, const UdpUringOptions& o) {
    std::unique_ptr<UdpUringIo> io;
    std::string error;
    std::thread t([&] {
      const int fd = open(("/var/run/netns/" + ns).c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0 || setns(fd, CLONE_NEWNET) != 0) {
        error = "setns " + ns;
        if (fd >= 0) close(fd);
        return;
      }
      close(fd);
      try {
        io = std::make_unique<UdpUringIo>(o);
      } catch (const std::exception& e) {
        error = e.what();
      }
    });
    t.join();
    EXPECT_EQ(error, "");
    return io;
  }

  struct Ends {
    std::unique_ptr<UdpUringIo> a, b;
  };
  Ends open_pair(bool b_gro) {
    UdpUringOptions oa;
    oa.bind = UdpEndpoint::parse(std::string(kA) + ":47990");
    oa.peer = UdpEndpoint::parse(std::string(kB) + ":47990");
    UdpUringOptions ob;
    ob.bind = oa.peer;
    ob.peer = oa.bind;
    ob.gro = b_gro;
    return Ends{open_in(ns_a_, oa), open_in(ns_b_, ob)};
  }

  // Sends `count` datagrams of `size` bytes (each filled with its index) in
  // one burst; checks b gets them all, whole and in order.
  static void carry(UdpUringIo& a, UdpUringIo& b, size_t count, uint32_t size) {
    std::vector<uint8_t> pl(count * size);
    for (size_t i = 0; i < pl.size(); ++i) pl[i] = static_cast<uint8_t>(i / size);
    std::vector<io::TxDatagram> tx(count);
    for (size_t i = 0; i < count; ++i) tx[i] = {pl.data() + i * size, size};
    ASSERT_EQ(a.send_burst(tx, TimePoint()), count);
    std::vector<uint8_t> mem(count * 1472);
    std::vector<io::RxDatagram> rx(count);
    for (size_t i = 0; i < count; ++i) rx[i] = {mem.data() + i * 1472, 1472};
    size_t got = 0;
    for (int spin = 0; spin < 2000 && got < count; ++spin) {
      got += b.recv_burst(std::span(rx.data() + got, count - got), TimePoint());
      if (got < count) b.wait(Duration::from_ms(1));
    }
    ASSERT_EQ(got, count);
    for (size_t i = 0; i < count; ++i) {
      ASSERT_EQ(rx[i].len, size) << "datagram " << i;
      EXPECT_EQ(std::memcmp(rx[i].data, pl.data() + i * size, size), 0) << "datagram " << i;
    }
  }

  static constexpr const char* kA = "198.18.77.1";
  static constexpr const char* kB = "198.18.77.2";
  std::string ns_a_, ns_b_, dev_a_, dev_b_;
};

TEST_F(UdpOffloadTest, WithTheTestbedsOffloadsARunLeavesAsOrdinaryDatagrams) {
  testbed_offloads();
  Ends e = open_pair(true);
  ASSERT_TRUE(e.a && e.b);
  carry(*e.a, *e.b, 32, 1000);
  // The kernel took the run as one send (or refused it and the backend sent
  // it again one by one); either way nothing crossed the veth coalesced.
  const io::UdpStats& s = e.a->udp_stats();
  EXPECT_TRUE((s.gso_fallbacks == 0 && s.tx_gso_sends == 1) || s.gso_fallbacks == 1)
      << "gso_sends " << s.tx_gso_sends << ", fallbacks " << s.gso_fallbacks;
  EXPECT_EQ(e.b->udp_stats().rx_gro_trains, 0u);
  EXPECT_EQ(e.a->udp_stats().tx_errors, 0u);
}

TEST_F(UdpOffloadTest, WithDefaultOffloadsARunCrossesWholeAndIsSplitBack) {
  Ends e = open_pair(true);
  ASSERT_TRUE(e.a && e.b);
  carry(*e.a, *e.b, 40, 1200);  // one run: 40 x 1200 = 48,000 bytes
  EXPECT_EQ(e.a->udp_stats().tx_gso_sends, 1u);
  EXPECT_EQ(e.b->udp_stats().rx_gro_trains, 1u);
  EXPECT_EQ(e.b->udp_stats().rx_gro_datagrams, 40u);
}

TEST_F(UdpOffloadTest, ASocketWithoutGroGetsTheRunCutByItsKernel) {
  Ends e = open_pair(false);
  ASSERT_TRUE(e.a && e.b);
  carry(*e.a, *e.b, 40, 1200);
  EXPECT_EQ(e.a->udp_stats().tx_gso_sends, 1u);
  EXPECT_EQ(e.b->udp_stats().rx_gro_trains, 0u);
}

}  // namespace
}  // namespace rowan::test
