// A channel over two paths through the public C API over real UDP sockets on
// loopback: path 0 between 127.0.0.1 addresses, path 1 between 127.0.0.2
// addresses, the server listening on the wildcard address. Both paths carry
// the data, every byte arrives checked and in order, the server answers each
// path from the address it was reached at, and a path that cannot join fails
// the connect. Behaviour only: no timing is asserted.
#include <rowan/rowan.h>

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr size_t kMessage = 256 * 1024;
constexpr size_t kMessages = 48;

uint8_t pattern(size_t message, size_t i) {
  return static_cast<uint8_t>((message * 131 + i * 7 + (i >> 9)) & 0xff);
}

// Receives kMessages messages and checks every byte.
struct Sink {
  rowan_channel* ch = nullptr;
  std::vector<std::vector<uint8_t>> bufs;
  size_t received = 0;
  size_t bad = 0;
  size_t bytes = 0;
};

void sink_recv(rowan_channel* ch, void* user, void* buf, size_t len, int status) {
  auto* s = static_cast<Sink*>(user);
  if (status != ROWAN_OK) return;
  const auto* p = static_cast<const uint8_t*>(buf);
  bool ok = len == kMessage;
  for (size_t i = 0; ok && i < len; ++i) ok = p[i] == pattern(s->received, i);
  if (!ok) ++s->bad;
  ++s->received;
  s->bytes += len;
  rowan_channel_post_recv(ch, buf, kMessage, sink_recv, s);
}

// Accepts one channel and drains it until the peer closes.
void serve(rowan_listener* l, Sink* s, std::atomic<int>* accepted, rowan_channel_path_stats* p1) {
  const int rc = rowan_accept(l, 10000, &s->ch);
  accepted->store(rc == ROWAN_OK ? static_cast<int>(rowan_channel_path_count(s->ch)) : rc);
  if (rc != ROWAN_OK) return;
  s->bufs.assign(8, std::vector<uint8_t>(kMessage));
  for (auto& b : s->bufs) rowan_channel_post_recv(s->ch, b.data(), b.size(), sink_recv, s);
  while (rowan_channel_poll(s->ch, 100) >= 0) {
  }
  rowan_channel_path_stats_get(s->ch, 1, p1);
  rowan_channel_close(s->ch);
}

bool starts_with(const char* s, const char* prefix) {
  return std::strncmp(s, prefix, std::strlen(prefix)) == 0;
}

// Sends kMessages patterned messages on `ch` and waits for their completions.
void send_all(rowan_channel* ch, std::vector<std::vector<uint8_t>>* msgs, size_t* done) {
  for (size_t m = 0; m < kMessages; ++m) {
    (*msgs)[m].resize(kMessage);
    for (size_t i = 0; i < kMessage; ++i) (*msgs)[m][i] = pattern(m, i);
    ASSERT_EQ(rowan_channel_send(
                  ch, (*msgs)[m].data(), kMessage,
                  [](rowan_channel*, void* u, const void*, size_t, int st) {
                    if (st == ROWAN_OK) ++*static_cast<size_t*>(u);
                  },
                  done),
              ROWAN_OK);
  }
  ASSERT_EQ(rowan_channel_flush(ch, 60000), ROWAN_OK) << rowan_last_error();
}

// Closes the client's channel, waits for the server and checks what it got.
void finish(rowan_channel* ch, std::thread* server, const std::atomic<int>& accepted,
            const Sink& sink, rowan_listener* l) {
  rowan_channel_close(ch);
  server->join();
  EXPECT_EQ(accepted.load(), 2);
  EXPECT_EQ(sink.received, kMessages);
  EXPECT_EQ(sink.bad, 0u);
  rowan_listener_close(l);
}

