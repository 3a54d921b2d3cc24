// X25519 keys, base64 and the key file checks.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include "crypto/aead.h"
#include "crypto/keys.h"

namespace rowan::crypto {
namespace {

TEST(Keys, Base64RoundTripAndRejects) {
  const Key k = generate_private_key();
  const std::string b = key_to_base64(k);
  ASSERT_EQ(b.size(), 44U);
  EXPECT_EQ(b.back(), '=');
  auto back = key_from_base64(b + "\n");
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(*back, k);
  EXPECT_FALSE(key_from_base64(b.substr(0, 43)).has_value());
  EXPECT_FALSE(key_from_base64(b.substr(0, 42) + "!=").has_value());
  EXPECT_FALSE(key_from_base64("").has_value());
  EXPECT_EQ(base64_encode(std::vector<uint8_t>{'f', 'o', 'o', 'b'}), "Zm9vYg==");
  EXPECT_EQ(base64_encode(std::vector<uint8_t>{'f', 'o', 'o', 'b', 'a'}), "Zm9vYmE=");
  EXPECT_EQ(base64_encode(std::vector<uint8_t>{'f', 'o', 'o'}), "Zm9v");
  EXPECT_EQ(base64_encode(std::vector<uint8_t>{}), "");
  // RFC 7748's vector ends in 'o' (40: the unused low bits 00); 'p' (41)
  // decodes to the same key but is not canonical. A space or '=' inside the
  // text is no key either.
  const std::string canon = "dwdtCnMYpX08FsFyUbJmRd9ML4frwJkqsXf7pR25LCo=";
  EXPECT_TRUE(key_from_base64(canon).has_value());
  EXPECT_FALSE(key_from_base64(canon.substr(0, 42) + "p=").has_value());
  EXPECT_FALSE(key_from_base64(canon.substr(0, 20) + " " + canon.substr(21)).has_value());
  EXPECT_FALSE(key_from_base64(canon.substr(0, 42) + "==").has_value());
  EXPECT_FALSE(key_from_base64(std::string(44, '=')).has_value());
}

// RFC 7748 §6.1 test vector.
TEST(Keys, X25519MatchesRfc7748) {
  const auto a = key_from_base64("dwdtCnMYpX08FsFyUbJmRd9ML4frwJkqsXf7pR25LCo=");
  const auto b_pub = key_from_base64("3p7bfXt9wbTTW2HC7OQ1Nz+DQ8hbeGdNrfx+FG+IK08=");
  ASSERT_TRUE(a && b_pub);
  EXPECT_EQ(key_to_base64(public_key(*a)), "hSDwCYkwp1R0i33ctD73Wg2/Og0mOBr066SpjqqbTmo=");
  Key shared{};
  ASSERT_TRUE(x25519(*a, *b_pub, shared));
  EXPECT_EQ(key_to_base64(shared), "Sl2dW6TOLeFyjjv0gDUPJeB+IclH0Z4zdvCbPB4WF0I=");
  Key zero{};
  EXPECT_FALSE(x25519(*a, zero, shared));  // low-order point
}

TEST(Keys, KeyFileMustBeOwnerOnly) {
  char path[] = "/tmp/rowan-key-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  const Key k = generate_private_key();
  const std::string text = key_to_base64(k) + "\n";
  ASSERT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  close(fd);
  ASSERT_EQ(chmod(path, 0600), 0);
  EXPECT_EQ(load_private_key_file(path), k);
  ASSERT_EQ(chmod(path, 0640), 0);
  try {
    load_private_key_file(path);
    ADD_FAILURE() << "a group-readable key was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("chmod 600"), std::string::npos) << e.what();
  }
  ASSERT_EQ(chmod(path, 0604), 0);
  EXPECT_THROW(load_private_key_file(path), std::runtime_error);
  ASSERT_EQ(chmod(path, 0600), 0);
  { std::ofstream(path) << "not a key\n"; }
  EXPECT_THROW(load_private_key_file(path), std::runtime_error);
  unlink(path);
  EXPECT_THROW(load_private_key_file(path), std::runtime_error);
  // Not a regular file: refused without reading it (/dev/zero never ends).
  EXPECT_THROW(load_private_key_file("/dev/zero"), std::runtime_error);
}

TEST(Aead, SealOpenAndTamper) {
  AesGcm g;
  g.set_key(generate_private_key());
  uint8_t aad[16] = {1, 2, 3};
  uint8_t pt[100];
  for (int i = 0; i < 100; ++i) pt[i] = static_cast<uint8_t>(i);
  uint8_t ct[100], tag[16], out[100];
  ASSERT_TRUE(g.seal(AesGcm::nonce(7), aad, sizeof aad, pt, sizeof pt, ct, tag));
  EXPECT_NE(std::memcmp(ct, pt, sizeof pt), 0);
  ASSERT_TRUE(g.open(AesGcm::nonce(7), aad, sizeof aad, ct, sizeof ct, out, tag));
  EXPECT_EQ(std::memcmp(out, pt, sizeof pt), 0);
  EXPECT_FALSE(g.open(AesGcm::nonce(8), aad, sizeof aad, ct, sizeof ct, out, tag));
  aad[5] ^= 1;
  EXPECT_FALSE(g.open(AesGcm::nonce(7), aad, sizeof aad, ct, sizeof ct, out, tag));
  aad[5] ^= 1;
  ct[50] ^= 0x80;
  EXPECT_FALSE(g.open(AesGcm::nonce(7), aad, sizeof aad, ct, sizeof ct, out, tag));
}

}  // namespace
}  // namespace rowan::crypto
