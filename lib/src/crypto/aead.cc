#include "crypto/aead.h"

#include <openssl/evp.h>

#include <climits>
#include <stdexcept>

namespace rowan::crypto {

AesGcm::AesGcm() : enc_(EVP_CIPHER_CTX_new()), dec_(EVP_CIPHER_CTX_new()) {
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
  // The 96-bit IV is GCM's default length; the key schedule is computed here
  // once and kept in the contexts.
  if (EVP_EncryptInit_ex(enc_, EVP_aes_256_gcm(), nullptr, key.data(), nullptr) != 1 ||
      EVP_DecryptInit_ex(dec_, EVP_aes_256_gcm(), nullptr, key.data(), nullptr) != 1) {
    keyed_ = false;
    throw std::runtime_error("AES-256-GCM: cannot set key");
  }
  keyed_ = true;
}

std::array<uint8_t, kAeadNonceSize> AesGcm::nonce(uint64_t counter) noexcept {
  std::array<uint8_t, kAeadNonceSize> n{};
  for (int i = 0; i < 8; ++i) n[4 + i] = static_cast<uint8_t>(counter >> (56 - 8 * i));
  return n;
}

bool AesGcm::seal(const std::array<uint8_t, kAeadNonceSize>& nonce, const uint8_t* aad,
                  size_t aad_len, const uint8_t* in, size_t len, uint8_t* out,
                  uint8_t* tag) noexcept {
  if (!keyed_ || len > INT_MAX || aad_len > INT_MAX) return false;
  int n = 0;
  if (EVP_EncryptInit_ex(enc_, nullptr, nullptr, nullptr, nonce.data()) != 1) return false;
  if (aad_len > 0 && EVP_EncryptUpdate(enc_, nullptr, &n, aad, static_cast<int>(aad_len)) != 1) {
    return false;
  }
  if (len > 0 && EVP_EncryptUpdate(enc_, out, &n, in, static_cast<int>(len)) != 1) return false;
  if (EVP_EncryptFinal_ex(enc_, out + len, &n) != 1) return false;
  return EVP_CIPHER_CTX_ctrl(enc_, EVP_CTRL_GCM_GET_TAG, kAeadTagSize, tag) == 1;
}

bool AesGcm::open(const std::array<uint8_t, kAeadNonceSize>& nonce, const uint8_t* aad,
                  size_t aad_len, const uint8_t* in, size_t len, uint8_t* out,
                  const uint8_t* tag) noexcept {
  if (!keyed_ || len > INT_MAX || aad_len > INT_MAX) return false;
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
