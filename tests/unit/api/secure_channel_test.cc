// Link security on the message channel through the public C API over real
// UDP sockets on loopback: matching keys carry verified messages both ways;
// a client with the wrong keys, or one end without security, never gets a
// working channel (ROWAN_ERR_PROTOCOL), and the server frees what it
// accepted from a wrong-key client once its idle timeout passes.
#include <rowan/rowan.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

struct KeyPair {
  uint8_t priv[ROWAN_KEY_BYTES];
  uint8_t pub[ROWAN_KEY_BYTES];
};

KeyPair make_pair_of_keys() {
  KeyPair k{};
  EXPECT_EQ(rowan_key_generate(k.priv, k.pub), ROWAN_OK) << rowan_last_error();
  return k;
}

rowan_channel_keys keys(const KeyPair& mine, const KeyPair& peer) {
  rowan_channel_keys k{};
  std::memcpy(k.private_key, mine.priv, ROWAN_KEY_BYTES);
  std::memcpy(k.peer_public_key, peer.pub, ROWAN_KEY_BYTES);
  return k;
}

std::string address(const rowan_listener* l) {
  return "127.0.0.1:" + std::to_string(rowan_listener_port(l));
}

// Echoes every message of one accepted channel until it fails or closes;
// returns that status.
int echo_one(rowan_listener* l, int accept_ms) {
  rowan_channel* ch = nullptr;
  int rc = rowan_accept(l, accept_ms, &ch);
  if (rc != ROWAN_OK) return rc;
  struct State {
    std::vector<uint8_t> buf = std::vector<uint8_t>(1 << 17);
  } st;
  // One message at a time: receive into the buffer, echo it, repost.
  for (;;) {
    bool got = false;
    size_t got_len = 0;
    struct Rx {
      bool* got;
      size_t* len;
    } rx{&got, &got_len};
    rowan_channel_post_recv(
        ch, st.buf.data(), st.buf.size(),
        [](rowan_channel*, void* u, void*, size_t len, int status) {
          auto* r = static_cast<Rx*>(u);
          if (status == ROWAN_OK) {
            *r->got = true;
            *r->len = len;
          }
        },
        &rx);
    while (!got) {
      rc = rowan_channel_poll(ch, 100);
      if (rc < 0) {
        rowan_channel_close(ch);
        return rc;
      }
    }
    if (rowan_channel_send(ch, st.buf.data(), got_len, nullptr, nullptr) != ROWAN_OK ||
        (rc = rowan_channel_flush(ch, 10000)) != ROWAN_OK) {
      rowan_channel_close(ch);
      return rc;
    }
  }
}

TEST(SecureChannel, MatchingKeysCarryVerifiedMessages) {
  const KeyPair server_keys = make_pair_of_keys();
  const KeyPair client_keys = make_pair_of_keys();
  const rowan_channel_keys sk = keys(server_keys, client_keys);
  const rowan_channel_keys ck = keys(client_keys, server_keys);
  rowan_channel_options o;
  rowan_channel_options_init(&o);
  o.cc = "cubic";
  rowan_listener* l = nullptr;
  ASSERT_EQ(rowan_listen_secure("127.0.0.1:0", &o, &sk, &l), ROWAN_OK) << rowan_last_error();
  std::atomic<int> server_rc{1};
  std::thread server([&] { server_rc = echo_one(l, 10000); });

  rowan_channel* ch = nullptr;
  ASSERT_EQ(rowan_connect_secure(address(l).c_str(), &o, &ck, &ch), ROWAN_OK) << rowan_last_error();
  std::mt19937 rng(3);
  for (int i = 0; i < 20; ++i) {
    // Up to 100 kB: many sealed datagrams per message.
    std::vector<uint8_t> msg(1 + rng() % 100000);
    for (auto& b : msg) b = static_cast<uint8_t>(rng());
    std::vector<uint8_t> back(1 << 17);
    size_t back_len = 0;
    int back_status = 1;
    struct Rx {
      size_t* len;
      int* status;
    } rx{&back_len, &back_status};
    ASSERT_EQ(rowan_channel_post_recv(
                  ch, back.data(), back.size(),
                  [](rowan_channel*, void* u, void*, size_t len, int status) {
                    auto* r = static_cast<Rx*>(u);
                    *r->len = len;
                    *r->status = status;
                  },
                  &rx),
              ROWAN_OK);
    ASSERT_EQ(rowan_channel_send(ch, msg.data(), msg.size(), nullptr, nullptr), ROWAN_OK);
    for (int k = 0; k < 200 && back_status == 1; ++k) {
      ASSERT_GE(rowan_channel_poll(ch, 50), 0) << rowan_last_error();
    }
    ASSERT_EQ(back_status, ROWAN_OK) << "message " << i;
    ASSERT_EQ(back_len, msg.size());
    EXPECT_EQ(std::memcmp(back.data(), msg.data(), msg.size()), 0) << "message " << i;
  }
  rowan_channel_stats s{};
  ASSERT_EQ(rowan_channel_stats_get(ch, &s), ROWAN_OK);
  EXPECT_EQ(s.messages_received, 20U);
  rowan_channel_close(ch);
  server.join();
  EXPECT_EQ(server_rc.load(), ROWAN_ERR_CLOSED);  // the sealed CLOSE arrived
  rowan_listener_close(l);
}

