// The local port's doorbell (daemon/rowand/datapath/rx_waker.h): which specs get one,
// that it rings for an incoming frame and not for an outgoing one, that
// arm() empties it and a flood cannot grow it, and that UdpUringIo::wait
// ends when it rings. Runs in a network namespace of its own (root), so
// only this test's frames reach its loopback.
#include "datapath/rx_waker.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "io/udp_uring.h"

namespace rowan::gw {
namespace {

bool readable(int fd, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, timeout_ms) == 1 && (p.revents & POLLIN) != 0;
}

// Sends `n` UDP datagrams to 127.0.0.1:9, where a socket of its own takes
// them (a closed port would answer each with an ICMP error: a second frame).
void send_to_lo(int n) {
  const int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
  const int sink = ::socket(AF_INET, SOCK_DGRAM, 0);
  ASSERT_GE(fd, 0);
  ASSERT_GE(sink, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(9);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(sink, reinterpret_cast<const sockaddr*>(&a), sizeof a), 0);
  const char msg[] = "ring";
  for (int i = 0; i < n; ++i) {
    ::sendto(fd, msg, sizeof msg, 0, reinterpret_cast<const sockaddr*>(&a), sizeof a);
  }
  ::close(fd);
  ::close(sink);
}

class RxWakerOnLoopback : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (a network namespace, AF_PACKET)";
    ASSERT_EQ(unshare(CLONE_NEWNET), 0) << "unshare(CLONE_NEWNET)";
    ASSERT_EQ(std::system("ip link set lo up"), 0);
  }
};

TEST(RxWaker, OnlyAfPacketSpecsGetADoorbell) {
  EXPECT_EQ(RxWaker::af_packet_iface("net_af_packet0,iface=rowan-a-lan"), "rowan-a-lan");
  EXPECT_EQ(RxWaker::af_packet_iface("net_af_packet1,qpairs=1,iface=x,blocksz=4096"), "x");
  EXPECT_EQ(RxWaker::af_packet_iface("net_af_packet0"), "");
  EXPECT_EQ(RxWaker::af_packet_iface("net_memif0,role=server,iface=x"), "");
  EXPECT_EQ(RxWaker::af_packet_iface("0000:3b:00.0"), "");
  const RxWaker memif("net_memif0,role=server");
  EXPECT_EQ(memif.fd(), -1);
  EXPECT_FALSE(memif.why_not().empty());
  const RxWaker missing("net_af_packet0,iface=rowan-nosuch0");
  EXPECT_EQ(missing.fd(), -1);
  EXPECT_NE(missing.why_not().find("rowan-nosuch0"), std::string::npos) << missing.why_not();
}

TEST_F(RxWakerOnLoopback, RingsForAFrameAndArmEmptiesIt) {
  RxWaker w("net_af_packet0,iface=lo");
  ASSERT_GE(w.fd(), 0) << w.why_not();
  w.arm();
  EXPECT_FALSE(readable(w.fd(), 0));
  send_to_lo(1);
  ASSERT_TRUE(readable(w.fd(), 2000)) << "no ring for an incoming frame";
  // Loopback shows the datagram twice (out, then in): only the incoming
  // frame rings.
  EXPECT_EQ(w.arm(), 1u);
  EXPECT_FALSE(readable(w.fd(), 0));
}

TEST_F(RxWakerOnLoopback, AFloodLeavesOnlyAFewFramesToEmpty) {
  RxWaker w("net_af_packet0,iface=lo");
  ASSERT_GE(w.fd(), 0) << w.why_not();
  send_to_lo(2000);
  ASSERT_TRUE(readable(w.fd(), 2000));
  const uint32_t held = w.arm();
  EXPECT_GE(held, 1u);
  EXPECT_LT(held, 64u) << "the doorbell queued frames like a receive socket";
  EXPECT_FALSE(readable(w.fd(), 0));
}

TEST_F(RxWakerOnLoopback, UdpWaitEndsWhenTheDoorbellRings) {
  RxWaker w("net_af_packet0,iface=lo");
  ASSERT_GE(w.fd(), 0) << w.why_not();
  io::UdpUringOptions o;
  o.bind = io::UdpEndpoint::parse("127.0.0.1:47001");
  o.peer = io::UdpEndpoint::parse("127.0.0.1:47002");
  io::UdpUringIo udp(o);
  w.arm();
  // Nothing rings: the wait lasts its timeout.
  auto t0 = std::chrono::steady_clock::now();
  udp.wait(Duration::from_ms(50), w.fd());
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(45));
  // A frame for someone else (port 9) rings it: the wait ends long before
  // its 20 s timeout, and again on a later wait after arm() emptied it.
  for (int round = 0; round < 2; ++round) {
    std::thread ringer([] {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      send_to_lo(1);
    });
    t0 = std::chrono::steady_clock::now();
    udp.wait(Duration::from_ms(20000), w.fd());
    const auto took = std::chrono::steady_clock::now() - t0;
    ringer.join();
    EXPECT_LT(took, std::chrono::seconds(10)) << "round " << round;
    ASSERT_TRUE(readable(w.fd(), 0));
    EXPECT_EQ(w.arm(), 1u);
    // The fired poll's completion is consumed like any other.
    std::array<uint8_t, 64> buf{};
    io::RxDatagram d{buf.data(), static_cast<uint32_t>(buf.size())};
    EXPECT_EQ(udp.recv_burst(std::span(&d, 1), TimePoint()), 0u);
  }
}

}  // namespace
}  // namespace rowan::gw
