// Transport behaviour on a FakeClock over an impaired loopback link.
#include <gtest/gtest.h>

#include <cstdio>
#include <set>

#include "harness.h"

namespace rowan::test {
namespace {

using transport::TransportConfig;

// Bulk transfer of `total` bytes on `streams` streams from a to b; returns true
// when every byte arrived intact and in order with FIN.
struct Transfer {
  Pair& p;
  std::vector<Writer> writers;
  Reader reader;
  Transfer(Pair& pair, uint64_t total, int streams = 1) : p(pair), reader{pair.b} {
    for (int s = 0; s < streams; ++s)
      writers.push_back(Writer{p.a, static_cast<uint64_t>(s), total});
    p.on_step = [this] {
      for (auto& w : writers) w.pump(p.clock.now());
      reader.pump(p.clock.now());
    };
  }
  bool done() const {
    for (const auto& w : writers)
      if (!reader.fin[w.stream] || reader.got[w.stream] != w.total) return false;
    return true;
  }
  bool run(Duration limit) {
    const bool ok = p.run_until([this] { return done(); }, limit);
    if (!ok) dump();
    return ok;
  }
  void dump() {
    const auto& a = p.a.stats();
    const auto& b = p.b.stats();
    std::printf(
        "t=%.3fs stuck=%d a: sent=%lu inflight=%lu lost=%lu retx=%lu ptos=%lu rtos=%lu unacked=%lu "
        "streamsent=%lu next_to=%ld | b: rcv=%lu got=%lu fin=%d drops mal=%lu dup=%lu fc=%lu "
        "nobuf=%lu\n",
        p.clock.now().ns() * 1e-9, p.stuck_, a.packets_sent, a.bytes_in_flight, a.lost_packets,
        a.retransmitted_packets, a.ptos, a.rtos, p.a.unacked_bytes(), a.stream_bytes_sent,
        p.a.next_timeout().ns(), b.packets_received, reader.got[0], static_cast<int>(reader.fin[0]),
        b.drop_malformed, b.drop_duplicate, b.drop_flow_control, b.drop_no_buffer);
    std::printf(
        "link0 sent=%lu deliv=%lu drop=%lu inflight=%zu nextrx_b=%ld link1 sent=%lu deliv=%lu "
        "a.acks_rcv=%lu b.acks_sent=%lu\n",
        p.link.channel_stats(0).sent, p.link.channel_stats(0).delivered,
        p.link.channel_stats(0).dropped, p.link.in_flight(0), p.link.b().next_rx_time().ns(),
        p.link.channel_stats(1).sent, p.link.channel_stats(1).delivered, a.acks_received,
        b.acks_sent);
  }
};

TEST(Connection, TransfersInOrderWithoutImpairment) {
  Pair p(test_config());
  Transfer t(p, 2'000'000);
  ASSERT_TRUE(t.run(Duration::from_s(10)));
  EXPECT_EQ(t.reader.bad, 0U);
  const auto& s = p.a.stats();
  EXPECT_EQ(s.lost_packets, 0U);
  EXPECT_EQ(s.retransmitted_packets, 0U);
  EXPECT_EQ(s.rtos, 0U);
  EXPECT_EQ(p.b.stats().stream_bytes_received, 2'000'000U);
  EXPECT_EQ(p.a.unacked_bytes(), 0U);
}

TEST(Connection, RepairsRandomLossWithSelectiveRepeat) {
  Pair p(test_config(), Duration::from_ms(10), 7);
  io::Impairment imp;
  imp.delay = Duration::from_ms(10);
  imp.loss = 0.05;
  p.link.set_impairment(0, imp);
  p.link.set_impairment(1, imp);
  Transfer t(p, 3'000'000);
  ASSERT_TRUE(t.run(Duration::from_s(60)));
  EXPECT_EQ(t.reader.bad, 0U);
  const auto& s = p.a.stats();
  EXPECT_GT(s.lost_packets, 0U);
  EXPECT_GT(s.retransmitted_packets, 0U);
  // Selective repeat: only lost data is resent (plus probes), not whole windows.
  EXPECT_LT(s.retransmitted_bytes, 3'000'000U / 5);
  EXPECT_GT(p.link.channel_stats(0).dropped, 0U);
}

// A StreamSink takes in-order data straight out of received datagrams: a
// varying prefix of each frame (all of it, part, or nothing), so the rest
// goes through the stream's buffer and read(). Through loss and reordering
// on three streams, the bytes the sink took and the bytes read() returned
// make up each stream exactly, in order.
TEST(Connection, AStreamSinkTakesInOrderDataWhereItLiesAndReadGetsTheRest) {
  struct Sink final : transport::StreamSink {
    Reader* reader = nullptr;
    uint64_t calls = 0, taken = 0;
    size_t on_stream_data(uint64_t id, const uint8_t* data, size_t len) noexcept override {
      ++calls;
      size_t take = len;
      if (calls % 5 == 0) take = 0;
      if (calls % 7 == 0) take = len / 3;
      for (size_t i = 0; i < take; ++i)
        if (data[i] != pattern(id, reader->got[id] + i)) ++reader->bad;
      reader->got[id] += take;
      taken += take;
      return take;
    }
  };
  Pair p(test_config(), Duration::from_ms(10), 11);
  io::Impairment imp;
  imp.delay = Duration::from_ms(10);
  imp.loss = 0.03;
  imp.reorder = 0.05;
  imp.reorder_extra = Duration::from_us(300);
  p.link.set_impairment(0, imp);
  p.link.set_impairment(1, imp);
  Transfer t(p, 1'000'000, 3);
  Sink sink;
  sink.reader = &t.reader;
  p.b.set_stream_sink(&sink);
  ASSERT_TRUE(t.run(Duration::from_s(60)));
  EXPECT_EQ(t.reader.bad, 0U);
  const auto& s = p.b.stats();
  EXPECT_EQ(s.stream_bytes_read, 3'000'000U);
  EXPECT_EQ(s.stream_bytes_read_in_place, sink.taken);
  EXPECT_GT(sink.taken, 100'000U);    // some went straight from the datagram
  EXPECT_LT(sink.taken, 3'000'000U);  // and some through the stream's buffer
  EXPECT_GT(p.a.stats().lost_packets, 0U);
  EXPECT_GT(p.link.channel_stats(0).reordered, 0U);
}

TEST(Connection, ToleratesReordering) {
  Pair p(test_config(), Duration::from_ms(10), 3);
  io::Impairment imp;
  imp.delay = Duration::from_ms(10);
  imp.reorder = 0.1;
  imp.reorder_extra = Duration::from_us(300);
  p.link.set_impairment(0, imp);
  Transfer t(p, 2'000'000);
  ASSERT_TRUE(t.run(Duration::from_s(20)));
  EXPECT_EQ(t.reader.bad, 0U);
  EXPECT_GT(p.link.channel_stats(0).reordered, 0U);
  // Every spurious loss declared was recognised as such when its ACK came.
  EXPECT_EQ(p.a.stats().rtos, 0U);
}

TEST(Connection, DropsDuplicates) {
  Pair p(test_config(), Duration::from_ms(5), 4);
  io::Impairment imp;
  imp.delay = Duration::from_ms(5);
  imp.duplicate = 0.2;
  p.link.set_impairment(0, imp);
  p.link.set_impairment(1, imp);
  Transfer t(p, 1'000'000);
  ASSERT_TRUE(t.run(Duration::from_s(20)));
  EXPECT_EQ(t.reader.bad, 0U);
  EXPECT_EQ(p.b.stats().stream_bytes_received, 1'000'000U);
  EXPECT_GT(p.b.stats().drop_duplicate, 0U);
  EXPECT_GT(p.a.stats().drop_duplicate, 0U);  // duplicated ACK packets too
}

TEST(Connection, DropsCorruptedDatagramsAndRecovers) {
  Pair p(test_config(), Duration::from_ms(5), 5);
  io::Impairment imp;
  imp.delay = Duration::from_ms(5);
  imp.corrupt = 0.05;
  p.link.set_impairment(0, imp);
  p.link.set_impairment(1, imp);
  Transfer t(p, 1'000'000);
  ASSERT_TRUE(t.run(Duration::from_s(30)));
  EXPECT_EQ(t.reader.bad, 0U);
  const uint64_t dropped = p.b.stats().drop_bad_integrity + p.b.stats().drop_malformed +
                           p.b.stats().drop_bad_version + p.b.stats().drop_bad_connection_id;
  EXPECT_GT(dropped, 0U);
  EXPECT_GT(p.a.stats().retransmitted_packets, 0U);
}

TEST(Connection, RtoFiresDuringBlackholeAndTransferResumes) {
  Pair p(test_config(), Duration::from_ms(10));
  Transfer t(p, 4'000'000);
  // Let it start, then black-hole both directions for 2 s.
  p.run_until([&] { return p.b.stats().stream_bytes_received > 500'000; }, Duration::from_s(5));
  io::Impairment dead;
  dead.delay = Duration::from_ms(10);
  dead.loss = 1.0;
  p.link.set_impairment(0, dead);
  p.link.set_impairment(1, dead);
  p.run_until([] { return false; }, Duration::from_s(2));
  EXPECT_GE(p.a.stats().rtos, 1U);
  io::Impairment ok;
  ok.delay = Duration::from_ms(10);
  p.link.set_impairment(0, ok);
  p.link.set_impairment(1, ok);
  ASSERT_TRUE(t.run(Duration::from_s(30)));
  EXPECT_EQ(t.reader.bad, 0U);
}

// A 20 s outage (a WAN flap): without a cap the backed-off probe timeout
// leaves the healed path unused for many seconds (here the 9th RTO falls
// 31 s after the cut, 11 s after healing); with max_pto = 1 s the
// first probe after the outage goes out within about a second and the
// transfer resumes. Returns the time from healing to the next byte delivered.
Duration resume_after_outage(Duration max_pto, uint64_t* rtos) {
  TransportConfig c = test_config();
  c.max_pto = max_pto;
  Pair p(c, Duration::from_ms(10));
  Transfer t(p, 8'000'000);
  p.run_until([&] { return p.b.stats().stream_bytes_received > 500'000; }, Duration::from_s(5));
  io::Impairment dead;
  dead.delay = Duration::from_ms(10);
  dead.loss = 1.0;
  p.link.set_impairment(0, dead);
  p.link.set_impairment(1, dead);
  p.run_until([] { return false; }, Duration::from_s(20));
  *rtos = p.a.stats().rtos;
  const uint64_t before = p.b.stats().stream_bytes_received;
  io::Impairment ok;
  ok.delay = Duration::from_ms(10);
  p.link.set_impairment(0, ok);
  p.link.set_impairment(1, ok);
  const TimePoint healed = p.clock.now();
  EXPECT_TRUE(p.run_until([&] { return p.b.stats().stream_bytes_received > before; },
                          Duration::from_s(120)));
  const Duration gap = p.clock.now() - healed;
  EXPECT_TRUE(t.run(Duration::from_s(120)));
  EXPECT_EQ(t.reader.bad, 0U);
  return gap;
}

TEST(Connection, CappedProbeTimeoutResumesRightAfterALongOutage) {
  uint64_t rtos_capped = 0, rtos_uncapped = 0;
  const Duration capped = resume_after_outage(Duration::from_s(1), &rtos_capped);
  const Duration uncapped = resume_after_outage(Duration::zero(), &rtos_uncapped);
  std::printf(
      "resume after a 20 s outage: capped %.3f s (%llu RTOs), uncapped %.3f s (%llu RTOs)\n",
      capped.seconds(), static_cast<unsigned long long>(rtos_capped), uncapped.seconds(),
      static_cast<unsigned long long>(rtos_uncapped));
  EXPECT_LE(capped, Duration::from_ms(1100));
  EXPECT_GT(uncapped, Duration::from_s(5)) << "the cap made no difference: test is moot";
  // About one probe a second during the outage, not a flood.
  EXPECT_GE(rtos_capped, 15U);
  EXPECT_LE(rtos_capped, 30U);
  EXPECT_LT(rtos_uncapped, rtos_capped);
}

// Passes every STREAM frame of a datagram to `on` (the other frames are
// accepted and skipped).
template <typename F>
void for_each_stream_frame(const uint8_t* d, uint32_t len, F on) {
  struct V {
    F& on;
    transport::wire::AckFrame scratch;
    bool on_ping() { return true; }
    transport::wire::AckFrame& ack_scratch() { return scratch; }
    bool on_ack(const transport::wire::AckFrame&) { return true; }
    bool on_stream(const transport::wire::StreamFrame& f) {
      on(f);
      return true;
    }
    bool on_max_data(uint64_t) { return true; }
    bool on_max_stream_data(uint64_t, uint64_t) { return true; }
    bool on_data_blocked(uint64_t) { return true; }
    bool on_close(uint16_t) { return true; }
  } v{on, {}};
  if (len >= transport::wire::kHeaderSize) {
    transport::wire::parse_frames(d + transport::wire::kHeaderSize,
                                  transport::wire::frames_length(d, len), false, v);
  }
}

// Which stream ids a datagram from a to b carries data for.
std::set<uint64_t> streams_in(const uint8_t* d, uint32_t len) {
  std::set<uint64_t> out;
  for_each_stream_frame(d, len, [&](const transport::wire::StreamFrame& f) {
    if (f.length > 0) out.insert(f.stream_id);
  });
  return out;
}

// Under an AEAD (no CRC) a full datagram is its 20-byte header, a STREAM
// header of 5 bytes for a small stream near its start, and data; with the
// CRC, 4 bytes less data.
TEST(Connection, AFullDatagramCarriesAllButItsHeaders) {
  for (const bool crc : {false, true}) {
    FakeClock clock;
    transport::TransportConfig c = test_config();
    c.integrity_check = crc;
    transport::Connection a(c, clock, clock.now());
    const std::vector<uint8_t> data(4000, 0x5a);
    ASSERT_EQ(a.write(3, data.data(), data.size(), false, clock.now()), data.size());
    std::vector<uint8_t> buf(c.max_datagram);
    transport::OutDatagram od{buf.data(), c.max_datagram, 0, 0, {}};
    ASSERT_EQ(a.poll_send(std::span(&od, 1), clock.now()), 1U);
    EXPECT_EQ(od.len, c.max_datagram);
    uint32_t bytes = 0;
    for_each_stream_frame(buf.data(), od.len,
                          [&](const transport::wire::StreamFrame& f) { bytes += f.length; });
    EXPECT_EQ(bytes, c.max_datagram - 20 - 5 - (crc ? 4 : 0)) << crc;
  }
}

TEST(Connection, TailLossIsRepairedByProbeNotRto) {
  Pair p(test_config(), Duration::from_ms(25));
  // Drop the last data packet of a short transfer: nothing after it can
  // trigger ACK-based loss detection, only the probe timeout.
  constexpr uint64_t kTotal = uint64_t{20} * 1400;
  p.link.set_filter(0, [](const uint8_t* d, uint32_t len, uint64_t) {
    bool fin = false;
    for_each_stream_frame(d, len,
                          [&](const transport::wire::StreamFrame& f) { fin = fin || f.fin; });
    static bool dropped = false;
    if (fin && !dropped) {
      dropped = true;
      return io::Verdict::kDrop;
    }
    return io::Verdict::kPass;
  });
  Transfer t(p, kTotal);
  const TimePoint start = p.clock.now();
  ASSERT_TRUE(t.run(Duration::from_s(5)));
  EXPECT_EQ(t.reader.bad, 0U);
  EXPECT_GE(p.a.stats().ptos, 1U);
  EXPECT_EQ(p.a.stats().rtos, 0U);
  // One RTT for the data, one PTO (about an RTT plus slack), one RTT for the probe.
  EXPECT_LT(p.clock.now() - start, Duration::from_ms(250));
}

TEST(Connection, NoSpuriousTimeoutsOnAStableLongRtt) {
  TransportConfig c = test_config(Bytes{256} * 1472, 50'000'000);
  c.base_rtt = Duration::from_ms(200);
  c.link_rate = BitsPerSec::from_mbps(50);
  Pair p(c, Duration::from_ms(100));
  Transfer t(p, 30'000'000);
  ASSERT_TRUE(t.run(Duration::from_s(60)));
  const auto& s = p.a.stats();
  EXPECT_EQ(s.rtos, 0U);
  EXPECT_EQ(s.ptos, 0U);
  EXPECT_EQ(s.spurious_losses, 0U);
  EXPECT_EQ(s.lost_packets, 0U);
  EXPECT_GE(s.srtt, Duration::from_ms(200));
  EXPECT_LE(s.srtt, Duration::from_ms(203));
}

// Windows sized from a hinted BDP that is short of
// what the CC could keep in flight grow, by doubling, to window_growth ×
// their size: the send buffer when everything written is in flight, the
// receive window when the peer reports DATA_BLOCKED while the reader keeps
// up. A connection with window_growth 1 keeps them and moves at a window
// per round trip.
TEST(Connection, WindowsGrowWhenTheyAndNotTheCcLimitTheFlight) {
  auto transfer = [](double growth, transport::ConnStats* sa, transport::ConnStats* sb) {
    TransportConfig c = test_config(8 << 20);
    c.min_buffer = 64 << 10;  // windows 2 × 250 kB (100 Mbit/s × 20 ms)
    c.window_growth = growth;
    Pair p(c, Duration::from_ms(10));
    Writer w{p.a, 0, 40'000'000};
    Reader r{p.b};
    p.on_step = [&] {
      w.pump(p.clock.now());
      r.pump(p.clock.now());
    };
    const TimePoint t0 = p.clock.now();
    EXPECT_TRUE(p.run_until([&] { return r.fin[0]; }, Duration::from_s(60)));
    EXPECT_EQ(r.got[0], 40'000'000U);
    EXPECT_EQ(r.bad, 0U);
    *sa = p.a.stats();
    *sb = p.b.stats();
    return p.clock.now() - t0;
  };
  transport::ConnStats fa, fb, ga, gb;
  const Duration fixed = transfer(1.0, &fa, &fb);
  const Duration grown = transfer(4.0, &ga, &gb);
  EXPECT_EQ(fa.send_window_growths, 0U);
  EXPECT_EQ(fb.recv_window_growths, 0U);
  EXPECT_GE(ga.send_window_growths, 1U);
  EXPECT_GE(gb.recv_window_growths, 1U);
  EXPECT_LE(ga.send_buffer_capacity, 4 * fa.send_buffer_capacity);
  EXPECT_LE(gb.recv_buffer_capacity, 4 * fb.recv_buffer_capacity);
  // Twice the window per round trip or more: well under half the time.
  EXPECT_LT(grown.seconds(), fixed.seconds() / 2);
}

TEST(Connection, AStreamOpenedAfterTheWindowGrewIsNotStuckAtTheInitialCredit) {
  // The receiver's window grows under a bulk stream; a stream opened after
  // that starts, at both ends, from the initial window (the one both ends
  // know), and MAX_STREAM_DATA raises it. Advertising the grown window
  // silently deadlocked: the sender stopped at the initial credit, and the
  // receiver waited for its reader to pass a quarter of the grown one.
  TransportConfig c = test_config(8 << 20);
  c.min_buffer = 64 << 10;  // windows 2 × 250 kB (100 Mbit/s × 20 ms)
  Pair p(c, Duration::from_ms(10));
  io::Impairment lossy;  // holes under repair hold data back: the window grows
  lossy.delay = Duration::from_ms(10);
  lossy.loss = 0.01;
  p.link.set_impairment(0, lossy);
  Writer bulk{p.a, 0, 40'000'000};
  Writer later{p.a, 1, 8'000'000};
  Reader r{p.b};
  p.on_step = [&] {
    bulk.pump(p.clock.now());
    if (r.fin[0]) later.pump(p.clock.now());
    r.pump(p.clock.now());
  };
  ASSERT_TRUE(p.run_until([&] { return r.fin[0]; }, Duration::from_s(60)));
  ASSERT_GE(p.b.stats().recv_window_growths, 2U);  // grown to 4x
  EXPECT_TRUE(p.run_until([&] { return r.fin[1]; }, Duration::from_s(30)));
  EXPECT_EQ(r.got[1], 8'000'000U);
  EXPECT_EQ(r.bad, 0U);
  EXPECT_EQ(p.b.stats().drop_flow_control, 0U);
}

TEST(Connection, SlowReceiverBoundsSenderMemory) {
  TransportConfig c = test_config(1'000'000);
  Pair p(c, Duration::from_ms(10));
  const Bytes bdp = p.a.bdp();
  // The application offers 100 MB but the receiver never reads.
  Writer w{p.a, 0, 100'000'000};
  p.on_step = [&] { w.pump(p.clock.now()); };
  p.run_until([] { return false; }, Duration::from_s(5));
  w.pump(p.clock.now());
  const auto& sa = p.a.stats();
  const auto& sb = p.b.stats();
  // Sender: write() stops once the send buffer (a fixed multiple of BDP)
  // holds unacked data; what left it sits in the receiver's window.
  const auto send_cap = static_cast<uint64_t>(c.send_buffer_bdp * static_cast<double>(bdp));
  const auto recv_cap = static_cast<uint64_t>(c.recv_window_bdp * static_cast<double>(bdp));
  EXPECT_LE(p.a.unacked_bytes(), send_cap);
  EXPECT_GE(p.a.unacked_bytes(), send_cap - 65536);  // it did fill up
  EXPECT_LE(w.written, send_cap + recv_cap);
  EXPECT_LE(sa.send_buffer_used, sa.send_buffer_capacity);
  EXPECT_LE(sa.send_buffer_capacity, send_cap + uint64_t{2} * c.max_streams * c.chunk_size);
  // Receiver: buffered bytes bounded by its window; nothing dropped for lack of room.
  EXPECT_LE(sb.stream_bytes_received, recv_cap);
  EXPECT_GE(sb.stream_bytes_received, recv_cap - 65536);
  EXPECT_LE(sb.recv_buffer_used, sb.recv_buffer_capacity);
  EXPECT_EQ(sb.drop_flow_control, 0U);
  EXPECT_EQ(sb.drop_no_buffer, 0U);
  // The sender is blocked, not retransmitting or timing out.
  EXPECT_EQ(sa.rtos, 0U);
  const uint64_t sent_before = sa.stream_bytes_sent;
  p.run_until([] { return false; }, Duration::from_s(2));
  EXPECT_EQ(p.a.stats().stream_bytes_sent, sent_before);
  // Once the receiver reads, the rest flows.
  Reader r{p.b};
  p.on_step = [&] {
    w.pump(p.clock.now());
    r.pump(p.clock.now());
  };
  ASSERT_TRUE(p.run_until([&] { return r.fin[0]; }, Duration::from_s(60)));
  EXPECT_EQ(r.got[0], 100'000'000U);
  EXPECT_EQ(r.bad, 0U);
}

TEST(Connection, LossOnOneStreamDoesNotBlockAnother) {
  Pair p(test_config(), Duration::from_ms(25));
  // Drop the first datagram carrying stream 1's data; stream 2 must still be
  // delivered while stream 1 waits for its retransmission.
  bool dropped = false;
  p.link.set_filter(0, [&](const uint8_t* d, uint32_t len, uint64_t) {
    if (!dropped && streams_in(d, len).count(1) > 0) {
      dropped = true;
      return io::Verdict::kDrop;
    }
    return io::Verdict::kPass;
  });
  std::vector<uint8_t> data(20'000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = pattern(1, i);
  ASSERT_EQ(p.a.write(1, data.data(), data.size(), true, p.clock.now()), data.size());
  for (size_t i = 0; i < data.size(); ++i) data[i] = pattern(2, i);
  ASSERT_EQ(p.a.write(2, data.data(), data.size(), true, p.clock.now()), data.size());
  ASSERT_TRUE(p.run_until([&] { return p.b.readable(2) == data.size(); }, Duration::from_s(1)));
  EXPECT_TRUE(dropped);
  EXPECT_EQ(p.b.readable(1), 0U);  // stream 1 is missing its first bytes
  Reader r{p.b};
  p.on_step = [&] { r.pump(p.clock.now()); };
  ASSERT_TRUE(p.run_until([&] { return r.fin[1] && r.fin[2]; }, Duration::from_s(5)));
  EXPECT_EQ(r.got[1], data.size());
  EXPECT_EQ(r.got[2], data.size());
  EXPECT_EQ(r.bad, 0U);
}

TEST(Connection, PacketNumbersAreNeverReused) {
  Pair p(test_config(), Duration::from_ms(5), 11);
  io::Impairment imp;
  imp.delay = Duration::from_ms(5);
  imp.loss = 0.05;
  p.link.set_impairment(0, imp);
  std::vector<uint64_t> pns;
  p.link.set_filter(0, [&](const uint8_t* d, uint32_t len, uint64_t) {
    transport::wire::Header h;
    if (transport::wire::read_header(d, len, &h)) pns.push_back(h.packet_number);
    return io::Verdict::kPass;
  });
  Transfer t(p, 2'000'000);
  ASSERT_TRUE(t.run(Duration::from_s(30)));
  ASSERT_GT(p.a.stats().retransmitted_packets, 0U);
  ASSERT_FALSE(pns.empty());
  for (size_t i = 1; i < pns.size(); ++i) ASSERT_GT(pns[i], pns[i - 1]) << "at " << i;
}

TEST(Connection, RttSamplesMatchThePath) {
  TransportConfig c = test_config(Bytes{32} * 1472, 20'000'000);
  Pair p(c, Duration::from_ms(20));
  Transfer t(p, 2'000'000);
  ASSERT_TRUE(t.run(Duration::from_s(10)));
  const auto& s = p.a.stats();
  // Propagation RTT is 40 ms; ack delay (≤ 1 ms) is removed from samples.
  EXPECT_GE(s.min_rtt, Duration::from_ms(40));
  EXPECT_LE(s.min_rtt, Duration::from_us(40'100));
  EXPECT_GE(s.srtt, Duration::from_ms(40));
  EXPECT_LE(s.srtt, Duration::from_ms(41));
  const auto& fc = dynamic_cast<const FixedCc&>(p.a.cc());
  ASSERT_FALSE(fc.rtts.empty());
  for (Duration r : fc.rtts) {
    EXPECT_GE(r, Duration::from_ms(40));
    EXPECT_LE(r, Duration::from_ms(41));
  }
}

TEST(Connection, DeliveryRateSamplesMatchThePacingRate) {
  // Paced at 50 Mbit/s with a window well above the BDP: samples ≈ 50 Mbit/s.
  TransportConfig c = test_config(1'000'000, 50'000'000);
  Pair p(c, Duration::from_ms(10));
  Transfer t(p, 5'000'000);
  ASSERT_TRUE(t.run(Duration::from_s(10)));
  const auto& fc = dynamic_cast<const FixedCc&>(p.a.cc());
  ASSERT_GT(fc.rates.size(), 50U);
  std::vector<BitsPerSec> r = fc.rates;
  std::sort(r.begin(), r.end());
  const double median = r[r.size() / 2].gbps() * 1000;
  EXPECT_NEAR(median, 50.0, 3.0);
  // Round counting: the transfer lasts ~0.8 s of 20 ms rounds.
  EXPECT_GE(fc.round_starts, 20U);
  EXPECT_LE(fc.round_starts, 60U);
}

TEST(Connection, ManyStreamsAllComplete) {
  Pair p(test_config(), Duration::from_ms(5), 9);
  io::Impairment imp;
  imp.delay = Duration::from_ms(5);
  imp.loss = 0.02;
  p.link.set_impairment(0, imp);
  Transfer t(p, 200'000, 16);
  ASSERT_TRUE(t.run(Duration::from_s(30)));
  EXPECT_EQ(t.reader.bad, 0U);
}

TEST(Connection, DriverRetriesPartialSendBursts) {
  // The link holds only 8 datagrams per direction: most send bursts are
  // partial, and the driver must keep and resend the refused datagrams.
  Pair p(test_config(), test_config(), Duration::from_ms(1), 1, 8);
  Transfer t(p, 300'000);
  ASSERT_TRUE(t.run(Duration::from_s(10)));
  EXPECT_EQ(t.reader.bad, 0U);
  EXPECT_GT(p.link.a().stats().tx_full, 0U);
  EXPECT_EQ(p.a.stats().lost_packets, 0U);  // refused datagrams were held, not lost
}

TEST(Connection, CloseReachesThePeer) {
  Pair p(test_config());
  p.a.close(7, p.clock.now());
  ASSERT_TRUE(p.run_until([&] { return p.b.peer_closed(); }, Duration::from_s(1)));
  EXPECT_TRUE(p.b.closed());
}

// The congestion controller's RTT sample excludes the whole ACK delay the
// peer reports when the peer's ACK timer fired late (a busy event loop), not
// just max_ack_delay of it: before, a sample kept the lateness, and rowan
// read it as queue.
TEST(Connection, RttSampleExcludesALatePeersWholeAckDelay) {
  TransportConfig c = test_config();
  Pair p(c, Duration::from_ms(10));
  const std::vector<uint8_t> data(2000, 0);
  // Two packets: acked at once (ack_every 2), so min RTT is the path's.
  // One packet: acked on b's 1 ms timer, which fires 3 ms late.
  for (const size_t len : {data.size(), size_t{100}}) {
    const TimePoint t0 = p.clock.now();
    ASSERT_EQ(p.a.write(1, data.data(), len, false, t0), len);
    p.da.poll(t0);
    const Duration late = len > 1000 ? Duration::zero() : Duration::from_ms(4);
    p.clock.set(t0 + Duration::from_ms(10));
    p.db.poll(p.clock.now());
    p.clock.set(t0 + Duration::from_ms(10) + late);
    p.db.poll(p.clock.now());
    p.clock.set(t0 + Duration::from_ms(20) + late);
    p.da.poll(p.clock.now());
    const auto& cc = dynamic_cast<const FixedCc&>(p.a.cc());
    ASSERT_FALSE(cc.rtts.empty());
    EXPECT_EQ(cc.rtts.back(), Duration::from_ms(20)) << len;
    p.clock.set(p.clock.now() + Duration::from_ms(50));
    p.da.poll(p.clock.now());
    p.db.poll(p.clock.now());
  }
}

}  // namespace
}  // namespace rowan::test

namespace rowan::test {
namespace {

// A write of a head and a body (rowand's record header, then the packet
// straight from its mbuf) puts exactly their concatenation on the stream,
// also when the send buffer takes only part of it.
TEST(Connection, TwoPartWriteIsTheConcatenationEvenWhenCut) {
  Pair p(test_config());
  std::vector<uint8_t> expect;
  std::vector<uint8_t> body(1000);
  size_t accepted = 0;
  for (uint32_t i = 0;; ++i) {
    const uint8_t head[3] = {static_cast<uint8_t>(i), static_cast<uint8_t>(i >> 8), 0xA5};
    for (size_t k = 0; k < body.size(); ++k) body[k] = pattern(i, k);
    const size_t n =
        p.a.write(0, head, sizeof head, body.data(), body.size(), false, p.clock.now());
    expect.insert(expect.end(), head, head + sizeof head);
    expect.insert(expect.end(), body.begin(), body.end());
    accepted += n;
    if (n < sizeof head + body.size()) break;  // the buffer is full: cut here
    ASSERT_LT(i, 100000U);
  }
  ASSERT_GT(accepted, 0U);
  expect.resize(accepted);
  std::vector<uint8_t> got;
  std::vector<uint8_t> buf(65536);
  p.on_step = [&] {
    const size_t n = p.b.read(0, buf.data(), buf.size(), nullptr, p.clock.now());
    got.insert(got.end(), buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(n));
  };
  ASSERT_TRUE(p.run_until([&] { return got.size() >= accepted; }, Duration::from_s(20)));
  EXPECT_EQ(got, expect);
}

}  // namespace
}  // namespace rowan::test
