// The split engine at scale: 4,096 QPs paired between two engines with
// nothing allocated after start-up (every operator new while a packet goes
// through an engine is counted, the fakes' included: they write into
// buffers sized beforehand; the test's own checks are not),
// traffic interleaved over all of them arriving in order with its own
// payload, the flow past the table's size counted and left in passthrough,
// and egress flows that find the shared packet pool empty holding their
// stream back instead of dropping.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include "split/split_engine.h"
#include "tools/fake_clock.h"
#include "tools/split_flows.h"

namespace {
std::atomic<uint64_t> g_allocs{0};
std::atomic<bool> g_counting{false};
/// Counts allocations while it lives (around the engines' work).
struct Counting {
  Counting() { g_counting = true; }
  ~Counting() { g_counting = false; }
  Counting(const Counting&) = delete;
  Counting& operator=(const Counting&) = delete;
};
void count() {
  if (g_counting.load(std::memory_order_relaxed)) g_allocs.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace

// The replacements below pair malloc with free; GCC's check of new/delete
// pairs sees the inlined std::free behind operator delete and the library's
// operator new at its call sites, and calls the pair mismatched.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

void* operator new(size_t n) {
  count();
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void* operator new[](size_t n) {
  count();
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }

namespace rowan::gw {
namespace {

namespace op = roce::op;
constexpr uint32_t kQps = SplitEngine::kMaxFlows;
constexpr uint32_t kPsn0 = 0x100;
constexpr uint32_t kFrame = 2048;

/// Frames an engine sent (with the stream they went on), in buffers
/// allocated up front.
class Frames {
 public:
  explicit Frames(size_t cap) : buf_(cap * kFrame), len_(cap), stream_(cap) {}
  void push(const uint8_t* p, uint32_t n, uint64_t stream = 0) {
    if (n_ == len_.size() || n > kFrame) {
      ++lost_;
      return;
    }
    std::memcpy(&buf_[n_ * kFrame], p, n);
    stream_[n_] = stream;
    len_[n_++] = n;
  }
  size_t size() const { return n_; }
  std::span<const uint8_t> at(size_t i) const { return {&buf_[i * kFrame], len_[i]}; }
  uint64_t stream(size_t i) const { return stream_[i]; }
  void clear() { n_ = 0; }
  uint64_t lost() const { return lost_; }

 private:
  std::vector<uint8_t> buf_;
  std::vector<uint32_t> len_;
  std::vector<uint64_t> stream_;
  size_t n_ = 0;
  uint64_t lost_ = 0;
};

class ScaleIo final : public SplitIo {
 public:
  explicit ScaleIo(size_t frames) : wan(frames), local(frames) {}
  bool carry(Flow& f, const uint8_t* ip, uint32_t len, TimePoint) noexcept override {
    wan.push(ip, len, f.stream);
    return true;
  }
  bool has_room(const Flow&, uint32_t) const noexcept override { return true; }
  bool over_share(const Flow&) const noexcept override { return false; }
  bool short_of_room(uint32_t, uint64_t) const noexcept override { return false; }
  void send_local(const uint8_t* ip, uint32_t len, TimePoint, const VlanTag&,
                  bool) noexcept override {
    local.push(ip, len);
  }
  bool carry_packet(const uint8_t* ip, uint32_t len, TimePoint) noexcept override {
    wan.push(ip, len);
    return true;
  }
  Flow* find_flow(const FlowKey& key) noexcept override { return flows.find(key); }
  Flow* open_flow(const FlowKey& key, TimePoint now) noexcept override {
    return flows.open(key, 0, now);
  }
  test::SplitFlows flows{2 * kQps + 16};
  Frames wan, local;
};

class ScaleTest : public ::testing::Test {
 protected:
  static constexpr size_t kFrames = 3 * kQps + 64;
  ScaleTest() {
    a_ip_ = roce::parse_ip_addr("198.18.1.10");
    b_ip_ = roce::parse_ip_addr("198.18.2.10");
  }
  static uint32_t req_qp(uint32_t i) { return 0x10000 + i; }
  static uint32_t rsp_qp(uint32_t i) { return 0x20000 + i; }
  static uint8_t byte_of(uint32_t qp, uint32_t psn, uint32_t k) {
    return static_cast<uint8_t>(qp * 7 + psn * 13 + k);
  }
  /// A WRITE ONLY from host A on QP pair `i`, its payload telling QP and PSN.
  size_t request(uint32_t i, uint32_t psn, uint8_t* out) {
    uint8_t payload[64];
    for (uint32_t k = 0; k < sizeof payload; ++k) payload[k] = byte_of(rsp_qp(i), psn, k);
    roce::FrameSpec s;
    s.with_eth = false;
    s.src = a_ip_;
    s.dst = b_ip_;
    s.bth.opcode = op::kRcWriteOnly;
    s.bth.dest_qp = rsp_qp(i);
    s.bth.psn = psn;
    s.bth.ack_req = true;
    s.reth.dma_len = sizeof payload;
    s.payload = {payload, sizeof payload};
    return roce::build(s, {out, kFrame});
  }
  size_t ack(uint32_t qp, uint32_t psn, uint32_t msn, uint8_t* out) {
    return roce::build(test::aeth_spec(b_ip_, a_ip_, qp, psn, 0x1F, msn), {out, kFrame});
  }
  /// The stream gateway A carries QP pair `i`'s requests on.
  uint64_t stream_of(uint32_t i) {
    return ia_.flows.find(test::SplitFlows::roce_key(a_ip_, b_ip_, rsp_qp(i)))->stream;
  }
  bool a_sends(const uint8_t* p, size_t n) {
    const Counting counting;
    Flow* f = ia_.flows.classify({p, n}, 0, clock_.now());
    if (f == nullptr) return false;
    if (ga_.on_local(*f, true, p, static_cast<uint32_t>(n), clock_.now())) return true;
    ia_.wan.push(p, static_cast<uint32_t>(n), f->stream);  // passthrough
    return false;
  }
  bool b_sends(const uint8_t* p, size_t n) {
    const Counting counting;
    Flow* f = ib_.flows.classify({p, n}, 0, clock_.now());
    if (f == nullptr) return false;
    if (gb_.on_local(*f, true, p, static_cast<uint32_t>(n), clock_.now())) return true;
    ib_.wan.push(p, static_cast<uint32_t>(n), f->stream);
    return false;
  }
  // What one gateway carried reaches the other (or, not taken, its host).
  static void cross(ScaleIo& from, SplitEngine& to, ScaleIo& to_io, TimePoint now) {
    const Counting counting;
    for (size_t i = 0; i < from.wan.size(); ++i) {
      const std::span<const uint8_t> r = from.wan.at(i);
      if (!to.on_wan(nullptr, from.wan.stream(i), r.data(), static_cast<uint32_t>(r.size()), now)) {
        to_io.local.push(r.data(), static_cast<uint32_t>(r.size()));
      }
    }
    from.wan.clear();
  }
  /// Pairs QP pair `i` by PSN match: a passthrough request, host B's ACK,
  /// then the request that starts the split (it reaches host B re-originated).
  void pair(uint32_t i) {
    size_t n = request(i, kPsn0, pkt_);
    ASSERT_FALSE(a_sends(pkt_, n));
    cross(ia_, gb_, ib_, clock_.now());
    n = ack(req_qp(i), kPsn0, 1, pkt_);
    ASSERT_FALSE(b_sends(pkt_, n));
    cross(ib_, ga_, ia_, clock_.now());
    n = request(i, kPsn0 + 1, pkt_);
    ASSERT_TRUE(a_sends(pkt_, n));
    cross(ia_, gb_, ib_, clock_.now());
    n = ack(req_qp(i), kPsn0 + 1, 2, pkt_);  // covers the passthrough part: relayed
    ASSERT_FALSE(b_sends(pkt_, n));
    cross(ib_, ga_, ia_, clock_.now());
  }

  test::FakeClock clock_;
  roce::IpAddr a_ip_, b_ip_;
  ScaleIo ia_{kFrames}, ib_{kFrames};
  SplitEngine ga_{ia_, 1500};
  SplitEngine gb_{ib_, 1500};
  uint8_t pkt_[kFrame]{};
};

TEST_F(ScaleTest, PairsFourThousandQpsWithoutAllocatingAndKeepsEachInOrder) {
  std::vector<uint32_t> next(kQps, kPsn0 + 2);  // host B's next PSN per QP
  const uint64_t before = g_allocs.load();
  for (uint32_t i = 0; i < kQps; ++i) {
    ASSERT_NO_FATAL_FAILURE(pair(i));
    ia_.local.clear();
    ib_.local.clear();
  }
  EXPECT_EQ(ga_.stats().flows_paired, kQps);
  EXPECT_EQ(gb_.stats().flows_egress, kQps);
  EXPECT_EQ(ga_.stats().table_full, 0U);
  EXPECT_EQ(gb_.stats().table_full, 0U);
  EXPECT_EQ(ga_.role_counts()[1], kQps);
  EXPECT_EQ(gb_.role_counts()[2], kQps);

  // Traffic over all of them, interleaved: three rounds of one WRITE per QP.
  // Host B gets every QP's requests in PSN order with their own payload;
  // host A gets a local ACK per request, on its own QP.
  constexpr uint32_t kRounds = 3;
  for (uint32_t round = 0; round < kRounds; ++round) {
    for (uint32_t i = 0; i < kQps; ++i) {
      const size_t n = request(i, kPsn0 + 2 + round, pkt_);
      ASSERT_TRUE(a_sends(pkt_, n)) << i;
    }
    ASSERT_EQ(ia_.local.size(), kQps);
    for (size_t k = 0; k < ia_.local.size(); ++k) {
      roce::RocePacket p;
      ASSERT_EQ(roce::parse_ip(ia_.local.at(k), p), roce::ParseError::kOk);
      EXPECT_EQ(p.bth.opcode, op::kRcAck);
      EXPECT_EQ(p.bth.dest_qp, req_qp(static_cast<uint32_t>(k)));
      EXPECT_EQ(p.bth.psn, kPsn0 + 2 + round);
    }
    ia_.local.clear();
    cross(ia_, gb_, ib_, clock_.now());
    ASSERT_EQ(ib_.local.size(), kQps);
    for (size_t k = 0; k < ib_.local.size(); ++k) {
      roce::RocePacket p;
      ASSERT_EQ(roce::parse_ip(ib_.local.at(k), p), roce::ParseError::kOk);
      ASSERT_TRUE(roce::icrc_ok(p));
      const uint32_t i = p.bth.dest_qp - rsp_qp(0);
      ASSERT_LT(i, kQps);
      EXPECT_EQ(p.bth.psn, next[i]) << i;
      next[i] = p.bth.psn + 1;
      ASSERT_EQ(p.payload_len, 64U);
      for (uint32_t b = 0; b < 64; ++b)
        ASSERT_EQ(p.payload()[b], byte_of(p.bth.dest_qp, p.bth.psn, b));
    }
    ib_.local.clear();
    for (uint32_t i = 0; i < kQps; ++i) {  // host B's ACKs stop at gateway B
      const size_t n = ack(req_qp(i), kPsn0 + 2 + round, 3 + round, pkt_);
      ASSERT_TRUE(b_sends(pkt_, n)) << i;
    }
  }
  for (uint32_t i = 0; i < kQps; ++i) EXPECT_EQ(next[i], kPsn0 + 2 + kRounds);
  EXPECT_EQ(gb_.stats().acks_consumed, uint64_t{kQps} * kRounds);
  // One more QP than the table holds: counted, and carried in passthrough.
  const size_t n = request(kQps, kPsn0, pkt_);
  EXPECT_FALSE(a_sends(pkt_, n));
  EXPECT_EQ(ga_.stats().table_full, 1U);
  EXPECT_EQ(ia_.wan.size(), 1U);
  EXPECT_EQ(ia_.wan.lost() + ib_.wan.lost() + ia_.local.lost() + ib_.local.lost(), 0U);
  // Not one allocation since the engines and the fakes were built.
  EXPECT_EQ(g_allocs.load() - before, 0U);
  const uint64_t after_traffic = g_allocs.load();
  // Releasing gives every slot back: the flows pair again, still allocating nothing.
  {
    const Counting counting;
    ga_.expire(clock_.now() + Duration::from_s(1));
    gb_.expire(clock_.now() + Duration::from_s(1));
  }
  EXPECT_EQ(ga_.role_counts()[1], 0U);
  EXPECT_EQ(gb_.role_counts()[2], 0U);
  EXPECT_EQ(gb_.pool_available(), gb_.pool_capacity());
  EXPECT_EQ(g_allocs.load() - after_traffic, 0U);
}

// Egress flows that hold more than the shared pool has: the stream of the
// one that finds it empty waits (blocked()), nothing is dropped, and it goes
// on once host B's ACKs give slots back.
TEST_F(ScaleTest, AnEmptyPacketPoolHoldsTheStreamBack) {
  const uint32_t slots = gb_.pool_capacity();
  const uint32_t flows = slots / SplitEngine::kEgressSlots + 1;
  ASSERT_LE(flows, kQps);
  for (uint32_t i = 0; i < flows; ++i) ASSERT_NO_FATAL_FAILURE(pair(i));
  ia_.local.clear();
  ib_.local.clear();
  // Each flow sends up to a full window; host B answers nothing.
  uint32_t blocked_at = UINT32_MAX;
  for (uint32_t i = 0; i < flows && blocked_at == UINT32_MAX; ++i) {
    for (uint32_t k = 0; k < SplitEngine::kEgressSlots; ++k) {
      const size_t n = request(i, kPsn0 + 2 + k, pkt_);
      ASSERT_TRUE(a_sends(pkt_, n));
      ia_.local.clear();
      if (gb_.blocked(nullptr, stream_of(i))) {
        blocked_at = i;
        break;
      }
      cross(ia_, gb_, ib_, clock_.now());
      ib_.local.clear();
    }
  }
  ASSERT_NE(blocked_at, UINT32_MAX);
  EXPECT_EQ(gb_.pool_available(), 0U);
  EXPECT_EQ(gb_.stats().requests_dropped, 0U);
  // Host B acknowledges what the first flow sent it (its in-flight window):
  // those slots come back and the stream may be read again.
  const size_t n = ack(req_qp(0), kPsn0 + 1 + 128, 9, pkt_);
  EXPECT_TRUE(b_sends(pkt_, n));
  EXPECT_GT(gb_.pool_available(), 0U);
  EXPECT_FALSE(gb_.blocked(nullptr, stream_of(blocked_at)));
  cross(ia_, gb_, ib_, clock_.now());
  EXPECT_EQ(gb_.stats().requests_dropped, 0U);
}

}  // namespace
}  // namespace rowan::gw
