#include "crypto/handshake.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>

#include <cstring>
#include <memory>

#include "crypto/aead.h"

namespace rowan::crypto {
namespace {

constexpr char kProtocol[] = "rowan-link-v1 X25519 AES256GCM SHA256 IK";
constexpr char kInfoChain[] = "rowan-link-v1 chain";
constexpr char kInfoData[] = "rowan-link-v1 data";

struct MdCtxFree {
  void operator()(EVP_MD_CTX* p) const { EVP_MD_CTX_free(p); }
};
struct KdfFree {
  void operator()(EVP_KDF* p) const { EVP_KDF_free(p); }
};
struct KdfCtxFree {
  void operator()(EVP_KDF_CTX* p) const { EVP_KDF_CTX_free(p); }
};

// SHA-256(a || b).
bool hash2(const uint8_t* a, size_t alen, const uint8_t* b, size_t blen, Key& out) {
  std::unique_ptr<EVP_MD_CTX, MdCtxFree> ctx(EVP_MD_CTX_new());
  unsigned int len = 0;
  return ctx && EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) == 1 &&
         EVP_DigestUpdate(ctx.get(), a, alen) == 1 &&
         (blen == 0 || EVP_DigestUpdate(ctx.get(), b, blen) == 1) &&
         EVP_DigestFinal_ex(ctx.get(), out.data(), &len) == 1 && len == out.size();
}

bool mix_hash(Key& h, const uint8_t* data, size_t len) {
  Key prev = h;
  return hash2(prev.data(), prev.size(), data, len, h);
}

// HKDF-SHA256 (RFC 5869) with salt = ck; writes 64 bytes: the new chaining key
// and a key for the next AEAD (or the two data keys).
bool hkdf2(const Key& ck, const uint8_t* ikm, size_t ikm_len, const char* info, Key& out1,
           Key& out2) {
  std::unique_ptr<EVP_KDF, KdfFree> kdf(EVP_KDF_fetch(nullptr, "HKDF", nullptr));
  if (!kdf) return false;
  std::unique_ptr<EVP_KDF_CTX, KdfCtxFree> ctx(EVP_KDF_CTX_new(kdf.get()));
  if (!ctx) return false;
  char digest[] = "SHA256";
  // An empty IKM is legal HKDF; OpenSSL wants a non-null pointer.
  static const uint8_t kEmpty[1] = {0};
  OSSL_PARAM params[] = {
      OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, digest, 0),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY,
                                        const_cast<uint8_t*>(ikm_len ? ikm : kEmpty), ikm_len),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT, const_cast<uint8_t*>(ck.data()),
                                        ck.size()),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, const_cast<char*>(info),
                                        std::strlen(info)),
      OSSL_PARAM_construct_end()};
  uint8_t okm[64];
  if (EVP_KDF_derive(ctx.get(), okm, sizeof okm, params) != 1) return false;
  std::memcpy(out1.data(), okm, 32);
  std::memcpy(out2.data(), okm + 32, 32);
  wipe(okm);
  return true;
}

bool mix_key(Key& ck, const uint8_t* ikm, size_t len, Key& k) {
  const Key prev = ck;
  return hkdf2(prev, ikm, len, kInfoChain, ck, k);
}

bool mix_key(Key& ck, const uint8_t* ikm, size_t len) {
  Key unused{};
  const bool ok = mix_key(ck, ikm, len, unused);
  wipe(unused);
  return ok;
}

void initial_state(const Key& responder_static, HandshakeState& st) {
  hash2(reinterpret_cast<const uint8_t*>(kProtocol), sizeof kProtocol - 1, nullptr, 0, st.ck);
  hash2(st.ck.data(), st.ck.size(), responder_static.data(), responder_static.size(), st.h);
}

// AEAD with nonce 0: each handshake key is used exactly once.
bool seal_once(const Key& k, const Key& h, const uint8_t* in, size_t len, uint8_t* out) {
  AesGcm g;
  g.set_key(k);
  return g.seal(AesGcm::nonce(0), h.data(), h.size(), in, len, out, out + len);
}

