#include "crypto/keys.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>

namespace rowan::crypto {
namespace {

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
  if (bytes.size() > (size_t{1} << 30)) throw std::length_error("base64_encode: input too long");
  // EVP_EncodeBlock writes 4 characters per 3 bytes (padded) and a NUL.
  std::string out((bytes.size() + 2) / 3 * 4 + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), bytes.data(),
                                static_cast<int>(bytes.size()));
  out.resize(n < 0 ? 0 : static_cast<size_t>(n));
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
  if (text.size() != 44 || text[43] != '=' || text[42] == '=') return std::nullopt;
  // EVP_DecodeBlock decodes whole groups (33 bytes here, the last one padding)
  // and returns -1 on a character outside the alphabet.
  std::array<uint8_t, 33> raw{};
  const int n = EVP_DecodeBlock(raw.data(), reinterpret_cast<const unsigned char*>(text.data()),
                                static_cast<int>(text.size()));
  if (n != static_cast<int>(raw.size())) return std::nullopt;
  Key k{};
  std::copy_n(raw.begin(), k.size(), k.begin());
  OPENSSL_cleanse(raw.data(), raw.size());
  // Canonical encoding only (the unused low bits of the last character zero):
  // the key must encode back to the same text.
  std::string again = base64_encode(k);
  const bool canonical = again == text;
  OPENSSL_cleanse(again.data(), again.size());
  if (!canonical) return std::nullopt;
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
    throw std::runtime_error(path + ": cannot read private key file: " + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) {
    throw std::runtime_error(path + ": private key file is not a regular file");
  }
  if (st.st_size > 4096) {
    throw std::runtime_error(path + ": not a private key (the file is larger than 4 KiB)");
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
