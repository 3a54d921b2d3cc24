// The in-memory loopback really carries datagrams and impairs them as told.
#include <gtest/gtest.h>

#include <array>
#include <vector>

#include "io/loopback.h"

namespace rowan::io {
namespace {

const TimePoint kT0 = TimePoint::from_ns(1'000'000'000);

struct Bufs {
  explicit Bufs(size_t n, uint32_t cap = 2048) : mem(n * cap), rx(n) {
    for (size_t i = 0; i < n; ++i) rx[i] = RxDatagram{mem.data() + i * cap, cap, 0, Ecn::kNotEct};
  }
  std::vector<uint8_t> mem;
  std::vector<RxDatagram> rx;
};

size_t send_n(PacketIo& io, int n, TimePoint now, uint8_t tag = 0) {
  std::vector<std::array<uint8_t, 100>> data(n);
  std::vector<TxDatagram> tx(n);
  for (int i = 0; i < n; ++i) {
    data[i].fill(static_cast<uint8_t>(i + tag));
    tx[i] = TxDatagram{data[i].data(), 100, Ecn::kEct0};
  }
  return io.send_burst(tx, now);
}

TEST(Loopback, CarriesBytesWithDelayInOrder) {
  LoopbackLink link(2048, 64, 1);
  Impairment imp;
  imp.delay = Duration::from_ms(5);
  link.set_impairment(0, imp);
  ASSERT_EQ(send_n(link.a(), 10, kT0), 10U);
  Bufs b(16);
  EXPECT_EQ(link.b().recv_burst(b.rx, kT0 + Duration::from_ms(4)), 0U);
  EXPECT_EQ(link.b().next_rx_time(), kT0 + Duration::from_ms(5));
  ASSERT_EQ(link.b().recv_burst(b.rx, kT0 + Duration::from_ms(5)), 10U);
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(b.rx[i].len, 100U);
    EXPECT_EQ(b.rx[i].data[0], i);
    EXPECT_EQ(b.rx[i].data[99], i);
  }
  // The other direction is independent.
  EXPECT_EQ(link.a().recv_burst(b.rx, kT0 + Duration::from_s(1)), 0U);
  EXPECT_EQ(link.a().stats().tx_packets, 10U);
  EXPECT_EQ(link.b().stats().rx_packets, 10U);
}

TEST(Loopback, PartialBurstWhenFull) {
  LoopbackLink link(2048, 8, 1);
  EXPECT_EQ(send_n(link.a(), 12, kT0), 8U);
  EXPECT_EQ(link.a().stats().tx_full, 4U);
  Bufs b(4);
  EXPECT_EQ(link.b().recv_burst(b.rx, kT0), 4U);  // burst bounded by buffers
  EXPECT_EQ(send_n(link.a(), 4, kT0), 4U);        // slots freed
}

TEST(Loopback, LossDuplicationReorderingCorruption) {
  LoopbackLink link(2048, 4096, 7);
  Impairment imp;
  imp.delay = Duration::from_ms(1);
  imp.loss = 0.1;
  imp.duplicate = 0.1;
  imp.reorder = 0.1;
  imp.reorder_extra = Duration::from_ms(1);
  imp.corrupt = 0.1;
  link.set_impairment(0, imp);
  for (int i = 0; i < 10; ++i) ASSERT_EQ(send_n(link.a(), 100, kT0, static_cast<uint8_t>(i)), 100U);
  Bufs b(4096);
  const size_t n = link.b().recv_burst(b.rx, kT0 + Duration::from_ms(10));
  const auto& st = link.channel_stats(0);
  EXPECT_EQ(n, st.delivered);
  EXPECT_EQ(n, 1000 - st.dropped + st.duplicated);
  EXPECT_NEAR(static_cast<double>(st.dropped), 100, 40);
  EXPECT_NEAR(static_cast<double>(st.duplicated), 90, 40);
  EXPECT_NEAR(static_cast<double>(st.reordered), 90, 40);
  EXPECT_NEAR(static_cast<double>(st.corrupted), 90, 40);
  size_t corrupted = 0;
  for (size_t i = 0; i < n; ++i) {
    const uint8_t first = b.rx[i].data[0];
    for (int k = 1; k < 100; ++k)
      if (b.rx[i].data[k] != first && b.rx[i].data[k] != b.rx[i].data[(k + 1) % 100]) {
        ++corrupted;
        break;
      }
  }
  EXPECT_GT(corrupted, 0U);
}

TEST(Loopback, FilterAndCeMarks) {
  LoopbackLink link(2048, 64, 1);
  link.set_filter(0, [](const uint8_t*, uint32_t, uint64_t seq) {
    return seq == 1 ? Verdict::kDrop : seq == 2 ? Verdict::kDuplicate : Verdict::kPass;
  });
  Impairment imp;
  imp.ce_mark = 1.0;
  link.set_impairment(0, imp);
  send_n(link.a(), 4, kT0);
  Bufs b(8);
  const size_t n = link.b().recv_burst(b.rx, kT0);
  ASSERT_EQ(n, 4U);  // 0, 2, 2, 3
  EXPECT_EQ(b.rx[1].data[0], 2);
  EXPECT_EQ(b.rx[2].data[0], 2);
  EXPECT_EQ(b.rx[0].ecn, Ecn::kCe);
}

TEST(Loopback, TruncatedWhenBufferTooSmall) {
  LoopbackLink link(2048, 64, 1);
  send_n(link.a(), 1, kT0);
  Bufs b(1, 50);
  EXPECT_EQ(link.b().recv_burst(b.rx, kT0), 0U);
  EXPECT_EQ(link.b().stats().rx_truncated, 1U);
}

}  // namespace
}  // namespace rowan::io