bool open_once(const Key& k, const Key& h, const uint8_t* in, size_t len, uint8_t* out) {
  AesGcm g;
  g.set_key(k);
  return g.open(AesGcm::nonce(0), h.data(), h.size(), in, len, out, in + len);
}

bool new_ephemeral(HandshakeState& st) {
  st.ephemeral_private = generate_private_key();
  st.ephemeral_public = public_key(st.ephemeral_private);
  return true;
}

}  // namespace

bool Identity::init(const Key& priv, const Key& peer_pub) {
  private_key = priv;
  public_key = crypto::public_key(priv);
  peer_public = peer_pub;
  return x25519(private_key, peer_public, static_dh);
}

void HandshakeState::wipe() noexcept {
  crypto::wipe(ck);
  crypto::wipe(h);
  crypto::wipe(ephemeral_private);
}

void SessionKeys::wipe() noexcept {
  crypto::wipe(send);
  crypto::wipe(recv);
}

bool create_initiation(const Identity& id, uint32_t local_index, uint64_t timestamp,
                       uint64_t incarnation, HandshakeState& st, uint8_t* out) {
  st = HandshakeState{};
  st.local_index = local_index;
  initial_state(id.peer_public, st);
  std::memset(out, 0, kInitiationSize);
  out[0] = kMsgInitiation;
  store_be32(out + 4, local_index);
  if (!mix_hash(st.h, out, 8)) return false;
  // e
  new_ephemeral(st);
  std::memcpy(out + 8, st.ephemeral_public.data(), kKeySize);
  if (!mix_hash(st.h, out + 8, kKeySize) || !mix_key(st.ck, out + 8, kKeySize)) return false;
  // es, then s encrypted
  Key dh{}, k{};
  if (!x25519(st.ephemeral_private, id.peer_public, dh) || !mix_key(st.ck, dh.data(), dh.size(), k))
    return false;
  if (!seal_once(k, st.h, id.public_key.data(), kKeySize, out + 40)) return false;
  if (!mix_hash(st.h, out + 40, 48)) return false;
  // ss, then the timestamp encrypted
  if (!mix_key(st.ck, id.static_dh.data(), id.static_dh.size(), k)) return false;
  uint8_t ts[16];
  store_be64(ts, timestamp);
  store_be64(ts + 8, incarnation);
  if (!seal_once(k, st.h, ts, sizeof ts, out + 88)) return false;
  if (!mix_hash(st.h, out + 88, 32)) return false;
  wipe(dh);
  wipe(k);
  return true;
}

HandshakeResult consume_initiation(const Identity& id, const uint8_t* msg, uint64_t last_timestamp,
                                   HandshakeState& st, uint64_t& timestamp, uint64_t& incarnation) {
  st = HandshakeState{};
  initial_state(id.public_key, st);
  st.remote_index = load_be32(msg + 4);
  if (!mix_hash(st.h, msg, 8)) return HandshakeResult::kBadAuth;
  std::memcpy(st.peer_ephemeral.data(), msg + 8, kKeySize);
  if (!mix_hash(st.h, msg + 8, kKeySize) || !mix_key(st.ck, msg + 8, kKeySize)) {
    return HandshakeResult::kBadAuth;
  }
  Key dh{}, k{}, peer_static{};
  if (!x25519(id.private_key, st.peer_ephemeral, dh) || !mix_key(st.ck, dh.data(), dh.size(), k))
    return HandshakeResult::kBadAuth;
  if (!open_once(k, st.h, msg + 40, kKeySize, peer_static.data())) return HandshakeResult::kBadAuth;
  if (!mix_hash(st.h, msg + 40, 48)) return HandshakeResult::kBadAuth;
  if (CRYPTO_memcmp(peer_static.data(), id.peer_public.data(), kKeySize) != 0) {
    return HandshakeResult::kUnknownPeer;
  }
  if (!mix_key(st.ck, id.static_dh.data(), id.static_dh.size(), k))
    return HandshakeResult::kBadAuth;
  uint8_t ts[16];
  if (!open_once(k, st.h, msg + 88, sizeof ts, ts)) return HandshakeResult::kBadAuth;
  if (!mix_hash(st.h, msg + 88, 32)) return HandshakeResult::kBadAuth;
  wipe(dh);
  wipe(k);
  timestamp = load_be64(ts);
  incarnation = load_be64(ts + 8);
  if (timestamp <= last_timestamp) return HandshakeResult::kReplay;
  return HandshakeResult::kOk;
}

