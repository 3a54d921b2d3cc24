#include "crypto/keys.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <sys/stat.h>

#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>

namespace rowan::crypto {
namespace {

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int b64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

struct PkeyFree {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
struct PkeyCtxFree {
  void operator()(EVP_PKEY_CTX* p) const { EVP_PKEY_CTX_free(p); }
};
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyFree>;
using PkeyCtxPtr = std::unique_ptr<EVP_PKEY_CTX, PkeyCtxFree>;

}  // namespace

std::string base64_encode(std::span<const uint8_t> bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    const uint32_t v = (uint32_t{bytes[i]} << 16) | (uint32_t{bytes[i + 1]} << 8) | bytes[i + 2];
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += kAlphabet[v & 63];
  }
  const size_t rest = bytes.size() - i;
  if (rest == 1) {
    const uint32_t v = uint32_t{bytes[i]} << 16;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += "==";
  } else if (rest == 2) {
    const uint32_t v = (uint32_t{bytes[i]} << 16) | (uint32_t{bytes[i + 1]} << 8);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += '=';
  }
  return out;
}

std::optional<Key> key_from_base64(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t' || text.front() == '\n' ||
                           text.front() == '\r')) {
    text.remove_prefix(1);
  }
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\n' ||
                           text.back() == '\r')) {
    text.remove_suffix(1);
  }
  // 32 bytes = 10 full groups + 2 bytes: 43 characters and one '='.
  if (text.size() != 44 || text[43] != '=') return std::nullopt;
  Key k{};
  size_t o = 0;
  for (size_t i = 0; i < 44; i += 4) {
    int v[4];
    for (int j = 0; j < 4; ++j) {
      v[j] = (i + j == 43) ? 0 : b64_value(text[i + j]);
      if (v[j] < 0) return std::nullopt;
    }
    const uint32_t w = (static_cast<uint32_t>(v[0]) << 18) | (static_cast<uint32_t>(v[1]) << 12) |
                       (static_cast<uint32_t>(v[2]) << 6) | static_cast<uint32_t>(v[3]);
    k[o++] = static_cast<uint8_t>(w >> 16);
    k[o++] = static_cast<uint8_t>(w >> 8);
    if (o < kKeySize) k[o++] = static_cast<uint8_t>(w);
  }
  // Canonical encoding: the unused low bits of the last character are zero.
  if ((b64_value(text[42]) & 3) != 0) return std::nullopt;
  return k;
}

Key generate_private_key() {
  Key k{};
  if (RAND_bytes(k.data(), static_cast<int>(k.size())) != 1) {
    throw std::runtime_error("RAND_bytes failed: no entropy for a private key");
  }
  // Clamp as RFC 7748 §5 does, so the stored key is the one actually used.
  k[0] &= 248;
  k[31] &= 127;
  k[31] |= 64;
  return k;
}

Key public_key(const Key& private_key) {
  PkeyPtr p(EVP_PKEY_new_raw_private_key(EVP_PKEY_X25519, nullptr, private_key.data(),
                                         private_key.size()));
  if (!p) throw std::runtime_error("X25519: cannot load private key");
  Key pub{};
  size_t len = pub.size();
  if (EVP_PKEY_get_raw_public_key(p.get(), pub.data(), &len) != 1 || len != pub.size()) {
    throw std::runtime_error("X25519: cannot derive public key");
  }
  return pub;
}

bool x25519(const Key& private_key, const Key& peer_public, Key& out) noexcept {
  PkeyPtr priv(EVP_PKEY_new_raw_private_key(EVP_PKEY_X25519, nullptr, private_key.data(),
                                            private_key.size()));
  PkeyPtr pub(EVP_PKEY_new_raw_public_key(EVP_PKEY_X25519, nullptr, peer_public.data(),
                                          peer_public.size()));
  if (!priv || !pub) return false;
  PkeyCtxPtr ctx(EVP_PKEY_CTX_new(priv.get(), nullptr));
  if (!ctx || EVP_PKEY_derive_init(ctx.get()) != 1 ||
      EVP_PKEY_derive_set_peer(ctx.get(), pub.get()) != 1) {
    return false;
  }
  size_t len = out.size();
  // OpenSSL refuses an all-zero shared secret (low-order point) itself.
  if (EVP_PKEY_derive(ctx.get(), out.data(), &len) != 1 || len != out.size()) return false;
  uint8_t acc = 0;
  for (uint8_t b : out) acc |= b;
  return acc != 0;
}

Key load_private_key_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    throw std::runtime_error(path + ": cannot read private key file");
  }
  if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    throw std::runtime_error(path + ": private key file is accessible by group or others (mode " +
                             mode + "); run chmod 600 " + path);
  }
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path + ": cannot open private key file");
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  auto k = key_from_base64(text);
  wipe({reinterpret_cast<uint8_t*>(text.data()), text.size()});
  if (!k) {
    throw std::runtime_error(path +
                             ": not a private key (expected 44 base64 characters, as written "
                             "by `rowanctl genkey`)");
  }
  return *k;
}

void wipe(std::span<uint8_t> bytes) noexcept { OPENSSL_cleanse(bytes.data(), bytes.size()); }

}  // namespace rowan::crypto
