#include "crypto/aead.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <climits>
#include <cstdlib>
#include <stdexcept>
#include <string>

#ifdef ROWAN_HAVE_IPSEC_MB
#include <intel-ipsec-mb.h>
#endif

namespace rowan::crypto {

#ifdef ROWAN_HAVE_IPSEC_MB
struct AesGcm::MbKey {
  gcm_key_data data;  // aligned(64) by the library's declaration
};

namespace {

// One manager for the process: the direct GCM API only reads its table of
// function pointers, which init_mb_mgr_auto() fills once for this CPU.
struct MbManager {
  IMB_MGR* mgr = nullptr;
  std::string name;
  MbManager() {
    mgr = alloc_mb_mgr(0);
    if (mgr == nullptr) return;
    IMB_ARCH arch = IMB_ARCH_NONE;
    init_mb_mgr_auto(mgr, &arch);
    const char* a = arch == IMB_ARCH_AVX512 ? "avx512"
                    : arch == IMB_ARCH_AVX2 ? "avx2"
                    : arch == IMB_ARCH_AVX  ? "avx"
                    : arch == IMB_ARCH_SSE  ? "sse"
                                            : nullptr;
    if (a == nullptr) {  // no AES-NI (IMB_ARCH_NOAESNI) or nothing: OpenSSL instead
      free_mb_mgr(mgr);
      mgr = nullptr;
      return;
    }
    name = std::string("intel-ipsec-mb ") + imb_get_version_str() + " (" + a + ")";
  }
  ~MbManager() {
    if (mgr != nullptr) free_mb_mgr(mgr);
  }
  MbManager(const MbManager&) = delete;
  MbManager& operator=(const MbManager&) = delete;
};

const MbManager& mb_manager() {
  static const MbManager m;  // thread-safe one-time set-up
  return m;
}

// The library checks its pointer arguments even for zero lengths.
const uint8_t kEmpty[1] = {0};

}  // namespace

void AesGcm::MbKeyDeleter::operator()(MbKey* k) const noexcept {
  OPENSSL_cleanse(k, sizeof *k);
  delete k;
}
#else
struct AesGcm::MbKey {};
void AesGcm::MbKeyDeleter::operator()(MbKey* k) const noexcept { delete k; }
#endif

bool AesGcm::ipsec_mb_built() noexcept {
#ifdef ROWAN_HAVE_IPSEC_MB
  return true;
#else
  return false;
#endif
}

AesGcm::Backend AesGcm::default_backend() noexcept {
#ifdef ROWAN_HAVE_IPSEC_MB
  // ROWAN_AEAD=openssl keeps OpenSSL (to compare the two in one run, or to
  // rule the library out).
  static const bool forced_openssl = [] {
    const char* v = std::getenv("ROWAN_AEAD");
    return v != nullptr && std::string_view(v) == "openssl";
  }();
  if (!forced_openssl && mb_manager().mgr != nullptr) return Backend::kIpsecMb;
#endif
  return Backend::kOpenSsl;
}

std::string_view AesGcm::default_backend_name() noexcept {
#ifdef ROWAN_HAVE_IPSEC_MB
  if (default_backend() == Backend::kIpsecMb) return mb_manager().name;
#endif
  return "openssl";
}

std::string_view AesGcm::backend_name() const noexcept {
#ifdef ROWAN_HAVE_IPSEC_MB
  if (backend_ == Backend::kIpsecMb) return mb_manager().name;
#endif
  return "openssl";
}

AesGcm::AesGcm(Backend backend)
    : backend_(backend == Backend::kIpsecMb ? default_backend() : Backend::kOpenSsl),
      enc_(EVP_CIPHER_CTX_new()),
      dec_(EVP_CIPHER_CTX_new()) {
  if (enc_ == nullptr || dec_ == nullptr) {
    EVP_CIPHER_CTX_free(enc_);
    EVP_CIPHER_CTX_free(dec_);
    throw std::runtime_error("EVP_CIPHER_CTX_new failed");
  }
}

AesGcm::~AesGcm() {
  EVP_CIPHER_CTX_free(enc_);
  EVP_CIPHER_CTX_free(dec_);
}

void AesGcm::set_key(const Key& key) {
  keyed_ = false;
#ifdef ROWAN_HAVE_IPSEC_MB
  if (backend_ == Backend::kIpsecMb) {
    // The key schedule and GHASH's table of hash-key powers, once.
    if (!mb_key_) mb_key_.reset(new MbKey);
    IMB_AES256_GCM_PRE(mb_manager().mgr, key.data(), &mb_key_->data);
    keyed_ = true;
    return;
  }
#endif
  // The 96-bit IV is GCM's default length; the key schedule is computed here
  // once and kept in the contexts.
  if (EVP_EncryptInit_ex(enc_, EVP_aes_256_gcm(), nullptr, key.data(), nullptr) != 1 ||
      EVP_DecryptInit_ex(dec_, EVP_aes_256_gcm(), nullptr, key.data(), nullptr) != 1) {
    throw std::runtime_error("AES-256-GCM: cannot set key");
  }
  keyed_ = true;
}

#ifdef ROWAN_HAVE_IPSEC_MB
bool AesGcm::mb_seal(const uint8_t* nonce, const uint8_t* aad, size_t aad_len, const uint8_t* in,
                     size_t len, uint8_t* out, uint8_t* tag) noexcept {
  gcm_context_data ctx;
  uint8_t none[1];
  IMB_AES256_GCM_ENC(mb_manager().mgr, &mb_key_->data, &ctx, len > 0 ? out : none,
                     len > 0 ? in : kEmpty, len, nonce, aad_len > 0 ? aad : kEmpty, aad_len, tag,
                     kAeadTagSize);
  return true;
}

bool AesGcm::mb_seal_runs(const uint8_t* nonce, const uint8_t* aad, size_t aad_len, const Run* runs,
                          size_t n, uint8_t* out, uint8_t* tag) noexcept {
  // The library's incremental API carries a partial block from one update
  // to the next, so runs of any length make the same bytes as one call.
  gcm_context_data ctx;
  IMB_AES256_GCM_INIT(mb_manager().mgr, &mb_key_->data, &ctx, nonce, aad_len > 0 ? aad : kEmpty,
                      aad_len);
  for (size_t i = 0; i < n; ++i) {
    if (runs[i].len == 0) continue;
    IMB_AES256_GCM_ENC_UPDATE(mb_manager().mgr, &mb_key_->data, &ctx, out, runs[i].src,
                              runs[i].len);
    out += runs[i].len;
  }
  IMB_AES256_GCM_ENC_FINALIZE(mb_manager().mgr, &mb_key_->data, &ctx, tag, kAeadTagSize);
  return true;
}

bool AesGcm::mb_open(const uint8_t* nonce, const uint8_t* aad, size_t aad_len, const uint8_t* in,
                     size_t len, uint8_t* out, const uint8_t* tag) noexcept {
  gcm_context_data ctx;
  uint8_t none[1];
  uint8_t computed[kAeadTagSize];
  IMB_AES256_GCM_DEC(mb_manager().mgr, &mb_key_->data, &ctx, len > 0 ? out : none,
                     len > 0 ? in : kEmpty, len, nonce, aad_len > 0 ? aad : kEmpty, aad_len,
                     computed, kAeadTagSize);
  return CRYPTO_memcmp(computed, tag, kAeadTagSize) == 0;
}
#else
bool AesGcm::mb_seal(const uint8_t*, const uint8_t*, size_t, const uint8_t*, size_t, uint8_t*,
                     uint8_t*) noexcept {
  return false;
}
bool AesGcm::mb_seal_runs(const uint8_t*, const uint8_t*, size_t, const Run*, size_t, uint8_t*,
                          uint8_t*) noexcept {
  return false;
}
bool AesGcm::mb_open(const uint8_t*, const uint8_t*, size_t, const uint8_t*, size_t, uint8_t*,
                     const uint8_t*) noexcept {
  return false;
}
#endif

std::array<uint8_t, kAeadNonceSize> AesGcm::nonce(uint64_t counter) noexcept {
  std::array<uint8_t, kAeadNonceSize> n{};
  for (int i = 0; i < 8; ++i) n[4 + i] = static_cast<uint8_t>(counter >> (56 - 8 * i));
  return n;
}

bool AesGcm::seal(const std::array<uint8_t, kAeadNonceSize>& nonce, const uint8_t* aad,
                  size_t aad_len, const uint8_t* in, size_t len, uint8_t* out,
                  uint8_t* tag) noexcept {
  if (!keyed_ || len > INT_MAX || aad_len > INT_MAX) return false;
  if (backend_ == Backend::kIpsecMb) return mb_seal(nonce.data(), aad, aad_len, in, len, out, tag);
  int n = 0;
  if (EVP_EncryptInit_ex(enc_, nullptr, nullptr, nullptr, nonce.data()) != 1) return false;
  if (aad_len > 0 && EVP_EncryptUpdate(enc_, nullptr, &n, aad, static_cast<int>(aad_len)) != 1) {
    return false;
  }
  if (len > 0 && EVP_EncryptUpdate(enc_, out, &n, in, static_cast<int>(len)) != 1) return false;
  if (EVP_EncryptFinal_ex(enc_, out + len, &n) != 1) return false;
  return EVP_CIPHER_CTX_ctrl(enc_, EVP_CTRL_GCM_GET_TAG, kAeadTagSize, tag) == 1;
}

bool AesGcm::seal_runs(const std::array<uint8_t, kAeadNonceSize>& nonce, const uint8_t* aad,
                       size_t aad_len, const Run* runs, size_t n, uint8_t* out,
                       uint8_t* tag) noexcept {
  size_t total = 0;
  for (size_t i = 0; i < n; ++i) total += runs[i].len;
  if (!keyed_ || total > INT_MAX || aad_len > INT_MAX) return false;
  if (backend_ == Backend::kIpsecMb)
    return mb_seal_runs(nonce.data(), aad, aad_len, runs, n, out, tag);
  int k = 0;
  if (EVP_EncryptInit_ex(enc_, nullptr, nullptr, nullptr, nonce.data()) != 1) return false;
  if (aad_len > 0 && EVP_EncryptUpdate(enc_, nullptr, &k, aad, static_cast<int>(aad_len)) != 1) {
    return false;
  }
  // GCM is a stream mode: each update writes as many bytes as it took.
  uint8_t* o = out;
  for (size_t i = 0; i < n; ++i) {
    if (runs[i].len == 0) continue;
    if (EVP_EncryptUpdate(enc_, o, &k, runs[i].src, static_cast<int>(runs[i].len)) != 1) {
      return false;
    }
    o += runs[i].len;
  }
  if (EVP_EncryptFinal_ex(enc_, o, &k) != 1) return false;
  return EVP_CIPHER_CTX_ctrl(enc_, EVP_CTRL_GCM_GET_TAG, kAeadTagSize, tag) == 1;
}

bool AesGcm::open(const std::array<uint8_t, kAeadNonceSize>& nonce, const uint8_t* aad,
                  size_t aad_len, const uint8_t* in, size_t len, uint8_t* out,
                  const uint8_t* tag) noexcept {
  if (!keyed_ || len > INT_MAX || aad_len > INT_MAX) return false;
  if (backend_ == Backend::kIpsecMb) return mb_open(nonce.data(), aad, aad_len, in, len, out, tag);
  int n = 0;
  if (EVP_DecryptInit_ex(dec_, nullptr, nullptr, nullptr, nonce.data()) != 1) return false;
  if (aad_len > 0 && EVP_DecryptUpdate(dec_, nullptr, &n, aad, static_cast<int>(aad_len)) != 1) {
    return false;
  }
  if (len > 0 && EVP_DecryptUpdate(dec_, out, &n, in, static_cast<int>(len)) != 1) return false;
  // OpenSSL's ctrl takes a non-const pointer but only reads the tag here.
  if (EVP_CIPHER_CTX_ctrl(dec_, EVP_CTRL_GCM_SET_TAG, kAeadTagSize, const_cast<uint8_t*>(tag)) !=
      1) {
    return false;
  }
  return EVP_DecryptFinal_ex(dec_, out + len, &n) == 1;
}

}  // namespace rowan::crypto
