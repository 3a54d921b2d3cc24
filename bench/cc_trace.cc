// cc_trace: one bulk transport connection over the io_uring UDP backend (the
// same Connection, Driver and event loop shape as librowan's channel), printing
// the congestion controller's state every --every ms, to see what the CC sees
// on a real (emulated) path. Built by bench/cc-trace; not part of the build.
//
//   cc_trace -s BIND_IP:PORT PEER_IP:PORT
//   cc_trace -c BIND_IP:PORT PEER_IP:PORT --cc rowan --rate BPS --rtt SECONDS --seconds N
//            [--every MS] [--param k=v]...
//
// Trace columns (CSV): t_s, goodput_mbps (interval), latest_rtt_ms, srtt_ms,
// min_rtt_ms, cwnd, in_flight, pacing_mbps, and for rowan: base_ms (its min
// RTT), queue_ms, target_ms, noise_ms (its delay noise), delivery_mbps (its
// windowed-max delivery rate), phase; then wake_late_p50/p99_us of the
// event loop over the interval (how late it woke past the transport's timer).
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "base/clock.h"
#include "io/udp_uring.h"
#include "rowan/rowan.h"
#include "transport/connection.h"
#include "transport/driver.h"

using namespace rowan;

int main(int argc, char** argv) {
  if (argc < 4) {
    fmt::print(stderr, "usage: cc_trace -s|-c BIND PEER [options]\n");
    return 64;
  }
  const bool client = std::strcmp(argv[1], "-c") == 0;
  std::string cc = "rowan";
  double rate = 1e8, rtt = 0.02, seconds = 10, every_ms = 10;
  cc::CcParams params;
  for (int i = 4; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--cc")
      cc = v;
    else if (k == "--rate")
      rate = std::atof(v.c_str());
    else if (k == "--rtt")
      rtt = std::atof(v.c_str());
    else if (k == "--seconds")
      seconds = std::atof(v.c_str());
    else if (k == "--every")
      every_ms = std::atof(v.c_str());
    else if (k == "--param") {
      const auto eq = v.find('=');
      params.set(v.substr(0, eq), v.substr(eq + 1));
    }
  }
  io::UdpUringOptions o;
  o.bind = io::UdpEndpoint::parse(argv[2]);
  o.peer = io::UdpEndpoint::parse(argv[3]);
  io::UdpUringIo udp(o);
  MonotonicClock clock;
  transport::TransportConfig cfg;
  cfg.connection_id = 7;
  cfg.link_rate = BitsPerSec::from_bps(static_cast<uint64_t>(rate));
  cfg.base_rtt = Duration::from_seconds(rtt);
  cfg.cc = cc;
  cfg.cc_params = params;
  TimePoint now = clock.now();
  transport::Connection conn(cfg, clock, now);
  transport::Driver driver(conn, udp, 32,
                           std::getenv("CC_TRACE_STALE") != nullptr ? nullptr : &clock);
  std::vector<uint8_t> buf(1 << 20, 0x5a);
  const TimePoint end = now + Duration::from_seconds(seconds);
  const Duration every = Duration::from_seconds(every_ms / 1000);
  TimePoint next_print = now + every;
  uint64_t last_delivered = 0;
  std::vector<int64_t> late;
  late.reserve(100000);
  if (client) {
    fmt::print(
        "t_s,goodput_mbps,latest_rtt_ms,srtt_ms,min_rtt_ms,cwnd,in_flight,pacing_mbps,base_ms,"
        "queue_ms,target_ms,noise_ms,delivery_mbps,phase,wake_late_p50_us,wake_late_p99_us\n");
  }
  const TimePoint start = now;
  uint64_t idle_since_ns = 0;
  for (;;) {
    now = clock.now();
    if (client) {
      if (now >= end) break;
      while (conn.send_buffer_free() > 0) {
        const size_t n = std::min<size_t>(buf.size(), conn.send_buffer_free());
        if (conn.write(0, buf.data(), n, false, now) == 0) break;
      }
    } else {
      uint64_t id;
      bool fin;
      while (conn.next_readable(&id))
        while (conn.read(id, buf.data(), buf.size(), &fin, now) > 0) {
        }
      if (conn.peer_closed()) break;
      if (conn.stats().packets_received > 0) idle_since_ns = 0;
    }
    const TimePoint next = driver.poll(now);
    if (client && now >= next_print) {
      const auto& st = conn.stats();
      const double secs = every.seconds();
      std::sort(late.begin(), late.end());
      const auto pct = [&](double q) {
        return late.empty()
                   ? 0.0
                   : static_cast<double>(
                         late[static_cast<size_t>(q * static_cast<double>(late.size() - 1))]) /
                         1e3;
      };
      double base = 0, queue = 0, target = 0, noise = 0, dlv = 0;
      int phase = -1;
      if (const auto* r = dynamic_cast<const cc::Rowan*>(&conn.cc())) {
        base = r->min_rtt().seconds() * 1e3;
        queue = r->queue_delay().seconds() * 1e3;
        target = r->target().seconds() * 1e3;
        noise = r->delay_noise().seconds() * 1e3;
        dlv = static_cast<double>(r->bw().bps()) / 1e6;
        phase = static_cast<int>(r->phase());
      }
      fmt::print(
          "{:.3f},{:.2f},{:.3f},{:.3f},{:.3f},{},{},{:.2f},{:.3f},{:.3f},{:.3f},{:.3f},{:.2f},{},"
          "{:.0f},{:.0f}\n",
          (now - start).seconds(),
          static_cast<double>(st.delivered_bytes - last_delivered) * 8 / secs / 1e6,
          st.latest_rtt.seconds() * 1e3, st.srtt.seconds() * 1e3, st.min_rtt.seconds() * 1e3,
          st.cwnd, st.bytes_in_flight, static_cast<double>(st.pacing_rate.bps()) / 1e6, base, queue,
          target, noise, dlv, phase, pct(0.5), pct(0.99));
      last_delivered = st.delivered_bytes;
      late.clear();
      next_print = next_print + every;
    }
    TimePoint wake = std::min(next, now + Duration::from_ms(100));
    if (client) wake = std::min(wake, next_print);
    if (wake > now) {
      udp.wait(wake - now);
      const TimePoint woke = clock.now();
      if (woke > wake && late.size() < late.capacity()) late.push_back((woke - wake).ns());
    }
    if (!client && conn.stats().packets_received == 0 && ++idle_since_ns > 2000000) break;
  }
  if (client) {
    conn.close(0, clock.now());
    driver.poll(clock.now());
    const auto& st = conn.stats();
    fmt::print(stderr, "done: delivered {:.1f} Mbit/s, retx {}, rtos {}, ptos {}\n",
               static_cast<double>(st.delivered_bytes) * 8 / seconds / 1e6,
               st.retransmitted_packets, st.rtos, st.ptos);
  }
  return 0;
}
