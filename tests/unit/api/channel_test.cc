// The message channel through the public C API over real UDP sockets on
// loopback (io_uring, the transport, a registered congestion controller):
// ordered whole messages with verified bytes both ways, completions,
// oversize messages, close, handshake failures.
#include <rowan/rowan.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

struct Echo {
  rowan_channel* ch = nullptr;
  std::vector<std::vector<uint8_t>> bufs;
  int received = 0;
  int closed_callbacks = 0;
  int errors = 0;
};

void echo_recv(rowan_channel* ch, void* user, void* buf, size_t len, int status) {
  auto* e = static_cast<Echo*>(user);
  if (status == ROWAN_ERR_CLOSED) {
    ++e->closed_callbacks;
    return;
  }
  if (status != ROWAN_OK) {
    ++e->errors;
  } else {
    ++e->received;
    // Echo it back; the buffer is reposted once the echo completed.
    if (rowan_channel_send(
            ch, buf, len,
            [](rowan_channel* c, void* u, const void* b, size_t, int st) {
              if (st == ROWAN_OK)
                rowan_channel_post_recv(c, const_cast<void*>(b), 1 << 20, echo_recv, u);
            },
            e) != ROWAN_OK)
      ++e->errors;
    return;
  }
  rowan_channel_post_recv(ch, buf, 1 << 20, echo_recv, e);
}

// Serves one channel as an echo until the peer closes.
void echo_server(rowan_listener* l, Echo* e, std::atomic<int>* result) {
  int rc = rowan_accept(l, 10000, &e->ch);
  if (rc != ROWAN_OK) {
    result->store(rc);
    return;
  }
  e->bufs.assign(4, std::vector<uint8_t>(1 << 20));
  for (auto& b : e->bufs) rowan_channel_post_recv(e->ch, b.data(), b.size(), echo_recv, e);
  while ((rc = rowan_channel_poll(e->ch, 100)) >= 0) {
  }
  result->store(rc);
  rowan_channel_close(e->ch);
}

struct Client {
  std::vector<std::vector<uint8_t>> sent;
  std::vector<std::vector<uint8_t>> got;
  std::vector<size_t> got_len;
  size_t completions = 0;
  size_t next_expected = 0;
  size_t mismatches = 0;
  size_t send_order_errors = 0;
};

