#include "api/channel_handshake.h"

#include <cstring>

#include "codec/bytes.h"

namespace rowan::api {

void encode_handshake(const Handshake& h, uint8_t out[kHandshakeSize]) {
  std::memset(out, 0, kHandshakeSize);
  wire::store_le32(out, kHandshakeMagic);
  out[4] = kHandshakeVersion;
  out[5] = static_cast<uint8_t>(h.type);
  wire::store_le16(out + 6, h.data_port);
  wire::store_le64(out + 8, h.nonce);
  wire::store_le64(out + 16, h.connection_id);
  wire::store_le64(out + 24, h.rate_bps);
  wire::store_le64(out + 32, h.rtt_ns);
  std::memcpy(out + 40, h.cc, sizeof h.cc - 1);
  out[62] = h.path;
  out[63] = h.flags;
}

bool decode_handshake(const uint8_t* data, size_t len, Handshake* h) {
  if (len != kHandshakeSize || wire::load_le32(data) != kHandshakeMagic ||
      data[4] != kHandshakeVersion)
    return false;
  if (data[5] < 1 || data[5] > 4) return false;
  h->type = static_cast<HandshakeType>(data[5]);
  h->data_port = wire::load_le16(data + 6);
  h->nonce = wire::load_le64(data + 8);
  h->connection_id = wire::load_le64(data + 16);
  h->rate_bps = wire::load_le64(data + 24);
  h->rtt_ns = wire::load_le64(data + 32);
  std::memcpy(h->cc, data + 40, sizeof h->cc);
  h->cc[sizeof h->cc - 1] = '\0';
  h->path = data[62];
  h->flags = data[63];
  return true;
}

}  // namespace rowan::api
