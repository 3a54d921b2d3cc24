// The library's own channel over two paths on a FakeClock (two in-memory
// LoopbackLinks of unequal delay): a path blackholed in the middle of a
// transfer is declared down and what it had in flight is resent on the
// other, so every message arrives, checked byte by byte and in order. And
// the listener's side of the multipath handshake against forged and
// repeated datagrams: each bad one is a counted drop, never a crash.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "api/channel.h"
#include "api/channel_handshake.h"
#include "io/loopback.h"
#include "tools/fake_clock.h"

namespace rowan::test {
namespace {

constexpr size_t kMessage = 64 * 1024;
constexpr size_t kMessages = 160;

uint8_t pattern(size_t message, size_t i) {
  return static_cast<uint8_t>((message * 151 + i * 13 + (i >> 8)) & 0xff);
}

api::ChannelParams params() {
  api::ChannelParams p;
  p.rate_bps = 100e6;
  p.rtt_s = 0.02;
  return p;  // the default congestion controller
}

std::vector<transport::PathConfig> two_paths() {
  return {transport::PathConfig{BitsPerSec::from_mbps(100), Duration::from_ms(20)},
          transport::PathConfig{BitsPerSec::from_mbps(50), Duration::from_ms(30)}};
}

struct Received {
  size_t count = 0;
  size_t bad = 0;
  std::vector<std::vector<uint8_t>> bufs;
};

void on_recv(rowan_channel* ch, void* user, void* buf, size_t len, int status) {
  auto* r = static_cast<Received*>(user);
  if (status != ROWAN_OK) return;
  const auto* p = static_cast<const uint8_t*>(buf);
  bool ok = len == kMessage;
  for (size_t i = 0; ok && i < len; ++i) ok = p[i] == pattern(r->count, i);
  if (!ok) ++r->bad;
  ++r->count;
  ch->post_recv(buf, kMessage, on_recv, r);
}

TEST(MultipathChannelFailover, ABlackholedPathLosesNothing) {
  FakeClock clock;
  io::LoopbackLink link0(1472, 8192, 1), link1(1472, 8192, 2);
  io::Impairment fast, slow;
  fast.delay = Duration::from_ms(10);
  slow.delay = Duration::from_ms(15);
  for (int dir = 0; dir < 2; ++dir) {
    link0.set_impairment(dir, fast);
    link1.set_impairment(dir, slow);
  }
  rowan_channel a(params(), {&link0.a(), &link1.a()}, two_paths(), clock,
                  io::UdpEndpoint::parse("198.18.2.10:5201"), 7);
  rowan_channel b(params(), {&link0.b(), &link1.b()}, two_paths(), clock,
                  io::UdpEndpoint::parse("198.18.1.10:40000"), 7);
  ASSERT_EQ(a.path_count(), 2u);

  Received got;
  got.bufs.assign(8, std::vector<uint8_t>(kMessage));
  for (auto& buf : got.bufs) ASSERT_EQ(b.post_recv(buf.data(), kMessage, on_recv, &got), ROWAN_OK);
  std::vector<std::vector<uint8_t>> msgs(kMessages, std::vector<uint8_t>(kMessage));
  size_t completed = 0;
  for (size_t m = 0; m < kMessages; ++m) {
    for (size_t i = 0; i < kMessage; ++i) msgs[m][i] = pattern(m, i);
    ASSERT_EQ(a.send(
                  msgs[m].data(), kMessage,
                  [](rowan_channel*, void* u, const void*, size_t, int st) {
                    if (st == ROWAN_OK) ++*static_cast<size_t*>(u);
                  },
                  &completed),
              ROWAN_OK);
  }

  // Run until a third has arrived, with both paths carrying data.
  rowan_channel_path_stats before{};
  int64_t t = 0;
  for (; t < 20000 && got.count < kMessages / 3; ++t) {
    clock.advance(Duration::from_ms(1));
    ASSERT_GE(a.poll(0), 0);
    ASSERT_GE(b.poll(0), 0);
  }
  // (A pass may complete several messages: the cut comes mid-transfer.)
  ASSERT_GE(got.count, kMessages / 3);
  ASSERT_LT(got.count, kMessages / 2);
  a.fill_path_stats(1, &before);
  ASSERT_GT(before.wire_bytes_sent, 0u) << "path 1 carried nothing before the cut";
  ASSERT_EQ(before.up, 1);

  // Blackhole path 1 both ways, mid-transfer.
  io::Impairment cut = slow;
  cut.loss = 1.0;
  link1.set_impairment(0, cut);
  link1.set_impairment(1, cut);
  for (; t < 60000 && (got.count < kMessages || completed < kMessages); ++t) {
    clock.advance(Duration::from_ms(1));
    ASSERT_GE(a.poll(0), 0);
    ASSERT_GE(b.poll(0), 0);
  }
  EXPECT_EQ(got.count, kMessages);
  EXPECT_EQ(got.bad, 0u);
  EXPECT_EQ(completed, kMessages);
  // The cut path, unanswered (its data, then its keepalives), goes down
  // within path_keepalive + max(3 x srtt, path_down_floor) of the cut.
  for (int64_t idle = 0; idle < 1000; ++idle) {
    clock.advance(Duration::from_ms(1));
    ASSERT_GE(a.poll(0), 0);
    ASSERT_GE(b.poll(0), 0);
  }

  rowan_channel_path_stats p0{}, p1{};
  a.fill_path_stats(0, &p0);
  a.fill_path_stats(1, &p1);
  EXPECT_EQ(p0.up, 1);
  EXPECT_EQ(p1.up, 0);  // declared down: its flight went to path 0
  EXPECT_GE(p1.downs, 1u);
  EXPECT_GT(p0.wire_bytes_sent, before.wire_bytes_sent);
  EXPECT_GT(link1.channel_stats(0).dropped, 0u);
}

// ---- The listener's side of the handshake ----------------------------------

class RawSocket {
 public:
  RawSocket() {
    fd_ = ::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
  }
  ~RawSocket() { ::close(fd_); }
  RawSocket(const RawSocket&) = delete;
  RawSocket& operator=(const RawSocket&) = delete;

