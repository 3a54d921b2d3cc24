// AES-256-GCM: each backend (intel-ipsec-mb, OpenSSL) against NIST's vectors
// and against the other, byte for byte, at the datagram sizes rowan seals.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "crypto/aead.h"
#include "crypto/keys.h"

namespace rowan::crypto {
namespace {

using Backend = AesGcm::Backend;

std::vector<uint8_t> hex(const std::string& h) {
  std::vector<uint8_t> v;
  for (size_t i = 0; i + 1 < h.size(); i += 2)
    v.push_back(static_cast<uint8_t>(std::stoi(h.substr(i, 2), nullptr, 16)));
  return v;
}

class AeadBackends : public ::testing::TestWithParam<Backend> {};

TEST(Aead, IpsecMbIsUsedWhereBuiltAndTheCpuHasAesNi) {
  const AesGcm g;
  EXPECT_FALSE(g.backend_name().empty());
  const char* forced = std::getenv("ROWAN_AEAD");
  if (AesGcm::ipsec_mb_built() && __builtin_cpu_supports("aes") &&
      (forced == nullptr || std::string(forced) != "openssl")) {
    EXPECT_EQ(g.backend(), Backend::kIpsecMb);
    EXPECT_EQ(g.backend_name().rfind("intel-ipsec-mb", 0), 0U) << g.backend_name();
  } else {
    EXPECT_EQ(g.backend(), Backend::kOpenSsl);
  }
  EXPECT_EQ(AesGcm(Backend::kOpenSsl).backend_name(), "openssl");
}

// The GCM specification's test cases 13, 14 and 16 (256-bit keys; McGrew and
// Viega, "The Galois/Counter Mode of Operation", as in NIST's CAVP files).
TEST_P(AeadBackends, NistVectors) {
  struct Vec {
    const char *key, *iv, *pt, *aad, *ct, *tag;
  };
  const Vec vecs[] = {
      {"0000000000000000000000000000000000000000000000000000000000000000",
       "000000000000000000000000", "", "", "", "530f8afbc74536b9a963b4f1c4cb738b"},
      {"0000000000000000000000000000000000000000000000000000000000000000",
       "000000000000000000000000", "00000000000000000000000000000000", "",
       "cea7403d4d606b6e074ec5d3baf39d18", "d0d1c8a799996bf0265b98b5d48ab919"},
      {"feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f9467308308",
       "cafebabefacedbaddecaf888",
       "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a721c3c0c95956809532fcf0e2449a"
       "6b525"
       "b16aedf5aa0de657ba637b39",
       "feedfacedeadbeeffeedfacedeadbeefabaddad2",
       "522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa8cb08e48590dbb3da7b08b10568"
       "28838"
       "c5f61e6393ba7a0abcc9f662",
       "76fc6ece0f4e1768cddf8853bb2d551b"},
  };
  for (const Vec& v : vecs) {
    AesGcm g(GetParam());
    Key key{};
    const auto kb = hex(v.key);
    std::memcpy(key.data(), kb.data(), key.size());
    g.set_key(key);
    std::array<uint8_t, kAeadNonceSize> iv{};
    const auto ivb = hex(v.iv);
    std::memcpy(iv.data(), ivb.data(), iv.size());
    const auto pt = hex(v.pt), aad = hex(v.aad), ct = hex(v.ct), tag = hex(v.tag);
    std::vector<uint8_t> out(pt.size() + 1), got_tag(kAeadTagSize), back(pt.size() + 1);
    ASSERT_TRUE(
        g.seal(iv, aad.data(), aad.size(), pt.data(), pt.size(), out.data(), got_tag.data()));
    EXPECT_EQ(std::vector<uint8_t>(out.begin(), out.begin() + static_cast<long>(pt.size())), ct)
        << v.ct;
    EXPECT_EQ(got_tag, tag) << v.tag;
    ASSERT_TRUE(g.open(iv, aad.data(), aad.size(), ct.data(), ct.size(), back.data(), tag.data()));
    EXPECT_EQ(std::vector<uint8_t>(back.begin(), back.begin() + static_cast<long>(pt.size())), pt);
    auto bad = tag;
    bad[15] ^= 1;
    EXPECT_FALSE(g.open(iv, aad.data(), aad.size(), ct.data(), ct.size(), back.data(), bad.data()));
  }
}

TEST_P(AeadBackends, SealsInPlaceAndRejectsEveryFlippedBit) {
  AesGcm g(GetParam());
  g.set_key(generate_private_key());
  std::vector<uint8_t> buf(1400), pt(1400);
  for (size_t i = 0; i < pt.size(); ++i) pt[i] = static_cast<uint8_t>(i * 7);
  buf = pt;
  uint8_t aad[16] = {9, 8, 7};
  uint8_t tag[kAeadTagSize];
  ASSERT_TRUE(g.seal(AesGcm::nonce(42), aad, sizeof aad, buf.data(), buf.size(), buf.data(), tag));
  EXPECT_NE(buf, pt);
  const auto ct = buf;
  ASSERT_TRUE(g.open(AesGcm::nonce(42), aad, sizeof aad, buf.data(), buf.size(), buf.data(), tag));
  EXPECT_EQ(buf, pt);
  std::vector<uint8_t> out(ct.size());
  for (size_t bit = 0; bit < 8 * (sizeof aad + kAeadTagSize); bit += 5) {
    uint8_t a[sizeof aad], t[kAeadTagSize];
    std::memcpy(a, aad, sizeof aad);
    std::memcpy(t, tag, sizeof tag);
    if (bit < 8 * sizeof aad) {
      a[bit / 8] ^= static_cast<uint8_t>(1U << (bit % 8));
    } else {
      t[(bit - 8 * sizeof aad) / 8] ^= static_cast<uint8_t>(1U << (bit % 8));
    }
    EXPECT_FALSE(g.open(AesGcm::nonce(42), a, sizeof a, ct.data(), ct.size(), out.data(), t))
        << bit;
  }
  for (size_t i = 0; i < ct.size(); i += 97) {
    auto c = ct;
    c[i] ^= 0x10;
    EXPECT_FALSE(g.open(AesGcm::nonce(42), aad, sizeof aad, c.data(), c.size(), out.data(), tag))
        << i;
  }
  EXPECT_FALSE(g.open(AesGcm::nonce(43), aad, sizeof aad, ct.data(), ct.size(), out.data(), tag));
}

// A datagram sealed from runs (its buffer's bytes in place, the stream bytes
// read from elsewhere; SecureIo's pieces) is the datagram sealed whole, for
// runs cut anywhere, including inside a 16-byte block and empty runs.
TEST_P(AeadBackends, SealingRunsIsSealingTheirBytesWhole) {
  AesGcm g(GetParam());
  g.set_key(generate_private_key());
  std::mt19937 rng(11);
  const uint8_t aad[16] = {1, 2, 3};
  for (size_t len : {1, 17, 300, 1412, 4096, 8952}) {
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<uint8_t> pt(len);
      for (auto& b : pt) b = static_cast<uint8_t>(rng());
      std::vector<uint8_t> whole(len), wtag(kAeadTagSize);
      const auto n = AesGcm::nonce(len * 64 + static_cast<size_t>(trial));
      ASSERT_TRUE(g.seal(n, aad, sizeof aad, pt.data(), len, whole.data(), wtag.data()));
      // The output buffer holds the plaintext except in the holes, whose
      // bytes come from a copy elsewhere; cut at random points.
      std::vector<uint8_t> buf = pt, other = pt;
      std::vector<AesGcm::Run> runs;
      size_t pos = 0;
      bool hole = trial % 2 == 0;
      while (pos < len) {
        const size_t take = std::min<size_t>(len - pos, 1 + rng() % (len / 3 + 1));
        if (hole) std::memset(buf.data() + pos, 0xAA, take);
        runs.push_back({(hole ? other.data() : buf.data()) + pos, take});
        if (trial % 5 == 0) runs.push_back({buf.data() + pos + take, 0});
        pos += take;
        hole = !hole;
      }
      std::vector<uint8_t> tag(kAeadTagSize);
      ASSERT_TRUE(
          g.seal_runs(n, aad, sizeof aad, runs.data(), runs.size(), buf.data(), tag.data()));
      EXPECT_EQ(buf, whole) << len << " " << trial;
      EXPECT_EQ(tag, wtag) << len << " " << trial;
    }
  }
}

TEST_P(AeadBackends, UnkeyedRefuses) {
  AesGcm g(GetParam());
  uint8_t b[4] = {}, tag[kAeadTagSize] = {};
  EXPECT_FALSE(g.seal(AesGcm::nonce(1), nullptr, 0, b, sizeof b, b, tag));
  EXPECT_FALSE(g.open(AesGcm::nonce(1), nullptr, 0, b, sizeof b, b, tag));
}

INSTANTIATE_TEST_SUITE_P(Both, AeadBackends,
                         ::testing::Values(Backend::kIpsecMb, Backend::kOpenSsl),
                         [](const auto& p) {
                           return std::string(p.param == Backend::kIpsecMb ? "IpsecMb" : "OpenSsl");
                         });

// Both backends, one key: the same ciphertext and tag at every size rowan
// seals (empty keepalives to 9000-byte jumbo datagrams), each opening the
// other's output.
TEST(Aead, BackendsAgreeByteForByte) {
  AesGcm mb(Backend::kIpsecMb), ossl(Backend::kOpenSsl);
  const Key key = generate_private_key();
  mb.set_key(key);
  ossl.set_key(key);
  std::mt19937 rng(7);
  for (size_t len :
       {0, 1, 15, 16, 17, 31, 63, 64, 65, 255, 256, 511, 1024, 1400, 1472, 4096, 8952, 9000}) {
    for (size_t aad_len : {0, 13, 16, 32}) {
      std::vector<uint8_t> pt(len), aad(aad_len);
      for (auto& b : pt) b = static_cast<uint8_t>(rng());
      for (auto& b : aad) b = static_cast<uint8_t>(rng());
      std::vector<uint8_t> c1(len + 1), c2(len + 1), t1(kAeadTagSize), t2(kAeadTagSize);
      const auto n = AesGcm::nonce(len * 100 + aad_len);
      const uint8_t* a = aad_len ? aad.data() : nullptr;
      const uint8_t* p = len ? pt.data() : nullptr;
      ASSERT_TRUE(mb.seal(n, a, aad_len, p, len, c1.data(), t1.data()));
      ASSERT_TRUE(ossl.seal(n, a, aad_len, p, len, c2.data(), t2.data()));
      EXPECT_EQ(c1, c2) << len << "/" << aad_len;
      EXPECT_EQ(t1, t2) << len << "/" << aad_len;
      std::vector<uint8_t> o1(len + 1), o2(len + 1);
      EXPECT_TRUE(ossl.open(n, a, aad_len, c1.data(), len, o1.data(), t1.data()));
      EXPECT_TRUE(mb.open(n, a, aad_len, c2.data(), len, o2.data(), t2.data()));
      EXPECT_EQ(0, std::memcmp(o1.data(), pt.data(), len));
      EXPECT_EQ(0, std::memcmp(o2.data(), pt.data(), len));
    }
  }
}

}  // namespace
}  // namespace rowan::crypto
