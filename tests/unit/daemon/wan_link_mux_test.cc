// One UDP socket shared by several peers (wan_link_mux.h), on 127.0.0.1:
// datagrams reach the port of the connection id in their header (plaintext
// links) or of their source (encrypted links), a port's sends go to its
// peer, and what nobody claims or no queue can hold is counted.
#include "datapath/wan_link_mux.h"

#include <unistd.h>

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "transport/wire.h"

namespace rowan::gw {
namespace {

uint16_t base_port() { return static_cast<uint16_t>(20000 + (getpid() % 5000) * 4); }

io::UdpEndpoint at(uint16_t port) {
  return io::UdpEndpoint::parse("127.0.0.1:" + std::to_string(port));
}

// A peer gateway's socket, connected to the mux's.
std::unique_ptr<io::UdpUringIo> peer_socket(uint16_t port, uint16_t mux_port) {
  io::UdpUringOptions o;
  o.bind = at(port);
  o.peer = at(mux_port);
  return std::make_unique<io::UdpUringIo>(o);
}

// A shared socket at `port` with ports for peers B (at port + 1, connection
// 0xB) and C (port + 2, 0xC), and those peers' own sockets.
struct TwoPeers {
  TwoPeers(uint16_t port, UdpLinkMux::Key key) {
    io::UdpUringOptions o;
    o.bind = at(port);
    mux = std::make_unique<UdpLinkMux>(o, key);
    b = &mux->add_port(at(static_cast<uint16_t>(port + 1)), 0xB);
    c = &mux->add_port(at(static_cast<uint16_t>(port + 2)), 0xC);
    peer_b = peer_socket(static_cast<uint16_t>(port + 1), port);
    peer_c = peer_socket(static_cast<uint16_t>(port + 2), port);
  }
  std::unique_ptr<UdpLinkMux> mux;
  UdpLinkPort* b = nullptr;
  UdpLinkPort* c = nullptr;
  std::unique_ptr<io::UdpUringIo> peer_b, peer_c;
};

// A datagram with a transport header for `cid`; byte 20 numbers it.
std::vector<uint8_t> datagram(uint64_t cid, uint8_t seq) {
  std::vector<uint8_t> d(transport::wire::kMaxOverhead + 8, 0);
  transport::wire::Header h;
  h.connection_id = cid;
  h.packet_number = seq;
  transport::wire::write_header(d.data(), h);
  d[20] = seq;
  return d;
}

void send(io::PacketIo& io, const std::vector<uint8_t>& d) {
  const io::TxDatagram t{d.data(), static_cast<uint32_t>(d.size())};
  ASSERT_EQ(io.send_burst(std::span(&t, 1), TimePoint()), 1u);
}

// Receives from `io` until `n` datagrams came (or a bounded number of tries).
std::vector<std::vector<uint8_t>> receive(io::PacketIo& io, size_t n) {
  std::vector<std::vector<uint8_t>> got;
  std::vector<uint8_t> mem(32 * 2048);
  std::vector<io::RxDatagram> bufs(32);
  for (size_t i = 0; i < bufs.size(); ++i) bufs[i] = io::RxDatagram{mem.data() + i * 2048, 2048};
  for (int tries = 0; tries < 2000 && got.size() < n; ++tries) {
    const size_t k = io.recv_burst(std::span(bufs), TimePoint());
    for (size_t i = 0; i < k; ++i) got.emplace_back(bufs[i].data, bufs[i].data + bufs[i].len);
    if (k == 0) usleep(200);
  }
  return got;
}

TEST(WanLinkMux, PlaintextDatagramsGoToTheirConnectionsPort) {
  const uint16_t p = base_port();
  TwoPeers t(p, UdpLinkMux::Key::kConnectionId);
  EXPECT_THROW(t.mux->add_port(at(static_cast<uint16_t>(p + 3)), 0xB), std::invalid_argument);
  // C's datagrams interleaved with B's, one with an unknown id, one too
  // short for a header.
  for (uint8_t i = 0; i < 10; ++i) {
    send(*t.peer_b, datagram(0xB, i));
    send(*t.peer_c, datagram(0xC, i));
  }
  send(*t.peer_c, datagram(0xD, 99));
  send(*t.peer_b, std::vector<uint8_t>(5, 1));
  const auto got_b = receive(*t.b, 10);
  const auto got_c = receive(*t.c, 10);
  ASSERT_EQ(got_b.size(), 10u);
  ASSERT_EQ(got_c.size(), 10u);
  for (uint8_t i = 0; i < 10; ++i) {
    EXPECT_EQ(got_b[i], datagram(0xB, i));  // in order, byte for byte
    EXPECT_EQ(got_c[i], datagram(0xC, i));
  }
  receive(*t.b, 1);  // nothing more comes, whatever is left is sorted
  EXPECT_EQ(t.mux->drops()[static_cast<size_t>(MuxDrop::kUnknownConnection)], 2u);
  EXPECT_EQ(t.b->stats().rx_packets, 10u);
  EXPECT_EQ(t.c->stats().rx_packets, 10u);
  // Sends go to each port's own peer.
  send(*t.b, datagram(0xB, 50));
  send(*t.c, datagram(0xC, 60));
  const auto at_b = receive(*t.peer_b, 1);
  const auto at_c = receive(*t.peer_c, 1);
  ASSERT_EQ(at_b.size(), 1u);
  ASSERT_EQ(at_c.size(), 1u);
  EXPECT_EQ(at_b[0], datagram(0xB, 50));
  EXPECT_EQ(at_c[0], datagram(0xC, 60));
  EXPECT_EQ(t.b->stats().tx_packets, 1u);
}

TEST(WanLinkMux, EncryptedDatagramsGoToTheirSourcesPort) {
  const uint16_t p = static_cast<uint16_t>(base_port() + 1000);
  TwoPeers t(p, UdpLinkMux::Key::kSource);
  auto stranger = peer_socket(p + 3, p);
  // The header says nothing here (ciphertext): the source decides.
  send(*t.peer_b, datagram(0xC, 1));
  send(*t.peer_c, datagram(0xB, 2));
  send(*stranger, datagram(0xB, 3));
  const auto got_c = receive(*t.c, 1);
  const auto got_b = receive(*t.b, 1);
  ASSERT_EQ(got_b.size(), 1u);
  ASSERT_EQ(got_c.size(), 1u);
  EXPECT_EQ(got_b[0][20], 1);
  EXPECT_EQ(got_c[0][20], 2);
  receive(*t.b, 1);
  EXPECT_EQ(t.mux->drops()[static_cast<size_t>(MuxDrop::kUnknownSource)], 1u);
}

// A peer whose port is not read for a while: its queue holds kQueue
// datagrams, the rest is dropped and counted, and the other peer's
// datagrams keep flowing.
TEST(WanLinkMux, AFullQueueDropsAndCounts) {
  const uint16_t p = static_cast<uint16_t>(base_port() + 2000);
  TwoPeers t(p, UdpLinkMux::Key::kConnectionId);
  constexpr uint32_t kSent = UdpLinkPort::kQueue + 40;
  for (uint32_t i = 0; i < kSent; ++i) {
    send(*t.peer_c, datagram(0xC, static_cast<uint8_t>(i)));
    if (i % 64 == 63) usleep(2000);  // within the socket buffer
  }
  send(*t.peer_b, datagram(0xB, 7));
  const auto got_b = receive(*t.b, 1);  // sorts C's datagrams on the way
  ASSERT_EQ(got_b.size(), 1u);
  EXPECT_EQ(got_b[0][20], 7);
  const auto got_c = receive(*t.c, kSent);
  EXPECT_EQ(got_c.size() + t.mux->drops()[static_cast<size_t>(MuxDrop::kQueueFull)], kSent);
  ASSERT_GE(got_c.size(), UdpLinkPort::kQueue);
  EXPECT_GT(t.mux->drops()[static_cast<size_t>(MuxDrop::kQueueFull)], 0u);
  for (size_t i = 0; i < UdpLinkPort::kQueue; ++i) EXPECT_EQ(got_c[i][20], static_cast<uint8_t>(i));
}

}  // namespace
}  // namespace rowan::gw