TEST(Channel, EchoesMessagesWholeAndInOrder) {
  rowan_listener* l = nullptr;
  ASSERT_EQ(rowan_listen("127.0.0.1:0", nullptr, &l), ROWAN_OK) << rowan_last_error();
  const int port = rowan_listener_port(l);
  ASSERT_GT(port, 0);
  Echo echo;
  std::atomic<int> server_rc{1};
  std::thread server(echo_server, l, &echo, &server_rc);

  rowan_channel_options o;
  rowan_channel_options_init(&o);
  o.cc = "cubic";
  rowan_channel* ch = nullptr;
  const std::string addr = "127.0.0.1:" + std::to_string(port);
  ASSERT_EQ(rowan_connect(addr.c_str(), &o, &ch), ROWAN_OK) << rowan_last_error();
  EXPECT_NE(rowan_channel_id(ch), 0u);

  constexpr size_t kMessages = 60;
  Client c;
  std::mt19937 rng(7);
  for (size_t i = 0; i < kMessages; ++i) {
    // Sizes from empty to 700 kB, bytes random.
    const size_t len = i == 0 ? 0 : (i % 7 == 0 ? 700000 : rng() % 70000);
    std::vector<uint8_t> m(len);
    for (auto& b : m) b = static_cast<uint8_t>(rng());
    c.sent.push_back(std::move(m));
  }
  c.got.assign(kMessages, std::vector<uint8_t>(1 << 20));
  c.got_len.assign(kMessages, 0);
  for (size_t i = 0; i < kMessages; ++i) {
    ASSERT_EQ(rowan_channel_post_recv(
                  ch, c.got[i].data(), c.got[i].size(),
                  [](rowan_channel*, void* u, void* buf, size_t len, int st) {
                    auto* cl = static_cast<Client*>(u);
                    const size_t k = cl->next_expected++;
                    if (st != ROWAN_OK || buf != cl->got[k].data() || len != cl->sent[k].size() ||
                        std::memcmp(buf, cl->sent[k].data(), len) != 0)
                      ++cl->mismatches;
                  },
                  &c),
              ROWAN_OK);
  }
  for (size_t i = 0; i < kMessages; ++i) {
    ASSERT_EQ(rowan_channel_send(
                  ch, c.sent[i].data(), c.sent[i].size(),
                  [](rowan_channel*, void* u, const void* buf, size_t, int st) {
                    auto* cl = static_cast<Client*>(u);
                    if (st != ROWAN_OK || buf != cl->sent[cl->completions].data())
                      ++cl->send_order_errors;
                    ++cl->completions;
                  },
                  &c),
              ROWAN_OK);
  }
  {
    const int rc = rowan_channel_flush(ch, 20000);
    rowan_channel_stats fs{};
    rowan_channel_stats_get(ch, &fs);
    ASSERT_EQ(rc, ROWAN_OK) << rowan_strerror(rc) << " " << rowan_last_error() << " sent "
                            << fs.packets_sent << " received " << fs.packets_received
                            << " completions " << c.completions << " echoes " << c.next_expected
                            << " server " << server_rc.load() << " in flight " << fs.bytes_in_flight
                            << " cwnd " << fs.cwnd_bytes;
  }
  EXPECT_EQ(c.completions, kMessages);
  EXPECT_EQ(c.send_order_errors, 0u);
  for (int i = 0; i < 400 && c.next_expected < kMessages; ++i) {
    ASSERT_GE(rowan_channel_poll(ch, 50), 0) << rowan_last_error();
  }
  EXPECT_EQ(c.next_expected, kMessages);
  EXPECT_EQ(c.mismatches, 0u);

  rowan_channel_stats st{};
  ASSERT_EQ(rowan_channel_stats_get(ch, &st), ROWAN_OK);
  size_t total = 0;
  for (const auto& m : c.sent) total += m.size();
  EXPECT_EQ(st.messages_sent, kMessages);
  EXPECT_EQ(st.messages_received, kMessages);
  EXPECT_EQ(st.bytes_sent, total);
  EXPECT_EQ(st.bytes_received, total);
  EXPECT_GT(st.packets_sent, total / 1472);
  EXPECT_GT(st.min_rtt_s, 0.0);
  EXPECT_GE(st.srtt_s, st.min_rtt_s);
  EXPECT_STREQ(st.cc, "cubic");
  char peer[80];
  ASSERT_EQ(rowan_channel_peer(ch, peer, sizeof peer), ROWAN_OK);
  EXPECT_EQ(std::string(peer).rfind("127.0.0.1:", 0), 0u);

  rowan_channel_close(ch);
  server.join();
  EXPECT_EQ(server_rc.load(), ROWAN_ERR_CLOSED);  // the server saw our close
  EXPECT_EQ(echo.received, static_cast<int>(kMessages));
  EXPECT_EQ(echo.errors, 0);
  EXPECT_EQ(echo.closed_callbacks, 4);  // its posted buffers came back
  rowan_listener_close(l);
}

TEST(Channel, OversizedMessageIsReportedAndSkipped) {
  rowan_listener* l = nullptr;
  ASSERT_EQ(rowan_listen("127.0.0.1:0", nullptr, &l), ROWAN_OK);
  const std::string addr = "127.0.0.1:" + std::to_string(rowan_listener_port(l));
  rowan_channel* server = nullptr;
  std::thread t([&] { ASSERT_EQ(rowan_accept(l, 10000, &server), ROWAN_OK); });
  rowan_channel* ch = nullptr;
  ASSERT_EQ(rowan_connect(addr.c_str(), nullptr, &ch), ROWAN_OK) << rowan_last_error();
  t.join();
  ASSERT_NE(server, nullptr);

  std::vector<uint8_t> big(5000, 0xab);
  const char small[] = "after";
  ASSERT_EQ(rowan_channel_send(ch, big.data(), big.size(), nullptr, nullptr), ROWAN_OK);
  ASSERT_EQ(rowan_channel_send(ch, small, sizeof small, nullptr, nullptr), ROWAN_OK);
  struct Got {
    std::vector<std::pair<int, size_t>> events;
    char buf1[100];
    char buf2[100];
  } got;
  auto cb = [](rowan_channel*, void* u, void*, size_t len, int st) {
    static_cast<Got*>(u)->events.emplace_back(st, len);
  };
  ASSERT_EQ(rowan_channel_post_recv(server, got.buf1, sizeof got.buf1, cb, &got), ROWAN_OK);
  ASSERT_EQ(rowan_channel_post_recv(server, got.buf2, sizeof got.buf2, cb, &got), ROWAN_OK);
  for (int i = 0; i < 200 && got.events.size() < 2; ++i) {
    ASSERT_GE(rowan_channel_poll(ch, 0), 0);
    ASSERT_GE(rowan_channel_poll(server, 20), 0);
  }
  ASSERT_EQ(got.events.size(), 2u);
  EXPECT_EQ(got.events[0], std::make_pair(static_cast<int>(ROWAN_ERR_MSGSIZE), size_t{5000}));
  EXPECT_EQ(got.events[1], std::make_pair(static_cast<int>(ROWAN_OK), sizeof small));
  EXPECT_STREQ(got.buf2, "after");

  // A send after close is refused; pending sends complete with CLOSED.
  std::vector<int> statuses;
  ASSERT_EQ(rowan_channel_send(
                ch, big.data(), big.size(),
                [](rowan_channel*, void* u, const void*, size_t, int st) {
                  static_cast<std::vector<int>*>(u)->push_back(st);
                },
                &statuses),
            ROWAN_OK);
  rowan_channel_close(ch);
  ASSERT_EQ(statuses.size(), 1u);
  EXPECT_EQ(statuses[0], ROWAN_ERR_CLOSED);
  rowan_channel_close(server);
  rowan_listener_close(l);
}

