// Building blocks: interval set, chunk pool, pacer, RTT estimator, wire codec.
#include <gtest/gtest.h>

#include "transport/chunk_buffer.h"
#include "transport/interval_set.h"
#include "transport/pacer.h"
#include "transport/rtt_estimator.h"
#include "transport/wire.h"

namespace rowan::transport {
namespace {

TEST(IntervalSet, AddMergesAndRemoveSplits) {
  IntervalSet s;
  s.add(10, 20);
  s.add(30, 40);
  s.add(20, 30);  // bridges
  ASSERT_EQ(s.range_count(), 1U);
  EXPECT_EQ(s.front().lo, 10U);
  EXPECT_EQ(s.front().hi, 40U);
  s.remove(15, 25);
  ASSERT_EQ(s.range_count(), 2U);
  EXPECT_TRUE(s.contains(14));
  EXPECT_FALSE(s.contains(15));
  EXPECT_TRUE(s.contains(25));
  s.add(0, 5);
  s.add(50, 60);
  s.add(3, 12);
  EXPECT_EQ(s.front().lo, 0U);
  EXPECT_EQ(s.front().hi, 15U);
  EXPECT_TRUE(s.covers(26, 40));
  EXPECT_FALSE(s.covers(26, 41));
  s.remove_below(30);
  EXPECT_EQ(s.front().lo, 30U);
  EXPECT_EQ(s.first_at_or_after(45), 1U);
}

TEST(ChunkPool, RingAllocatesOnlyWhatItCoversAndReleases) {
  ChunkPool pool(1024, 8, true);
  ChunkRing ring;
  EXPECT_EQ(ring.ensure(pool, 0, 3000), 3000U);
  EXPECT_EQ(pool.available(), 5U);
  std::vector<uint8_t> in(3000), out(3000);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<uint8_t>(i * 7);
  ring.write(pool, 0, in.data(), in.size());
  ring.read(pool, 0, out.data(), out.size());
  EXPECT_EQ(in, out);
  ring.release_below(pool, 2048);
  EXPECT_EQ(pool.available(), 7U);
  // A sparse write far ahead takes only the chunks it touches.
  EXPECT_EQ(ring.ensure(pool, 6000, 6100), 6100U);
  EXPECT_EQ(pool.available(), 6U);
  // The pool is the bound: asking for more stops at what it holds.
  EXPECT_LT(ring.ensure(pool, 3000, 100000), 100000U);
  EXPECT_EQ(pool.available(), 0U);
  ring.release_all(pool);
  EXPECT_EQ(pool.available(), 8U);
}

TEST(Pacer, BurstsAreBoundedByTheQuantumAndRateIsHeld) {
  Pacer p;
  const BitsPerSec rate = BitsPerSec::from_gbps(1);
  const Bytes mss = 1500, quantum = Bytes{3} * 1500;
  TimePoint now = TimePoint::from_ns(1'000'000'000);
  // After idle: at most quantum bytes leave back to back.
  int burst = 0;
  while (p.ready(now)) {
    p.on_sent(now, mss, rate, quantum, mss);
    ++burst;
  }
  EXPECT_EQ(burst, 3);
  // Steady state: one packet per 12 µs at 1 Gbit/s, released on time (ns precision).
  EXPECT_EQ(p.release_time() - now, Duration::from_us(12));
  int sent = 0;
  const TimePoint end = now + Duration::from_ms(10);
  while (now < end) {
    now = std::max(now, p.release_time());
    p.on_sent(now, mss, rate, quantum, mss);
    ++sent;
  }
  EXPECT_NEAR(sent, 10'000'000.0 / 12'000, 2);
}

TEST(RttEstimator, FollowsRfc9002) {
  RttEstimator r(Duration::from_ms(100));
  EXPECT_EQ(r.smoothed(), Duration::from_ms(100));
  const TimePoint t = TimePoint::from_ns(1'000'000'000);
  r.on_sample(Duration::from_ms(50), Duration::zero(), t);
  EXPECT_EQ(r.smoothed(), Duration::from_ms(50));
  EXPECT_EQ(r.rttvar(), Duration::from_ms(25));
  EXPECT_EQ(r.min_rtt(), Duration::from_ms(50));
  // Ack delay is removed only while that keeps the sample above min_rtt.
  r.on_sample(Duration::from_ms(60), Duration::from_ms(10), t);
  EXPECT_EQ(r.smoothed(), Duration::from_ms(50));
  r.on_sample(Duration::from_ms(52), Duration::from_ms(10), t);
  EXPECT_EQ(r.smoothed(), Duration::from_us(50250));
}

TEST(Wire, AckFrameRoundTrip) {
  wire::AckFrame a;
  a.largest = 1000;
  a.ack_delay_us = 250;
  a.ce_count = 3;
  a.range_count = 3;
  a.ranges[0] = {990, 1000};
  a.ranges[1] = {900, 980};
  a.ranges[2] = {5, 5};
  std::vector<uint8_t> buf(wire::ack_frame_size(3));
  wire::FrameWriter w(buf.data(), buf.size());
  w.ack(a);
  ASSERT_EQ(w.size(), buf.size());
  struct V {
    wire::AckFrame scratch, got;
    bool on_ping() { return false; }
    wire::AckFrame& ack_scratch() { return scratch; }
    bool on_ack(const wire::AckFrame& f) {
      got = f;
      return true;
    }
    bool on_stream(const wire::StreamFrame&) { return false; }
    bool on_max_data(uint64_t) { return false; }
    bool on_max_stream_data(uint64_t, uint64_t) { return false; }
    bool on_close(uint16_t) { return false; }
  } v;
  ASSERT_TRUE(wire::parse_frames(buf.data(), buf.size(), false, v));
  EXPECT_EQ(v.got.largest, 1000U);
  EXPECT_EQ(v.got.ack_delay_us, 250U);
  EXPECT_EQ(v.got.ce_count, 3U);
  ASSERT_EQ(v.got.range_count, 3);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(v.got.ranges[i].lo, a.ranges[i].lo);
    EXPECT_EQ(v.got.ranges[i].hi, a.ranges[i].hi);
  }
  // Every truncation is rejected.
  for (size_t n = 1; n < buf.size(); ++n) EXPECT_FALSE(wire::parse_frames(buf.data(), n, false, v));
}

TEST(Wire, Crc32cKnownAnswer) {
  const char* s = "123456789";
  EXPECT_EQ(wire::crc32c(reinterpret_cast<const uint8_t*>(s), 9), 0xe3069283U);
}

}  // namespace
}  // namespace rowan::transport
