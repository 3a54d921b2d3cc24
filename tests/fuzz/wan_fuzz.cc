// libFuzzer target for the WAN datagram path, before and after decryption.
//
// Two SecureIo ends (fixed keys) share a loopback link and complete their
// handshake once. Each input is then, by its first byte:
//  - even: raw bytes arriving at b's WAN port (the SecureIo parser: message
//    types, handshake messages, data headers, anti-replay, AEAD);
//  - odd:  a transport datagram that a seals with its real session key, so b
//    decrypts it and the transport's wire parser (transport::Connection::
//    on_datagram) sees attacker-chosen plaintext — what a peer holding the
//    key could send.
// Properties beyond ASan/UBSan: a raw datagram is never delivered as data
// (nobody without the key can forge one), and a sealed one always is.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "crypto/secure_io.h"
#include "io/loopback.h"
#include "transport/connection.h"

namespace {

using namespace rowan;

struct FixedClock final : Clock {
  TimePoint t = TimePoint::from_ns(1000000000);
  TimePoint now() const override { return t; }
};

crypto::Key fixed_key(uint8_t seed) {
  crypto::Key k{};
  for (size_t i = 0; i < k.size(); ++i) k[i] = static_cast<uint8_t>(seed * 37 + i);
  return k;
}

constexpr uint32_t kMtu = 1472;
constexpr uint64_t kConnId = 0x0123456789abcdefULL;

struct World {
  FixedClock clock;
  io::LoopbackLink link{kMtu, 256, 1};
  std::unique_ptr<crypto::SecureIo> a, b;
  std::unique_ptr<transport::Connection> conn;
  std::vector<uint8_t> mem = std::vector<uint8_t>(64 * kMtu);
  std::vector<io::RxDatagram> rx = std::vector<io::RxDatagram>(64);

  World() {
    crypto::SecureIoOptions oa, ob;
    oa.private_key = fixed_key(1);
    oa.peer_public = crypto::public_key(fixed_key(2));
    ob.private_key = fixed_key(2);
    ob.peer_public = crypto::public_key(fixed_key(1));
    a = std::make_unique<crypto::SecureIo>(link.a(), oa, clock.t);
    b = std::make_unique<crypto::SecureIo>(link.b(), ob, clock.t);
    for (int i = 0; i < 20; ++i) {
      recv(*a);
      recv(*b);
      clock.t += Duration::from_ms(1);
    }
    if (!a->has_session(clock.t) || !b->has_session(clock.t)) std::abort();
    transport::TransportConfig tc;
    tc.connection_id = kConnId;
    tc.max_datagram = b->max_datagram();
    tc.integrity_check = false;  // the AEAD protects the link
    tc.max_streams = 64;
    conn = std::make_unique<transport::Connection>(tc, clock, clock.t);
  }

  size_t recv(crypto::SecureIo& s) {
    for (size_t i = 0; i < rx.size(); ++i) rx[i] = io::RxDatagram{mem.data() + i * kMtu, kMtu};
    return s.recv_burst(rx, clock.t);
  }
};

World& world() {
  static World w;
  return w;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  World& w = world();
  w.clock.t += Duration::from_us(1);
  const bool sealed = (data[0] & 1) != 0;
  ++data;
  --size;
  if (!sealed) {
    if (size > kMtu) return 0;
    const io::TxDatagram d{data, static_cast<uint32_t>(size)};
    if (w.link.a().send_burst({&d, 1}, w.clock.t) != 1) return 0;
    if (w.recv(*w.b) != 0) std::abort();  // forged data delivered
    return 0;
  }
  const uint32_t max = w.a->max_datagram();
  if (size > max) size = max;
  std::vector<uint8_t> dgram(data, data + size);
  // Point most inputs at the real connection so the frame parser runs.
  if (dgram.size() >= 12 && (dgram[1] & 0x10) == 0) {
    for (int i = 0; i < 8; ++i) dgram[4 + i] = static_cast<uint8_t>(kConnId >> (56 - 8 * i));
    dgram[0] = 1;
  }
  const io::TxDatagram d{dgram.data(), static_cast<uint32_t>(dgram.size())};
  if (w.a->send_burst({&d, 1}, w.clock.t) != 1) return 0;
  const size_t n = w.recv(*w.b);
  if (size > 0 && n != 1) std::abort();  // a sealed datagram must arrive
  if (n == 1) {
    if (w.rx[0].len != size || std::memcmp(w.rx[0].data, dgram.data(), size) != 0) std::abort();
    w.conn->on_datagram(w.rx[0].data, w.rx[0].len, w.rx[0].ecn, w.clock.t);
  }
  return 0;
}