TEST(SecureChannel, WrongKeysNeverGetAChannel) {
  const KeyPair server_keys = make_pair_of_keys();
  const KeyPair client_keys = make_pair_of_keys();
  const KeyPair stranger = make_pair_of_keys();
  const rowan_channel_keys sk = keys(server_keys, client_keys);
  rowan_channel_options o;
  rowan_channel_options_init(&o);
  o.handshake_timeout_ms = 1500;
  o.idle_timeout_ms = 1000;
  rowan_listener* l = nullptr;
  ASSERT_EQ(rowan_listen_secure("127.0.0.1:0", &o, &sk, &l), ROWAN_OK) << rowan_last_error();
  // The server accepts the (plaintext) hello, hears nothing authentic and
  // frees the channel after its idle timeout.
  std::atomic<int> server_rc{1};
  std::thread server([&] { server_rc = echo_one(l, 10000); });

  // A stranger's private key: the server does not know its public key.
  const rowan_channel_keys wrong = keys(stranger, server_keys);
  rowan_channel* ch = nullptr;
  EXPECT_EQ(rowan_connect_secure(address(l).c_str(), &o, &wrong, &ch), ROWAN_ERR_PROTOCOL);
  EXPECT_EQ(ch, nullptr);
  EXPECT_NE(std::string(rowan_last_error()).find("key handshake"), std::string::npos)
      << rowan_last_error();
  server.join();
  EXPECT_EQ(server_rc.load(), ROWAN_ERR_TIMEOUT);
  rowan_listener_close(l);
}

TEST(SecureChannel, SecurityMismatchIsRejected) {
  const KeyPair a = make_pair_of_keys();
  const KeyPair b = make_pair_of_keys();
  const rowan_channel_keys ka = keys(a, b);
  rowan_channel_options o;
  rowan_channel_options_init(&o);
  o.handshake_timeout_ms = 3000;

  // Secure client, plaintext server.
  rowan_listener* l = nullptr;
  ASSERT_EQ(rowan_listen("127.0.0.1:0", &o, &l), ROWAN_OK);
  std::thread t1([&] {
    rowan_channel* s = nullptr;
    EXPECT_EQ(rowan_accept(l, 1500, &s), ROWAN_ERR_TIMEOUT);  // rejected, still waiting
  });
  rowan_channel* ch = nullptr;
  EXPECT_EQ(rowan_connect_secure(address(l).c_str(), &o, &ka, &ch), ROWAN_ERR_PROTOCOL);
  EXPECT_NE(std::string(rowan_last_error()).find("without link security"), std::string::npos)
      << rowan_last_error();
  t1.join();
  rowan_listener_close(l);

  // Plaintext client, secure server.
  ASSERT_EQ(rowan_listen_secure("127.0.0.1:0", &o, &ka, &l), ROWAN_OK);
  std::thread t2([&] {
    rowan_channel* s = nullptr;
    EXPECT_EQ(rowan_accept(l, 1500, &s), ROWAN_ERR_TIMEOUT);
  });
  EXPECT_EQ(rowan_connect(address(l).c_str(), &o, &ch), ROWAN_ERR_PROTOCOL);
  EXPECT_NE(std::string(rowan_last_error()).find("requires link security"), std::string::npos)
      << rowan_last_error();
  t2.join();
  rowan_listener_close(l);
}

TEST(SecureChannel, Keys) {
  KeyPair k = make_pair_of_keys();
  uint8_t pub[ROWAN_KEY_BYTES];
  ASSERT_EQ(rowan_key_public(k.priv, pub), ROWAN_OK);
  EXPECT_EQ(std::memcmp(pub, k.pub, ROWAN_KEY_BYTES), 0);
  // RFC 7748 section 6.1: Alice's private key and public key, in base64.
  uint8_t priv[ROWAN_KEY_BYTES];
  ASSERT_EQ(rowan_key_from_base64("dwdtCnMYpX08FsFyUbJmRd9ML4frwJkqsXf7pR25LCo=", priv), ROWAN_OK);
  ASSERT_EQ(rowan_key_public(priv, pub), ROWAN_OK);
  uint8_t want[ROWAN_KEY_BYTES];
  ASSERT_EQ(rowan_key_from_base64("hSDwCYkwp1R0i33ctD73Wg2/Og0mOBr066SpjqqbTmo=", want), ROWAN_OK);
  EXPECT_EQ(std::memcmp(pub, want, ROWAN_KEY_BYTES), 0);
  EXPECT_EQ(rowan_key_from_base64("short", priv), ROWAN_ERR_INVALID);
  EXPECT_EQ(rowan_key_generate(nullptr, pub), ROWAN_ERR_INVALID);
}

}  // namespace
