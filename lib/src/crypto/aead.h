// AES-256-GCM (NIST SP 800-38D) for the data path.
//
// Two implementations behind one interface, chosen once per process:
//  - Intel's Multi-Buffer Crypto for IPsec library (intel-ipsec-mb,
//    `libipsec-mb-dev`), when rowan was built with it and the CPU has AES-NI:
//    its direct GCM API on a key schedule and hash-key table precomputed at
//    set_key(), with the widest code path the CPU runs (VAES and VPCLMULQDQ
//    on AVX-512 parts). A call costs a few tens of nanoseconds plus the bytes;
//    OpenSSL's EVP sequence (init with the nonce, AAD update, update, final,
//    tag ctrl) costs about 200 ns before the first byte
//    (bench/micro BM_AesGcmSealOpen).
//  - OpenSSL 3 EVP otherwise (AES-NI / VAES too, at that fixed cost).
// Both produce the same bytes; the unit tests check each against the other
// and against NIST's vectors.
//
// One AesGcm holds one key, set up once, so sealing or opening a datagram
// allocates nothing: per packet only the 96-bit nonce changes. The caller
// guarantees a nonce is never used twice with one key (SecureIo builds it
// from a per-session 64-bit packet counter).
//
// Threading: one thread per object (the EVP contexts are mutable state; the
// intel-ipsec-mb manager is shared and read-only after its one-time set-up).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "crypto/keys.h"

typedef struct evp_cipher_ctx_st EVP_CIPHER_CTX;  // NOLINT(modernize-use-using)

namespace rowan::crypto {

inline constexpr size_t kAeadTagSize = 16;
inline constexpr size_t kAeadNonceSize = 12;

class AesGcm {
 public:
  enum class Backend : uint8_t { kOpenSsl, kIpsecMb };

  /// `backend`: kIpsecMb falls back to kOpenSsl wherever default_backend()
  /// would (not built in, no AES-NI, ROWAN_AEAD=openssl); tests ask for each.
  explicit AesGcm(Backend backend = default_backend());
  ~AesGcm();
  AesGcm(const AesGcm&) = delete;
  AesGcm& operator=(const AesGcm&) = delete;

  /// intel-ipsec-mb where it is built in and the CPU has AES-NI, else OpenSSL;
  /// OpenSSL also when the environment has ROWAN_AEAD=openssl.
  static Backend default_backend() noexcept;
  /// What this object runs on, e.g. "intel-ipsec-mb 1.3.0 (avx512)" or "openssl".
  std::string_view backend_name() const noexcept;
  /// What default_backend() runs on.
  static std::string_view default_backend_name() noexcept;
  Backend backend() const noexcept { return backend_; }
  /// Whether this build has intel-ipsec-mb in it.
  static bool ipsec_mb_built() noexcept;

  /// Sets the 256-bit key (control path). Throws std::runtime_error on failure.
  void set_key(const Key& key);
  bool has_key() const { return keyed_; }

  /// The nonce for a 64-bit counter: 4 zero bytes then the counter, big-endian.
  static std::array<uint8_t, kAeadNonceSize> nonce(uint64_t counter) noexcept;

  /// Encrypts `len` bytes of `in` to `out` (may alias exactly) and writes the
  /// 16-byte tag to `tag`; `aad` is authenticated, not encrypted.
  bool seal(const std::array<uint8_t, kAeadNonceSize>& nonce, const uint8_t* aad, size_t aad_len,
            const uint8_t* in, size_t len, uint8_t* out, uint8_t* tag) noexcept;

  /// A run of plaintext for seal_runs().
  struct Run {
    const uint8_t* src = nullptr;
    size_t len = 0;
  };
  /// seal() of the runs' bytes taken in order as one plaintext, written to
  /// `out` (their lengths summed); a run may lie exactly where its output
  /// goes (in place). The payload is read where it lies: no copy first.
  bool seal_runs(const std::array<uint8_t, kAeadNonceSize>& nonce, const uint8_t* aad,
                 size_t aad_len, const Run* runs, size_t n, uint8_t* out, uint8_t* tag) noexcept;

  /// Decrypts and verifies; false (and `out` must be ignored) when the tag
  /// does not match the key, nonce, aad and ciphertext.
  bool open(const std::array<uint8_t, kAeadNonceSize>& nonce, const uint8_t* aad, size_t aad_len,
            const uint8_t* in, size_t len, uint8_t* out, const uint8_t* tag) noexcept;

 private:
  struct MbKey;  // intel-ipsec-mb's expanded key and hash-key table (64-byte aligned)
  struct MbKeyDeleter {
    void operator()(MbKey* k) const noexcept;
  };
  bool mb_seal(const uint8_t* nonce, const uint8_t* aad, size_t aad_len, const uint8_t* in,
               size_t len, uint8_t* out, uint8_t* tag) noexcept;
  bool mb_seal_runs(const uint8_t* nonce, const uint8_t* aad, size_t aad_len, const Run* runs,
                    size_t n, uint8_t* out, uint8_t* tag) noexcept;
  bool mb_open(const uint8_t* nonce, const uint8_t* aad, size_t aad_len, const uint8_t* in,
               size_t len, uint8_t* out, const uint8_t* tag) noexcept;

  Backend backend_;
  EVP_CIPHER_CTX* enc_ = nullptr;
  EVP_CIPHER_CTX* dec_ = nullptr;
  std::unique_ptr<MbKey, MbKeyDeleter> mb_key_;
  bool keyed_ = false;
};

}  // namespace rowan::crypto