TEST(Channel, HandshakeFailures) {
  // Nobody listens: unreachable after the handshake timeout.
  rowan_listener* l = nullptr;
  ASSERT_EQ(rowan_listen("127.0.0.1:0", nullptr, &l), ROWAN_OK);
  const std::string addr = "127.0.0.1:" + std::to_string(rowan_listener_port(l));
  rowan_channel_options o;
  rowan_channel_options_init(&o);
  o.handshake_timeout_ms = 300;
  rowan_channel* ch = nullptr;
  EXPECT_EQ(rowan_connect(addr.c_str(), &o, &ch), ROWAN_ERR_UNREACHABLE);  // no accept() running
  EXPECT_NE(std::string(rowan_last_error()).find("no answer"), std::string::npos);

  rowan_listener_close(l);  // (it holds the stale hellos of that attempt)

  // A congestion controller the server does not know: rejected.
  ASSERT_EQ(rowan_listen("127.0.0.1:0", nullptr, &l), ROWAN_OK);
  const std::string addr2 = "127.0.0.1:" + std::to_string(rowan_listener_port(l));
  o.handshake_timeout_ms = 5000;
  o.cc = "no-such-cc";
  std::thread t([&] {
    rowan_channel* s = nullptr;
    EXPECT_EQ(rowan_accept(l, 2000, &s), ROWAN_ERR_TIMEOUT);  // rejects, keeps waiting
  });
  EXPECT_EQ(rowan_connect(addr2.c_str(), &o, &ch), ROWAN_ERR_PROTOCOL);
  t.join();
  rowan_listener_close(l);

  EXPECT_EQ(rowan_connect("not-an-address", nullptr, &ch), ROWAN_ERR_INVALID);
  EXPECT_EQ(rowan_connect(nullptr, nullptr, &ch), ROWAN_ERR_INVALID);
  EXPECT_EQ(rowan_listen("127.0.0.1:99999", nullptr, &l), ROWAN_ERR_INVALID);
}

TEST(Api, StatusTextAndVersion) {
  EXPECT_STREQ(rowan_strerror(ROWAN_OK), "success");
  EXPECT_STREQ(rowan_strerror(ROWAN_ERR_CLOSED), "channel closed");
  EXPECT_STREQ(rowan_strerror(-999), "unknown status");
  EXPECT_STREQ(rowan_version(), "0.1.0");
  rowan_telemetry* t = nullptr;
  ASSERT_EQ(rowan_telemetry_open("/nonexistent/control.sock", &t), ROWAN_OK);
  EXPECT_EQ(rowan_telemetry_refresh(t, 200), ROWAN_ERR_UNREACHABLE);
  EXPECT_EQ(rowan_telemetry_peer_count(t), 0u);
  rowan_path_info p{};
  EXPECT_EQ(rowan_telemetry_peer(t, 0, &p), ROWAN_ERR_NOT_FOUND);
  EXPECT_EQ(rowan_telemetry_subscribe(t, 1, nullptr, nullptr), ROWAN_ERR_INVALID);
  EXPECT_GE(rowan_telemetry_fd(t), 0);
  rowan_telemetry_close(t);
  EXPECT_EQ(rowan_telemetry_open_site("../etc", &t), ROWAN_ERR_INVALID);
}

}  // namespace