TEST(MultipathChannel, TwoPathsBothCarryCheckedBytes) {
  rowan_listener* l = nullptr;
  ASSERT_EQ(rowan_listen("0.0.0.0:0", nullptr, &l), ROWAN_OK) << rowan_last_error();
  const std::string port = std::to_string(rowan_listener_port(l));
  Sink sink;
  std::atomic<int> accepted{0};
  rowan_channel_path_stats server_p1{};
  std::thread server(serve, l, &sink, &accepted, &server_p1);

  rowan_channel_options o;
  rowan_channel_options_init(&o);
  o.rtt_s = 0.01;
  const std::string r0 = "127.0.0.1:" + port, r1 = "127.0.0.2:" + port;
  // Unequal rates, as on two unequal links.
  const std::array<rowan_channel_path, 2> paths{
      rowan_channel_path{"127.0.0.1", r0.c_str(), 200e6, 0},
      rowan_channel_path{"127.0.0.2:0", r1.c_str(), 100e6, 0}};
  rowan_channel* ch = nullptr;
  ASSERT_EQ(rowan_connect_paths(paths.data(), paths.size(), &o, &ch), ROWAN_OK)
      << rowan_last_error();
  ASSERT_EQ(rowan_channel_path_count(ch), 2u);

  std::vector<std::vector<uint8_t>> msgs(kMessages);
  size_t done = 0;
  send_all(ch, &msgs, &done);
  EXPECT_EQ(done, kMessages);

  std::array<rowan_channel_path_stats, 2> ps{};
  uint64_t wire = 0;
  for (size_t i = 0; i < 2; ++i) {
    ASSERT_EQ(rowan_channel_path_stats_get(ch, i, &ps[i]), ROWAN_OK);
    wire += ps[i].wire_bytes_sent;
  }
  rowan_channel_path_stats none{};
  EXPECT_EQ(rowan_channel_path_stats_get(ch, 2, &none), ROWAN_ERR_NOT_FOUND);
  // Each path carried data and heard its ACKs back on its own addresses (a
  // reply from another address would be dropped). On loopback both paths
  // are far faster than the CPU (the controllers measure tens of Gbit/s),
  // so after start-up the scheduler sends on whichever path's smoothed RTT
  // reads lower, and the split follows scheduling noise: on a loaded
  // machine either path has carried as little as 3 % of the bytes. What is
  // certain is the start: 12 MB are waiting, so when the first path's
  // initial window (10 datagrams) is full the second takes its own. The
  // split by rate over paced links is checked in
  // tests/unit/transport/multipath_test.cc (StripingAddsThePathsRates).
  constexpr uint64_t kInitialWindow = 10 * 1472;
  EXPECT_GE(wire, kMessages * kMessage);
  for (size_t i = 0; i < 2; ++i) {
    SCOPED_TRACE(i);
    EXPECT_GE(ps[i].wire_bytes_sent, kInitialWindow);
    EXPECT_GT(ps[i].wire_bytes_acked, 0u);
    EXPECT_GT(ps[i].packets_received, 0u);
    EXPECT_GT(ps[i].srtt_s, 0.0);
    EXPECT_EQ(ps[i].up, 1);
  }
  EXPECT_TRUE(starts_with(ps[0].local, "127.0.0.1:")) << ps[0].local;
  EXPECT_TRUE(starts_with(ps[0].remote, "127.0.0.1:")) << ps[0].remote;
  EXPECT_TRUE(starts_with(ps[1].local, "127.0.0.2:")) << ps[1].local;
  EXPECT_TRUE(starts_with(ps[1].remote, "127.0.0.2:")) << ps[1].remote;
  EXPECT_NE(std::string(ps[1].remote), r1);  // the path's own data port, not the listener's
  EXPECT_DOUBLE_EQ(ps[0].rate_bps, 200e6);
  EXPECT_DOUBLE_EQ(ps[1].rate_bps, 100e6);

  rowan_channel_stats st{};
  ASSERT_EQ(rowan_channel_stats_get(ch, &st), ROWAN_OK);
  EXPECT_EQ(st.packets_sent, ps[0].packets_sent + ps[1].packets_sent);
  finish(ch, &server, accepted, sink, l);
  EXPECT_EQ(sink.bytes, kMessages * kMessage);
  // The server's side of path 1 runs on 127.0.0.2 toward the client's 127.0.0.2.
  EXPECT_TRUE(starts_with(server_p1.local, "127.0.0.2:")) << server_p1.local;
  EXPECT_TRUE(starts_with(server_p1.remote, "127.0.0.2:")) << server_p1.remote;
  EXPECT_GT(server_p1.packets_received, 0u);
}

TEST(MultipathChannel, TwoPathsOverIpv6) {
  // IPv6 (IPV6_RECVPKTINFO and IPV6_PKTINFO): both paths on ::1, each its own ports.
  rowan_listener* l = nullptr;
  if (rowan_listen("[::]:0", nullptr, &l) != ROWAN_OK) GTEST_SKIP() << "no IPv6 here";
  const std::string remote = "[::1]:" + std::to_string(rowan_listener_port(l));
  Sink sink;
  std::atomic<int> accepted{0};
  rowan_channel_path_stats server_p1{};
  std::thread server(serve, l, &sink, &accepted, &server_p1);
  const std::array<rowan_channel_path, 2> paths{rowan_channel_path{"::1", remote.c_str(), 0, 0},
                                                rowan_channel_path{"::1", remote.c_str(), 0, 0}};
  rowan_channel* ch = nullptr;
  ASSERT_EQ(rowan_connect_paths(paths.data(), paths.size(), nullptr, &ch), ROWAN_OK)
      << rowan_last_error();
  std::vector<std::vector<uint8_t>> msgs(kMessages);
  size_t done = 0;
  send_all(ch, &msgs, &done);
  EXPECT_EQ(done, kMessages);
  rowan_channel_path_stats p0{}, p1{};
  ASSERT_EQ(rowan_channel_path_stats_get(ch, 0, &p0), ROWAN_OK);
  ASSERT_EQ(rowan_channel_path_stats_get(ch, 1, &p1), ROWAN_OK);
  EXPECT_NE(std::string(p0.local), std::string(p1.local));
  EXPECT_GT(p1.packets_received, 0u);
  finish(ch, &server, accepted, sink, l);
}