  void send(const api::Handshake& h, int port) const {
    uint8_t buf[api::kHandshakeSize];
    api::encode_handshake(h, buf);
    send_bytes(buf, sizeof buf, port);
  }
  void send_bytes(const uint8_t* buf, size_t len, int port) const {
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    to.sin_port = htons(static_cast<uint16_t>(port));
    ::sendto(fd_, buf, len, 0, reinterpret_cast<sockaddr*>(&to), sizeof to);
  }
  /// The next answer within 1 s; false when none.
  bool receive(api::Handshake* h) const {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, 1000) != 1) return false;
    uint8_t buf[128];
    const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    return n > 0 && api::decode_handshake(buf, static_cast<size_t>(n), h);
  }

 private:
  int fd_ = -1;
};

api::Handshake join(uint64_t nonce, uint64_t id, uint8_t path) {
  api::Handshake h;
  h.type = api::HandshakeType::kJoin;
  h.nonce = nonce;
  h.connection_id = id;
  h.path = path;
  return h;
}

TEST(MultipathHandshake, ForgedAndRepeatedDatagramsAreCountedDrops) {
  rowan_listener l("127.0.0.1:0", params());
  const int port = l.port();
  rowan_channel* ch = nullptr;

  // Garbage and a JOIN for no channel being set up.
  RawSocket stranger;
  const uint8_t junk[5] = {1, 2, 3, 4, 5};
  stranger.send_bytes(junk, sizeof junk, port);
  stranger.send(join(1, 12345, 1), port);
  EXPECT_EQ(l.accept(100, &ch), ROWAN_ERR_TIMEOUT);
  EXPECT_EQ(l.dropped(), 2u);

  // More paths than a channel takes: rejected.
  api::Handshake hello;
  hello.nonce = 77;
  hello.path = api::kMaxChannelPaths + 1;
  stranger.send(hello, port);
  EXPECT_EQ(l.accept(100, &ch), ROWAN_ERR_TIMEOUT);
  api::Handshake reply;
  ASSERT_TRUE(stranger.receive(&reply));
  EXPECT_EQ(reply.type, api::HandshakeType::kReject);

  // A channel over three paths.
  RawSocket p0, p1, p1_again, p2;
  hello.nonce = 78;
  hello.path = 3;
  p0.send(hello, port);
  EXPECT_EQ(l.accept(100, &ch), ROWAN_ERR_TIMEOUT);
  api::Handshake accept0;
  ASSERT_TRUE(p0.receive(&accept0));
  ASSERT_EQ(accept0.type, api::HandshakeType::kAccept);
  EXPECT_EQ(accept0.path, 3);
  EXPECT_NE(accept0.data_port, 0);
  const uint64_t id = accept0.connection_id;

  const uint64_t before = l.dropped();
  p1.send(join(78, id, 1), port);
  p1_again.send(join(78, id, 1), port);  // path 1 from a second address
  p2.send(join(79, id, 2), port);        // the wrong nonce
  p2.send(join(78, id, 0), port);        // path 0 does not join
  p2.send(join(78, id, 3), port);        // beyond the count
  p2.send(join(78, id + 1, 2), port);    // another connection
  EXPECT_EQ(l.accept(100, &ch), ROWAN_ERR_TIMEOUT);
  EXPECT_EQ(l.dropped(), before + 5);
  api::Handshake accept1;
  ASSERT_TRUE(p1.receive(&accept1));
  EXPECT_EQ(accept1.type, api::HandshakeType::kAccept);
  EXPECT_EQ(accept1.path, 1);
  EXPECT_EQ(accept1.connection_id, id);

  // The last path completes the channel; a repeated JOIN (its ACCEPT lost)
  // gets the same answer.
  p2.send(join(78, id, 2), port);
  ASSERT_EQ(l.accept(1000, &ch), ROWAN_OK);
  std::unique_ptr<rowan_channel> owned(ch);
  EXPECT_EQ(ch->path_count(), 3u);
  EXPECT_EQ(ch->id(), id);
  api::Handshake accept2, again;
  ASSERT_TRUE(p2.receive(&accept2));
  p2.send(join(78, id, 2), port);
  EXPECT_EQ(l.accept(100, &ch), ROWAN_ERR_TIMEOUT);
  ASSERT_TRUE(p2.receive(&again));
  EXPECT_EQ(again.data_port, accept2.data_port);
  EXPECT_EQ(again.path, 2);
}

TEST(MultipathHandshake, ASetUpWhosePathsNeverJoinExpires) {
  api::ChannelParams p = params();
  p.handshake_timeout_ms = 200;
  rowan_listener l("127.0.0.1:0", p);
  RawSocket p0;
  api::Handshake hello;
  hello.nonce = 5;
  hello.path = 2;
  p0.send(hello, l.port());
  rowan_channel* ch = nullptr;
  EXPECT_EQ(l.accept(600, &ch), ROWAN_ERR_TIMEOUT);
  EXPECT_EQ(l.dropped(), 1u);  // the set-up, expired
  api::Handshake accept0;
  ASSERT_TRUE(p0.receive(&accept0));
  // Its path 1 comes too late: a JOIN for nothing.
  RawSocket p1;
  p1.send(join(5, accept0.connection_id, 1), l.port());
  EXPECT_EQ(l.accept(100, &ch), ROWAN_ERR_TIMEOUT);
  EXPECT_EQ(l.dropped(), 2u);
}

}  // namespace
}  // namespace rowan::test
