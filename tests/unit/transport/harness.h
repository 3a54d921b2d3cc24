// Two connections joined by a LoopbackLink, driven on a FakeClock.
#pragma once

#include <algorithm>
#include <cstring>
#include <functional>
#include <memory>
#include <vector>

#include "io/loopback.h"
#include "test_cc.h"
#include "tools/fake_clock.h"
#include "transport/connection.h"
#include "transport/driver.h"

namespace rowan::test {

inline transport::TransportConfig test_config(Bytes cwnd = Bytes{64} * 1472,
                                              uint64_t rate_bps = 0) {
  transport::TransportConfig c;
  c.connection_id = 0x1234;
  c.link_rate = BitsPerSec::from_mbps(100);
  c.base_rtt = Duration::from_ms(20);
  c.max_datagram = 1472;
  c.cc = "test-fixed";
  c.cc_params.set("cwnd", std::to_string(cwnd));
  if (rate_bps > 0) c.cc_params.set("rate", std::to_string(rate_bps));
  c.min_buffer = 1 << 20;
  return c;
}

/// Deterministic payload byte for (stream, offset).
inline uint8_t pattern(uint64_t stream, uint64_t off) {
  return static_cast<uint8_t>((off * 131 + stream * 17 + (off >> 8)) & 0xff);
}

struct Pair {
  explicit Pair(const transport::TransportConfig& ca, const transport::TransportConfig& cb,
                Duration one_way = Duration::from_ms(10), uint64_t seed = 1,
                uint32_t link_capacity = 65536)
      : link(2048, link_capacity, seed),
        a(ca, clock, clock.now()),
        b(cb, clock, clock.now()),
        da(a, link.a()),
        db(b, link.b()) {
    io::Impairment imp;
    imp.delay = one_way;
    link.set_impairment(0, imp);
    link.set_impairment(1, imp);
  }
  explicit Pair(const transport::TransportConfig& c, Duration one_way = Duration::from_ms(10),
                uint64_t seed = 1)
      : Pair(c, c, one_way, seed) {}

  /// Advances time event by event until `done()` or `limit` elapsed; returns done().
  bool run_until(const std::function<bool()>& done, Duration limit) {
    const TimePoint end = clock.now() + limit;
    while (!done()) {
      if (on_step) on_step();
      const TimePoint na = da.poll(clock.now());
      const TimePoint nb = db.poll(clock.now());
      if (done()) break;
      // b's sends may have made something arrive for a sooner than na.
      TimePoint next = std::min({na, nb, link.a().next_rx_time(), link.b().next_rx_time()});
      if (next > end) {
        // Nothing more happens before `end`: let on_step take what the
        // last polls delivered, then run out the clock.
        if (on_step) on_step();
        if (done()) return true;
        clock.set(end);
        da.poll(clock.now());
        db.poll(clock.now());
        if (on_step) on_step();
        return done();
      }
      if (next <= clock.now()) {
        if (++stuck_ > 100000) return false;  // no progress: a bug
        continue;
      }
      stuck_ = 0;
      clock.set(next);
    }
    return true;
  }

  FakeClock clock;
  io::LoopbackLink link;
  transport::Connection a;
  transport::Connection b;
  transport::Driver da;
  transport::Driver db;
  std::function<void()> on_step;
  int stuck_ = 0;
};

/// Writes `total` pattern bytes on `stream` of `conn` as space allows, then FIN.
struct Writer {
  transport::Connection& conn;
  uint64_t stream;
  uint64_t total;
  uint64_t written = 0;
  bool fin_done = false;
  uint64_t allowed = UINT64_MAX;  ///< the application has written no more than this yet
  std::vector<uint8_t> buf = std::vector<uint8_t>(65536);
  void pump(TimePoint now) {
    while (written < total && written < allowed) {
      const size_t n =
          static_cast<size_t>(std::min<uint64_t>(buf.size(), std::min(total, allowed) - written));
      for (size_t i = 0; i < n; ++i) buf[i] = pattern(stream, written + i);
      const size_t w = conn.write(stream, buf.data(), n, written + n == total, now);
      written += w;
      if (w < n) return;
    }
    fin_done = written == total;
  }
};

/// Reads every stream of `conn`, checking bytes against pattern().
struct Reader {
  transport::Connection& conn;
  std::vector<uint64_t> got = std::vector<uint64_t>(64, 0);
  std::vector<bool> fin = std::vector<bool>(64, false);
  uint64_t bad = 0;
  std::vector<uint8_t> buf = std::vector<uint8_t>(65536);
  void pump(TimePoint now) {
    uint64_t id;
    while (conn.next_readable(&id)) {
      for (;;) {
        bool f = false;
        const size_t n = conn.read(id, buf.data(), buf.size(), &f, now);
        for (size_t i = 0; i < n; ++i)
          if (buf[i] != pattern(id, got[id] + i)) ++bad;
        got[id] += n;
        if (f) fin[id] = true;
        if (n == 0) break;
      }
    }
  }
};

}  // namespace rowan::test