TEST(MultipathChannel, SecurePathsEachRunTheirOwnSession) {
  rowan_channel_keys server_keys{}, client_keys{};
  uint8_t server_pub[ROWAN_KEY_BYTES], client_pub[ROWAN_KEY_BYTES];
  ASSERT_EQ(rowan_key_generate(server_keys.private_key, server_pub), ROWAN_OK);
  ASSERT_EQ(rowan_key_generate(client_keys.private_key, client_pub), ROWAN_OK);
  std::memcpy(server_keys.peer_public_key, client_pub, ROWAN_KEY_BYTES);
  std::memcpy(client_keys.peer_public_key, server_pub, ROWAN_KEY_BYTES);
  rowan_listener* l = nullptr;
  ASSERT_EQ(rowan_listen_secure("0.0.0.0:0", nullptr, &server_keys, &l), ROWAN_OK);
  const std::string port = std::to_string(rowan_listener_port(l));
  Sink sink;
  std::atomic<int> accepted{0};
  rowan_channel_path_stats server_p1{};
  std::thread server(serve, l, &sink, &accepted, &server_p1);
  const std::string r0 = "127.0.0.1:" + port, r1 = "127.0.0.2:" + port;
  const std::array<rowan_channel_path, 2> paths{rowan_channel_path{nullptr, r0.c_str(), 0, 0},
                                                rowan_channel_path{"127.0.0.2", r1.c_str(), 0, 0}};
  rowan_channel* ch = nullptr;
  ASSERT_EQ(rowan_connect_paths_secure(paths.data(), paths.size(), nullptr, &client_keys, &ch),
            ROWAN_OK)
      << rowan_last_error();
  std::vector<std::vector<uint8_t>> msgs(kMessages);
  size_t done = 0;
  send_all(ch, &msgs, &done);
  EXPECT_EQ(done, kMessages);
  rowan_channel_path_stats p1{};
  ASSERT_EQ(rowan_channel_path_stats_get(ch, 1, &p1), ROWAN_OK);
  EXPECT_GT(p1.packets_received, 0u);  // path 1's session authenticates the server's ACKs
  finish(ch, &server, accepted, sink, l);
}

TEST(MultipathChannel, APathThatCannotJoinFailsTheConnect) {
  // The server listens on 127.0.0.1 only: path 1's JOIN to 127.0.0.2 finds nobody.
  rowan_listener* l = nullptr;
  ASSERT_EQ(rowan_listen("127.0.0.1:0", nullptr, &l), ROWAN_OK);
  const std::string port = std::to_string(rowan_listener_port(l));
  std::thread t([&] {
    rowan_channel* s = nullptr;
    EXPECT_EQ(rowan_accept(l, 1500, &s), ROWAN_ERR_TIMEOUT);  // never complete
  });
  rowan_channel_options o;
  rowan_channel_options_init(&o);
  o.handshake_timeout_ms = 600;
  const std::string r0 = "127.0.0.1:" + port, r1 = "127.0.0.2:" + port;
  const std::array<rowan_channel_path, 2> paths{rowan_channel_path{nullptr, r0.c_str(), 0, 0},
                                                rowan_channel_path{"127.0.0.2", r1.c_str(), 0, 0}};
  rowan_channel* ch = nullptr;
  EXPECT_EQ(rowan_connect_paths(paths.data(), paths.size(), &o, &ch), ROWAN_ERR_UNREACHABLE);
  EXPECT_NE(std::string(rowan_last_error()).find("path 1"), std::string::npos)
      << rowan_last_error();
  t.join();
  rowan_listener_close(l);

  // Bad arguments.
  EXPECT_EQ(rowan_connect_paths(paths.data(), 0, nullptr, &ch), ROWAN_ERR_INVALID);
  EXPECT_EQ(rowan_connect_paths(nullptr, 2, nullptr, &ch), ROWAN_ERR_INVALID);
  std::vector<rowan_channel_path> many(ROWAN_MAX_CHANNEL_PATHS + 1, paths[0]);
  EXPECT_EQ(rowan_connect_paths(many.data(), many.size(), nullptr, &ch), ROWAN_ERR_INVALID);
  const std::array<rowan_channel_path, 2> mixed{rowan_channel_path{nullptr, r0.c_str(), 0, 0},
                                                rowan_channel_path{nullptr, "[::1]:5201", 0, 0}};
  EXPECT_EQ(rowan_connect_paths(mixed.data(), mixed.size(), nullptr, &ch), ROWAN_ERR_INVALID);
  const std::array<rowan_channel_path, 1> no_remote{rowan_channel_path{nullptr, nullptr, 0, 0}};
  EXPECT_EQ(rowan_connect_paths(no_remote.data(), 1, nullptr, &ch), ROWAN_ERR_INVALID);
  EXPECT_EQ(rowan_channel_path_count(nullptr), 0u);
}

}  // namespace
