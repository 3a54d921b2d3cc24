// Crypto cost of the WAN link (issue 9): packets per second on one core with
// and without encryption, in the same run.
//   1. AES-256-GCM seal+open of one datagram (the per-packet work of SecureIo
//      on each side), for several payload sizes;
//   2. a full path on one core: bursts of 32 datagrams through a loopback link
//      (copying PacketIo backend), plain vs. wrapped in SecureIo on both ends
//      (seal on send, anti-replay + open on receive).
// Built and run by bench/crypto-cost. Wall-clock timing (a benchmark).
#include <chrono>
#include <cstring>
#include <memory>
#include <vector>

#include <fmt/format.h>

#include "crypto/aead.h"
#include "crypto/secure_io.h"
#include "io/loopback.h"

using namespace rowan;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void aead_loop(uint32_t size) {
  crypto::AesGcm tx, rx;
  const crypto::Key k = crypto::generate_private_key();
  tx.set_key(k);
  rx.set_key(k);
  std::vector<uint8_t> pt(size, 0xab), ct(size), out(size);
  uint8_t hdr[16] = {4}, tag[16];
  const uint64_t n = 2000000;
  auto t0 = std::chrono::steady_clock::now();
  for (uint64_t i = 0; i < n; ++i) {
    const auto nonce = crypto::AesGcm::nonce(i);
    if (!tx.seal(nonce, hdr, 16, pt.data(), size, ct.data(), tag)) std::abort();
    if (!rx.open(nonce, hdr, 16, ct.data(), size, out.data(), tag)) std::abort();
  }
  const double s = seconds_since(t0);
  fmt::print("aead seal+open  {:5} B  {:10.0f} pkt/s  {:7.2f} Gbit/s payload  ({:.0f} ns/pkt)\n",
             size, n / s, n * size * 8.0 / s / 1e9, s / n * 1e9);
}

// Moves `total` datagrams of `size` bytes from a to b, 32 per burst.
double path_loop(io::PacketIo& a, io::PacketIo& b, uint32_t size, uint64_t total, TimePoint& now) {
  std::vector<uint8_t> payload(size, 0x5a);
  std::vector<io::TxDatagram> tx(32, io::TxDatagram{payload.data(), size, io::Ecn::kEct0});
  std::vector<uint8_t> mem(size_t{32} * 2048);
  std::vector<io::RxDatagram> rx(32);
  uint64_t got = 0;
  auto t0 = std::chrono::steady_clock::now();
  while (got < total) {
    const size_t sent = a.send_burst(tx, now);
    (void)sent;
    for (size_t i = 0; i < rx.size(); ++i) rx[i] = io::RxDatagram{mem.data() + i * 2048, 2048};
    got += b.recv_burst(rx, now);
    now += Duration::from_ns(1);
  }
  return total / seconds_since(t0);
}

}  // namespace

int main() {
  for (uint32_t size : {64U, 512U, 1400U}) aead_loop(size);
  const uint32_t size = 1400;
  const uint64_t total = 4000000;
  TimePoint now = TimePoint::from_ns(1000000000);
  {
    io::LoopbackLink link(1500, 1024, 1);
    const double pps = path_loop(link.a(), link.b(), size, total, now);
    fmt::print("loopback plain   {:5} B  {:10.0f} pkt/s  {:7.2f} Gbit/s payload\n", size, pps,
               pps * size * 8 / 1e9);
  }
  {
    io::LoopbackLink link(1500 + crypto::SecureIo::kOverhead, 1024, 1);
    crypto::SecureIoOptions oa, ob;
    oa.private_key = crypto::generate_private_key();
    ob.private_key = crypto::generate_private_key();
    oa.peer_public = crypto::public_key(ob.private_key);
    ob.peer_public = crypto::public_key(oa.private_key);
    crypto::SecureIo a(link.a(), oa, now), b(link.b(), ob, now);
    std::vector<uint8_t> mem(size_t{32} * 2048);
    std::vector<io::RxDatagram> rx(32);
    for (int i = 0; i < 10 && !(a.has_session(now) && b.has_session(now)); ++i) {
      for (auto* s : {&a, &b}) {
        for (size_t j = 0; j < rx.size(); ++j) rx[j] = io::RxDatagram{mem.data() + j * 2048, 2048};
        s->recv_burst(rx, now);
      }
      now += Duration::from_ms(1);
    }
    if (!a.has_session(now)) std::abort();
    const double pps = path_loop(a, b, size, total, now);
    fmt::print("loopback secure  {:5} B  {:10.0f} pkt/s  {:7.2f} Gbit/s payload  (drops {})\n",
               size, pps, pps * size * 8 / 1e9, b.secure_stats().drops_total());
  }
  return 0;
}