bool create_response(const Identity& id, uint32_t local_index, uint64_t incarnation,
                     HandshakeState& st, uint8_t* out, SessionKeys& keys) {
  st.local_index = local_index;
  std::memset(out, 0, kResponseSize);
  out[0] = kMsgResponse;
  store_be32(out + 4, local_index);
  store_be32(out + 8, st.remote_index);
  if (!mix_hash(st.h, out, 12)) return false;
  new_ephemeral(st);
  std::memcpy(out + 12, st.ephemeral_public.data(), kKeySize);
  if (!mix_hash(st.h, out + 12, kKeySize) || !mix_key(st.ck, out + 12, kKeySize)) return false;
  Key dh{}, k{};
  // ee
  if (!x25519(st.ephemeral_private, st.peer_ephemeral, dh) || !mix_key(st.ck, dh.data(), dh.size()))
    return false;
  // se: the responder's ephemeral with the initiator's static key
  if (!x25519(st.ephemeral_private, id.peer_public, dh) ||
      !mix_key(st.ck, dh.data(), dh.size(), k)) {
    return false;
  }
  uint8_t inc[8];
  store_be64(inc, incarnation);
  if (!seal_once(k, st.h, inc, sizeof inc, out + 44)) return false;
  if (!mix_hash(st.h, out + 44, sizeof inc + kAeadTagSize)) return false;
  // Initiator→responder key first.
  if (!hkdf2(st.ck, nullptr, 0, kInfoData, keys.recv, keys.send)) return false;
  wipe(dh);
  wipe(k);
  st.wipe();
  return true;
}

HandshakeResult consume_response(const Identity& id, const uint8_t* msg, HandshakeState& pending,
                                 SessionKeys& keys, uint64_t& incarnation) {
  // Work on a copy: a forged response must not spoil the pending handshake.
  HandshakeState st = pending;
  st.remote_index = load_be32(msg + 4);
  if (!mix_hash(st.h, msg, 12)) return HandshakeResult::kBadAuth;
  std::memcpy(st.peer_ephemeral.data(), msg + 12, kKeySize);
  if (!mix_hash(st.h, msg + 12, kKeySize) || !mix_key(st.ck, msg + 12, kKeySize)) {
    return HandshakeResult::kBadAuth;
  }
  Key dh{}, k{};
  if (!x25519(st.ephemeral_private, st.peer_ephemeral, dh) ||
      !mix_key(st.ck, dh.data(), dh.size())) {
    return HandshakeResult::kBadAuth;
  }
  if (!x25519(id.private_key, st.peer_ephemeral, dh) || !mix_key(st.ck, dh.data(), dh.size(), k)) {
    return HandshakeResult::kBadAuth;
  }
  uint8_t inc[8];
  if (!open_once(k, st.h, msg + 44, sizeof inc, inc)) return HandshakeResult::kBadAuth;
  incarnation = load_be64(inc);
  if (!hkdf2(st.ck, nullptr, 0, kInfoData, keys.send, keys.recv)) return HandshakeResult::kBadAuth;
  wipe(dh);
  wipe(k);
  pending.remote_index = st.remote_index;
  st.wipe();
  pending.wipe();
  return HandshakeResult::kOk;
}

}  // namespace rowan::crypto
