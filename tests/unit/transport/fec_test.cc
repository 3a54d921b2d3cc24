// Forward error correction in the transport: a lossy path gets coded, the
// receiver rebuilds lost packets and acknowledges them (so the sender does not
// resend them), a clean path sends no repair, and forged FEC frames are
// counted drops.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <span>
#include <tuple>
#include <vector>

#include "fec/block_code.h"
#include "harness.h"
#include "transport/fec_coder.h"

namespace rowan::test {
namespace {

using transport::FecMode;
using transport::TransportConfig;

struct Outcome {
  transport::ConnStats a, b;
  uint64_t bad = 0;
  bool done = false;
};

// Sends `total` bytes a → b over a 50 Mbit/s path dropping each a→b
// datagram with probability `loss` (fixed seed), 10 ms each way. The
// application writes a 64 KiB message whenever its rate `app_bps` allows
// (0: as fast as the send buffer takes it, a bulk transfer).
Outcome transfer(FecMode mode, double loss, uint64_t total, uint64_t seed = 11,
                 double app_bps = 25e6) {
  TransportConfig c = test_config(Bytes{128} * 1472, 50'000'000);
  c.fec.mode = mode;
  Pair p(c, Duration::from_ms(10), seed);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> uni(0.0, 1.0);
  p.link.set_filter(0, [&](const uint8_t*, uint32_t, uint64_t) {
    return uni(rng) < loss ? io::Verdict::kDrop : io::Verdict::kPass;
  });
  Writer w{p.a, 0, total};
  Reader r{p.b};
  const TimePoint t0 = p.clock.now();
  p.on_step = [&] {
    if (app_bps > 0) {
      constexpr uint64_t kMessage = 65536;
      const auto due = static_cast<uint64_t>((p.clock.now() - t0).seconds() * app_bps / 8);
      w.allowed = (due / kMessage + 1) * kMessage;
    }
    w.pump(p.clock.now());
    r.pump(p.clock.now());
  };
  Outcome out;
  out.done = p.run_until([&] { return r.fin[0] && r.got[0] == total; }, Duration::from_s(60));
  out.a = p.a.stats();
  out.b = p.b.stats();
  out.bad = r.bad;
  return out;
}

// Under link security a source packet's stream bytes are pieces of the send
// buffer, not in the datagram (packet_io.h): the coder takes its symbol from
// both, and the repair is the one the whole datagram gives.
TEST(Fec, ASymbolTakenFromPiecesIsTheWholeDatagrams) {
  std::mt19937 rng(5);
  std::vector<uint8_t> dgram(1200);
  for (auto& b : dgram) b = static_cast<uint8_t>(rng());
  std::vector<uint8_t> holed = dgram;
  const io::TxPiece pieces[2] = {{dgram.data() + 100, 100, 300}, {dgram.data() + 700, 700, 500}};
  for (const io::TxPiece& pc : pieces) std::fill_n(holed.begin() + pc.off, pc.len, uint8_t{0xEE});
  auto repair_of = [](const std::vector<uint8_t>& d, std::span<const io::TxPiece> pcs) {
    transport::FecCoder coder(transport::FecConfig{}, 1400);
    uint32_t block = 0;
    uint8_t index = 0;
    coder.next_source(&block, &index);
    const size_t hdr = transport::wire::kHeaderSize;
    coder.add_source(77, d.data() + hdr, d.size() - hdr, 0, pcs, hdr);
    EXPECT_TRUE(coder.repair_due());
    std::vector<uint8_t> out(1600);
    transport::wire::FrameWriter w(out.data(), out.size());
    coder.write_repair(w, 78, TimePoint());
    out.resize(w.size());
    return out;
  };
  const auto want = repair_of(dgram, {});
  EXPECT_EQ(repair_of(holed, pieces), want);
  EXPECT_NE(repair_of(holed, {}), want);  // the holes matter
}

TEST(Fec, CleanPathSendsNoRepair) {
  const Outcome run = transfer(FecMode::kAdaptive, 0.0, 4'000'000);
  ASSERT_TRUE(run.done);
  EXPECT_EQ(run.bad, 0U);
  EXPECT_EQ(run.a.fec_repair_sent, 0U);
  EXPECT_EQ(run.a.fec_source_packets, 0U);
  EXPECT_EQ(run.a.fec_k, 0U);
  EXPECT_EQ(run.b.fec_recovered, 0U);
}

TEST(Fec, LossyPathIsCodedAndRebuiltPacketsAreNotResent) {
  const uint64_t total = 6'000'000;
  const Outcome coded = transfer(FecMode::kAdaptive, 0.01, total);
  const Outcome plain = transfer(FecMode::kOff, 0.01, total);
  ASSERT_TRUE(coded.done);
  ASSERT_TRUE(plain.done);
  EXPECT_EQ(coded.bad, 0U);
  EXPECT_EQ(plain.bad, 0U);
  // Coding started once loss was measured, and the receiver rebuilt packets.
  EXPECT_GT(coded.a.fec_repair_sent, 0U);
  EXPECT_GT(coded.b.fec_recovered, 0U);
  EXPECT_GT(coded.b.fec_repair_received, 0U);
  // Rebuilt packets were acknowledged: the sender saw them as received.
  EXPECT_GT(coded.a.fec_held_acked, 0U);
  // Repair replaces most retransmissions.
  EXPECT_GT(plain.a.retransmitted_packets, 0U);
  EXPECT_LT(coded.a.retransmitted_packets * 3, plain.a.retransmitted_packets);
  // Within the overhead cap (repair bytes over everything else sent).
  EXPECT_LT(static_cast<double>(coded.a.fec_repair_bytes),
            0.16 * static_cast<double>(coded.a.bytes_sent - coded.a.fec_repair_bytes));
  // FEC off sends none.
  EXPECT_EQ(plain.a.fec_repair_sent, 0U);
  EXPECT_EQ(plain.b.fec_drop_invalid, 0U);
  EXPECT_EQ(coded.b.fec_drop_invalid, 0U);
}

// A bulk transfer (the writer always has more than the send buffer takes)
// is not coded while it lasts: a loss is retransmitted while the data behind
// it is sent, and repair would displace goodput. What is written after the
// writer's last short write, the tail whose losses delay completion, is.
// So its repair share is well under the rate-limited transfer's, which
// codes everything (before this rule, both spent ~12 %).
TEST(Fec, BulkTransferIsNotCodedButItsTailIs) {
  const uint64_t total = 6'000'000;
  const Outcome bulk = transfer(FecMode::kAdaptive, 0.01, total, 11, 0);
  const Outcome paced = transfer(FecMode::kAdaptive, 0.01, total, 11);
  ASSERT_TRUE(bulk.done);
  ASSERT_TRUE(paced.done);
  EXPECT_EQ(bulk.bad, 0U);
  const auto share = [](const Outcome& o) {
    return static_cast<double>(o.a.fec_repair_bytes) / static_cast<double>(o.a.bytes_sent);
  };
  EXPECT_LT(share(bulk), 0.5 * share(paced)) << share(bulk) << " vs " << share(paced);
  EXPECT_GT(bulk.a.retransmitted_packets, 0U);
  // The code rate was chosen (loss was measured), and the tail was coded.
  EXPECT_GT(bulk.a.fec_k, 0U);
  EXPECT_GT(bulk.a.fec_repair_sent, 0U);
  EXPECT_GT(bulk.b.fec_recovered, 0U);
}

// A datagram as the connection would send it (ending in its CRC).
std::vector<uint8_t> datagram(uint64_t pn, const std::vector<uint8_t>& frames) {
  std::vector<uint8_t> d(transport::wire::kMaxOverhead + frames.size());
  transport::wire::Header h;
  h.connection_id = 0x1234;
  h.packet_number = pn;
  transport::wire::write_header(d.data(), h);
  std::copy(frames.begin(), frames.end(), d.begin() + transport::wire::kHeaderSize);
  transport::wire::end_datagram(d.data(), frames.size(), true);
  return d;
}

std::vector<uint8_t> repair_frame(uint32_t block, uint8_t k, uint8_t m, uint8_t index,
                                  const std::vector<uint8_t>& symbol) {
  std::vector<uint8_t> f(transport::wire::kRepairFrameOverhead + symbol.size());
  transport::wire::FrameWriter w(f.data(), f.size());
  uint8_t* dst = w.repair(block, k, m, index, static_cast<uint16_t>(symbol.size()));
  std::copy(symbol.begin(), symbol.end(), dst);
  return f;
}

TEST(Fec, ForgedRepairIsACountedDrop) {
  FakeClock clock;
  TransportConfig c = test_config();
  transport::Connection b(c, clock, clock.now());
  std::mt19937_64 rng(5);
  uint64_t pn = 0;
  // Source packets of block 7 (a PING and the FEC_SOURCE frame each).
  for (uint8_t i = 0; i < 2; ++i) {
    std::vector<uint8_t> f = {
        transport::wire::kFramePing, transport::wire::kFrameFecSource, 0, 0, 0, 7, i};
    auto d = datagram(pn++, f);
    b.on_datagram(d.data(), d.size(), io::Ecn::kNotEct, clock.now());
  }
  EXPECT_EQ(b.stats().drop_malformed, 0U);
  // Random repair bytes for the missing third source: whatever they decode
  // to is refused, never applied.
  uint64_t refused = 0;
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<uint8_t> sym(std::uniform_int_distribution<size_t>(3, 400)(rng));
    for (auto& x : sym) x = static_cast<uint8_t>(rng());
    const uint32_t block = 100 + static_cast<uint32_t>(trial);
    auto d = datagram(pn++, repair_frame(block, 1, 1, 0, sym));
    b.on_datagram(d.data(), d.size(), io::Ecn::kNotEct, clock.now());
    refused = b.stats().fec_drop_invalid;
  }
  EXPECT_GT(refused, 150U);  // a random symbol almost never parses as a packet
  // Shapes out of range are refused by the decoder.
  const uint64_t before = b.stats().fec_drop_invalid;
  for (auto [k, m, idx] :
       {std::tuple<int, int, int>{0, 1, 0}, {40, 1, 0}, {3, 0, 0}, {3, 9, 0}, {3, 2, 2}}) {
    auto d = datagram(pn++, repair_frame(9, static_cast<uint8_t>(k), static_cast<uint8_t>(m),
                                         static_cast<uint8_t>(idx), {0, 1, 2, 3}));
    b.on_datagram(d.data(), d.size(), io::Ecn::kNotEct, clock.now());
  }
  EXPECT_EQ(b.stats().fec_drop_invalid, before + 5);
  // A truncated REPAIR frame is malformed: the datagram is dropped whole.
  auto f = repair_frame(9, 3, 1, 0, {1, 2, 3, 4});
  f.resize(f.size() - 2);
  auto d = datagram(pn++, f);
  const uint64_t malformed = b.stats().drop_malformed;
  b.on_datagram(d.data(), d.size(), io::Ecn::kNotEct, clock.now());
  EXPECT_EQ(b.stats().drop_malformed, malformed + 1);
  // Two FEC_SOURCE frames in one packet: malformed.
  auto two = datagram(pn++, {transport::wire::kFrameFecSource, 0, 0, 0, 1, 0,
                             transport::wire::kFrameFecSource, 0, 0, 0, 1, 1});
  b.on_datagram(two.data(), two.size(), io::Ecn::kNotEct, clock.now());
  EXPECT_EQ(b.stats().drop_malformed, malformed + 2);
}

TEST(Fec, RebuiltPacketIsAppliedAndAcknowledged) {
  // Two source packets carrying stream data; the second is lost; an XOR
  // repair rebuilds it: its bytes become readable and its packet number is
  // acknowledged.
  FakeClock clock;
  TransportConfig c = test_config();
  transport::Connection b(c, clock, clock.now());
  auto stream = [](uint64_t off, std::vector<uint8_t> data) {
    std::vector<uint8_t> f(transport::wire::stream_frame_overhead(3, off) + data.size());
    transport::wire::FrameWriter w(f.data(), f.size());
    uint8_t* dst = w.stream_header(3, off, static_cast<uint16_t>(data.size()), false);
    std::copy(data.begin(), data.end(), dst);
    w.commit_stream_data(data.size());
    return f;
  };
  const auto f0 = stream(0, {1, 2, 3, 4});
  const auto f1 = stream(4, {5, 6, 7, 8, 9});
  fec::Encoder enc(256);
  enc.begin(2, 1);
  uint8_t pn0[8] = {0, 0, 0, 0, 0, 0, 0, 0}, pn1[8] = {0, 0, 0, 0, 0, 0, 0, 1};
  enc.add(f0.data(), f0.size(), pn0);
  enc.add(f1.data(), f1.size(), pn1);
  const size_t rlen = enc.encode();
  std::vector<uint8_t> sym(enc.repair(0), enc.repair(0) + rlen);

  auto src0 = f0;
  src0.insert(src0.end(), {transport::wire::kFrameFecSource, 0, 0, 0, 0, 0});
  auto d0 = datagram(0, src0);
  b.on_datagram(d0.data(), d0.size(), io::Ecn::kNotEct, clock.now());
  EXPECT_EQ(b.readable(3), 4U);
  auto d2 = datagram(2, repair_frame(0, 2, 1, 0, sym));
  b.on_datagram(d2.data(), d2.size(), io::Ecn::kNotEct, clock.now());
  EXPECT_EQ(b.stats().fec_recovered, 1U);
  EXPECT_EQ(b.readable(3), 9U);
  uint8_t buf[16];
  bool fin = false;
  ASSERT_EQ(b.read(3, buf, sizeof buf, &fin, clock.now()), 9U);
  for (int i = 0; i < 9; ++i) EXPECT_EQ(buf[i], i + 1);
  // The ACK b sends covers packet 1 (rebuilt), not only 0 and 2.
  std::vector<uint8_t> out(1472);
  transport::OutDatagram od{out.data(), 1472, 0, 0, {}};
  ASSERT_EQ(b.poll_send(std::span(&od, 1), clock.now()), 1U);
  ASSERT_EQ(out[transport::wire::kHeaderSize], transport::wire::kFrameAck);
  EXPECT_EQ(transport::wire::get_u64(out.data() + transport::wire::kHeaderSize + 1),
            2U);                                          // largest
  EXPECT_EQ(out[transport::wire::kHeaderSize + 21], 1U);  // one range: 0..2, nothing missing
  EXPECT_EQ(transport::wire::get_u64(out.data() + transport::wire::kHeaderSize + 22), 2U);
  // The original arriving late is a duplicate.
  auto src1 = f1;
  src1.insert(src1.end(), {transport::wire::kFrameFecSource, 0, 0, 0, 0, 1});
  auto d1 = datagram(1, src1);
  b.on_datagram(d1.data(), d1.size(), io::Ecn::kNotEct, clock.now());
  EXPECT_EQ(b.stats().drop_duplicate, 1U);
}

}  // namespace
}  // namespace rowan::test
