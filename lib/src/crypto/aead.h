// AES-256-GCM (NIST SP 800-38D) through OpenSSL 3 EVP, which uses AES-NI /
// VAES and carry-less multiply when the CPU has them.
//
// One AesGcm holds one key and a cipher context set up once, so sealing or
// opening a datagram allocates nothing: per packet only the 96-bit nonce
// changes. The caller guarantees a nonce is never used twice with one key
// (SecureIo builds it from a per-session 64-bit packet counter).
//
// Threading: one thread per object (the context is mutable state).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "crypto/keys.h"

typedef struct evp_cipher_ctx_st EVP_CIPHER_CTX;  // NOLINT(modernize-use-using)

namespace rowan::crypto {

inline constexpr size_t kAeadTagSize = 16;
inline constexpr size_t kAeadNonceSize = 12;

class AesGcm {
 public:
  AesGcm();
  ~AesGcm();
  AesGcm(const AesGcm&) = delete;
  AesGcm& operator=(const AesGcm&) = delete;

  /// Sets the 256-bit key (control path). Throws std::runtime_error on failure.
  void set_key(const Key& key);
  bool has_key() const { return keyed_; }

  /// The nonce for a 64-bit counter: 4 zero bytes then the counter, big-endian.
  static std::array<uint8_t, kAeadNonceSize> nonce(uint64_t counter) noexcept;

  /// Encrypts `len` bytes of `in` to `out` (may alias exactly) and writes the
  /// 16-byte tag to `tag`; `aad` is authenticated, not encrypted.
  bool seal(const std::array<uint8_t, kAeadNonceSize>& nonce, const uint8_t* aad, size_t aad_len,
            const uint8_t* in, size_t len, uint8_t* out, uint8_t* tag) noexcept;

  /// Decrypts and verifies; false (and `out` must be ignored) when the tag
  /// does not match the key, nonce, aad and ciphertext.
  bool open(const std::array<uint8_t, kAeadNonceSize>& nonce, const uint8_t* aad, size_t aad_len,
            const uint8_t* in, size_t len, uint8_t* out, const uint8_t* tag) noexcept;

 private:
  EVP_CIPHER_CTX* enc_ = nullptr;
  EVP_CIPHER_CTX* dec_ = nullptr;
  bool keyed_ = false;
};

}  // namespace rowan::crypto
