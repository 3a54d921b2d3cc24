// The UDP WAN backend's cost per datagram with and without segmentation
// offload, in one run (lib/src/io/udp_uring.h). One thread drives two
// UdpUringIo sockets on 127.0.0.1: bursts of 32 datagrams from a to b, then b
// drained, for a window of wall time per mode; the modes alternate within
// each round, so the machine's load falls on all of them alike.
//   gso+gro  sender coalesces runs (UDP_SEGMENT), receiver takes trains (UDP_GRO)
//   gso      sender coalesces, receiver without UDP_GRO (the kernel splits for it)
//   off      one sendmsg per datagram, one receive per datagram (as before GSO)
// Per mode: datagrams b received per second of the process's CPU time
// (getrusage: user + system of every thread, io_uring's workers included,
// and the loopback receive that runs in softirq on this thread's CPU), and
// the ratio to `off` in the same round.
//   udp_gso_bench [--size 1472] [--seconds 2] [--rounds 3]
// Built and run by bench/udp-gso. Wall-clock windows (a benchmark).
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "io/udp_uring.h"

using namespace rowan;

namespace {

// Where a socket bound to port 0 ended up.
io::UdpEndpoint bound(int fd) {
  io::UdpEndpoint e;
  e.len = sizeof e.addr;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&e.addr), &e.len) != 0) std::abort();
  return e;
}

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

struct Mode {
  const char* name;
  bool gso, gro;
};

struct Result {
  double per_cpu_s = 0, cpu_share = 0, lost = 0, per_send = 0;
};

Result run(const Mode& m, uint32_t size, double seconds) {
  // b first, unconnected (it takes any source); a sends to wherever b is.
  io::UdpUringOptions ob;
  ob.bind = io::UdpEndpoint::parse("127.0.0.1:0");
  ob.gso = m.gso;
  ob.gro = m.gro;
  io::UdpUringIo b(ob);
  io::UdpUringOptions oa = ob;
  oa.peer = bound(b.fd());
  io::UdpUringIo a(oa);
  constexpr size_t kBurst = 32;
  std::vector<uint8_t> payload(kBurst * size, 0x5a);
  std::vector<io::TxDatagram> tx(kBurst);
  for (size_t i = 0; i < kBurst; ++i) tx[i] = {payload.data() + i * size, size};
  std::vector<uint8_t> mem(kBurst * size);
  std::vector<io::RxDatagram> rx(kBurst);
  for (size_t i = 0; i < kBurst; ++i) rx[i] = {mem.data() + i * size, size};
  uint64_t sent = 0;
  const auto drain = [&] {
    uint64_t got = 0;
    for (size_t n = kBurst; n == kBurst;) {
      n = b.recv_burst(rx, TimePoint());
      got += n;
    }
    return got;
  };
  const auto t0 = std::chrono::steady_clock::now();
  const double c0 = cpu_seconds();
  uint64_t got = 0;
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < seconds) {
    sent += a.send_burst(tx, TimePoint());
    got += drain();
  }
  for (int i = 0; i < 50 && got < sent; ++i) {  // the last bursts still in the socket
    b.wait(Duration::from_ms(1));
    got += drain();
  }
  const double cpu = cpu_seconds() - c0;
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  Result r;
  r.per_cpu_s = static_cast<double>(got) / cpu;
  r.cpu_share = cpu / wall;
  r.lost =
      sent > 0 ? static_cast<double>(sent - std::min(got, sent)) / static_cast<double>(sent) : 0;
  const io::UdpStats& s = a.udp_stats();
  r.per_send = s.tx_gso_sends > 0
                   ? static_cast<double>(s.tx_gso_datagrams) / static_cast<double>(s.tx_gso_sends)
                   : 1.0;
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  uint32_t size = 1472;
  double seconds = 2;
  int rounds = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--size") {
      size = static_cast<uint32_t>(std::atoi(argv[i + 1]));
    } else if (k == "--seconds") {
      seconds = std::atof(argv[i + 1]);
    } else if (k == "--rounds") {
      rounds = std::atoi(argv[i + 1]);
    } else {
      std::fprintf(stderr, "unknown argument %s\n", argv[i]);
      return 64;
    }
  }
  if (size == 0 || size > 1472) {
    std::fprintf(stderr, "--size must be 1..1472\n");
    return 64;
  }
  const Mode modes[] = {{"off", false, false}, {"gso", true, false}, {"gso+gro", true, true}};
  std::printf(
      "| round | mode | datagrams of %u B per CPU-second | x off | CPU share | lost | "
      "datagrams per send |\n|---|---|---|---|---|---|---|\n",
      size);
  for (int r = 1; r <= rounds; ++r) {
    double off = 0;
    for (const Mode& m : modes) {
      const Result x = run(m, size, seconds);
      if (!m.gso) off = x.per_cpu_s;
      std::printf("| %d | %s | %.0f | %.2f | %.2f | %.4f | %.1f |\n", r, m.name, x.per_cpu_s,
                  off > 0 ? x.per_cpu_s / off : 0.0, x.cpu_share, x.lost, x.per_send);
      std::fflush(stdout);
    }
  }
  return 0;
}
