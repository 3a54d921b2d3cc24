// RDMA CM MADs on QP1 (lib/src/split/cm.*): parsing of REQ/REP/RTU/DREQ/DREP
// from real soft-RoCE captures (tests/fixtures/rxe, checked against the data
// packets that follow in the same capture), and the tracker's pairing,
// teardown, REJ and expiry on synthetic MADs.
#include "split/cm.h"

#include <gtest/gtest.h>
#include <pcap/pcap.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "split/opcodes.h"
#include "tools/fake_clock.h"
#include "tools/paths.h"

namespace rowan::split {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;

struct PcapCloser {
  void operator()(pcap_t* p) const { pcap_close(p); }
};

std::vector<Bytes> read_pcap(const std::string& path) {
  char errbuf[PCAP_ERRBUF_SIZE];
  std::unique_ptr<pcap_t, PcapCloser> pc(pcap_open_offline(path.c_str(), errbuf));
  EXPECT_TRUE(pc) << errbuf;
  std::vector<Bytes> out;
  if (!pc) return out;
  pcap_pkthdr* hdr = nullptr;
  const u_char* bytes = nullptr;
  while (pcap_next_ex(pc.get(), &hdr, &bytes) == 1) out.emplace_back(bytes, bytes + hdr->caplen);
  return out;
}

bool same(const roce::IpAddr& a, const roce::IpAddr& b) {
  return a.version == b.version &&
         std::memcmp(a.bytes.data(), b.bytes.data(), a.version == 6 ? 16 : 4) == 0;
}

// Every capture: the tracker pairs each REQ with its REP, the first request
// each side then sends carries the PSN the CM messages announced, to the QP
// they announced, and DREQ/DREP leave nothing behind.
TEST(CmCapture, PairsEveryConnectionOfTheRxeCaptures) {
  const fs::path dir = fs::path(test::source_dir()) / "tests/fixtures/rxe";
  ASSERT_TRUE(fs::exists(dir));
  uint32_t total_pairs = 0;
  uint32_t total_checked = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".pcap") continue;
    SCOPED_TRACE(e.path().filename().string());
    CmTracker tracker;
    test::FakeClock clock;
    uint32_t reqs = 0;
    uint32_t paired = 0;
    uint32_t released = 0;
    struct Expect {
      roce::IpAddr src, dst;
      uint32_t qp, psn;
      bool seen = false;
    };
    std::vector<Expect> expects;
    for (const Bytes& f : read_pcap(e.path())) {
      clock.advance(Duration::from_us(10));
      roce::RocePacket p;
      if (roce::parse_ethernet({f.data(), f.size()}, p) != roce::ParseError::kOk) continue;
      CmMessage m;
      if (parse_cm(p, m)) {
        if (m.attr == cm_attr::kReq) {
          ++reqs;
          EXPECT_EQ(m.pmtu, 1024U);  // the captures' RoCE path MTU
        }
        CmConnection c;
        const CmEvent ev = tracker.on_message(p, m, 0, clock.now(), &c);
        if (ev == CmEvent::kPaired) {
          ++paired;
          EXPECT_TRUE(same(c.active, p.dst));
          EXPECT_TRUE(same(c.passive, p.src));
          expects.push_back({c.active, c.passive, c.passive_qpn, c.active_psn});
          expects.push_back({c.passive, c.active, c.active_qpn, c.passive_psn});
        } else if (ev == CmEvent::kReleased) {
          ++released;
        }
        continue;
      }
      if (request_kind(p.bth.opcode) == ReqKind::kOther) continue;
      for (Expect& x : expects) {
        if (x.seen || !same(x.src, p.src) || !same(x.dst, p.dst) || x.qp != p.bth.dest_qp) {
          continue;
        }
        x.seen = true;
        EXPECT_EQ(p.bth.psn, x.psn) << "first request to QP " << x.qp;
        ++total_checked;
      }
    }
    EXPECT_EQ(paired, reqs);
    EXPECT_EQ(released, reqs);  // each connection torn down once (DREQ; DREP finds nothing)
    EXPECT_EQ(tracker.size(), 0U);
    total_pairs += paired;
  }
  // v4-rping, v6-rping (one connection each) and v4-cm-write-bw (two).
  EXPECT_GE(total_pairs, 4U);
  EXPECT_GE(total_checked, total_pairs);
}

// ---------------------------------------------------------------------------
// Synthetic MADs.

class CmTest : public ::testing::Test {
 protected:
  CmTest() {
    a_ = roce::parse_ip_addr("198.18.1.10");
    b_ = roce::parse_ip_addr("198.18.2.10");
  }
  /// A CM MAD from `src` to `dst` with attribute `attr`; `fill` writes the
  /// CM message (232 bytes after the MAD header).
  template <typename F>
  Bytes mad(const roce::IpAddr& src, const roce::IpAddr& dst, uint16_t attr, F fill,
            uint8_t mgmt_class = kMadClassCm, uint32_t qp = kCmQp, size_t len = kMadLen) {
    Bytes payload(len, 0);
    payload[0] = 1;
    payload[1] = mgmt_class;
    payload[2] = 2;
    payload[3] = 3;
    payload[16] = static_cast<uint8_t>(attr >> 8);
    payload[17] = static_cast<uint8_t>(attr);
    if (len >= kMadLen) fill(payload.data() + kMadHeaderLen);
    roce::FrameSpec s;
    s.with_eth = false;
    s.src = src;
    s.dst = dst;
    s.bth.opcode = roce::op::kUdSendOnly;
    s.bth.dest_qp = qp;
    s.deth.qkey = 0x80010000;
    s.deth.src_qp = 1;
    s.payload = payload;
    Bytes buf(512);
    buf.resize(roce::build(s, buf));
    return buf;
  }
  static void put24(uint8_t* p, uint32_t v) {
    p[0] = static_cast<uint8_t>(v >> 16);
    p[1] = static_cast<uint8_t>(v >> 8);
    p[2] = static_cast<uint8_t>(v);
  }
  static void put32(uint8_t* p, uint32_t v) {
    p[0] = static_cast<uint8_t>(v >> 24);
    put24(p + 1, v);
  }
  Bytes req(uint32_t comm, uint32_t qpn, uint32_t psn, uint8_t mtu_code) {
    return mad(a_, b_, cm_attr::kReq, [&](uint8_t* m) {
      put32(m, comm);
      put24(m + 32, qpn);
      m[35] = 4;  // responder resources: must not leak into the QPN
      put24(m + 44, psn);
      m[47] = 0xa7;
      m[50] = static_cast<uint8_t>(mtu_code << 4 | 0x7);
    });
  }
  Bytes rep(uint32_t comm, uint32_t remote_comm, uint32_t qpn, uint32_t psn) {
    return mad(b_, a_, cm_attr::kRep, [&](uint8_t* m) {
      put32(m, comm);
      put32(m + 4, remote_comm);
      put24(m + 12, qpn);
      put24(m + 20, psn);
    });
  }
  Bytes two_ids(const roce::IpAddr& src, const roce::IpAddr& dst, uint16_t attr, uint32_t local,
                uint32_t remote, uint32_t remote_qpn = 0) {
    return mad(src, dst, attr, [&](uint8_t* m) {
      put32(m, local);
      put32(m + 4, remote);
      put24(m + 8, remote_qpn);
    });
  }
  CmEvent feed(const Bytes& b, CmConnection* c = nullptr) {
    roce::RocePacket p;
    EXPECT_EQ(roce::parse_ip({b.data(), b.size()}, p), roce::ParseError::kOk);
    CmMessage m;
    if (!parse_cm(p, m)) return CmEvent::kNone;
    return tracker_.on_message(p, m, 0, clock_.now(), c);
  }
  roce::IpAddr a_, b_;
  CmTracker tracker_;
  test::FakeClock clock_;
};

TEST_F(CmTest, ParsesReqFieldsWithoutNeighbouringBits) {
  const Bytes b = req(0x11223344, 0xABCDEF, 0xFFFFFF, 5);
  roce::RocePacket p;
  ASSERT_EQ(roce::parse_ip({b.data(), b.size()}, p), roce::ParseError::kOk);
  CmMessage m;
  ASSERT_TRUE(parse_cm(p, m));
  EXPECT_EQ(m.attr, cm_attr::kReq);
  EXPECT_EQ(m.local_comm_id, 0x11223344U);
  EXPECT_EQ(m.local_qpn, 0xABCDEFU);
  EXPECT_EQ(m.starting_psn, 0xFFFFFFU);
  EXPECT_EQ(m.pmtu, 4096U);
}

TEST_F(CmTest, RejectsWhatIsNotACmMad) {
  auto fill = [](uint8_t*) {};
  roce::RocePacket p;
  CmMessage m;
  const Bytes sa = mad(a_, b_, cm_attr::kReq, fill, 0x03);  // subnet administration
  ASSERT_EQ(roce::parse_ip({sa.data(), sa.size()}, p), roce::ParseError::kOk);
  EXPECT_FALSE(parse_cm(p, m));
  const Bytes qp2 = mad(a_, b_, cm_attr::kReq, fill, kMadClassCm, 2);  // a UD QP, not QP1
  ASSERT_EQ(roce::parse_ip({qp2.data(), qp2.size()}, p), roce::ParseError::kOk);
  EXPECT_FALSE(parse_cm(p, m));
  const Bytes shortmad = mad(a_, b_, cm_attr::kReq, fill, kMadClassCm, kCmQp, 40);
  ASSERT_EQ(roce::parse_ip({shortmad.data(), shortmad.size()}, p), roce::ParseError::kOk);
  EXPECT_FALSE(parse_cm(p, m));
  const Bytes sidr = mad(a_, b_, 0x0017, fill);  // SIDR_REQ: not ours
  ASSERT_EQ(roce::parse_ip({sidr.data(), sidr.size()}, p), roce::ParseError::kOk);
  EXPECT_FALSE(parse_cm(p, m));
}

TEST_F(CmTest, ReqRepPairsAndDreqReleases) {
  EXPECT_EQ(feed(req(0xA1, 0x11, 0x000100, 3)), CmEvent::kRequest);
  EXPECT_EQ(feed(req(0xA1, 0x11, 0x000100, 3)), CmEvent::kNone);  // retransmitted
  EXPECT_EQ(tracker_.size(), 1U);
  EXPECT_EQ(feed(rep(0xB1, 0xA2, 0x22, 0x200)), CmEvent::kNone);  // another connection's
  CmConnection c;
  ASSERT_EQ(feed(rep(0xB1, 0xA1, 0x22, 0xFFFFFE), &c), CmEvent::kPaired);
  EXPECT_TRUE(same(c.active, a_));
  EXPECT_TRUE(same(c.passive, b_));
  EXPECT_EQ(c.active_qpn, 0x11U);
  EXPECT_EQ(c.passive_qpn, 0x22U);
  EXPECT_EQ(c.active_psn, 0xFFFFFEU);  // the active side sends from the REP's PSN
  EXPECT_EQ(c.passive_psn, 0x100U);
  EXPECT_EQ(c.pmtu, 1024U);
  EXPECT_EQ(feed(rep(0xB1, 0xA1, 0x22, 0xFFFFFE)), CmEvent::kNone);  // retransmitted REP
  EXPECT_EQ(feed(two_ids(a_, b_, cm_attr::kRtu, 0xA1, 0xB1)), CmEvent::kNone);
  // The passive side disconnects.
  ASSERT_EQ(feed(two_ids(b_, a_, cm_attr::kDreq, 0xB1, 0xA1, 0x11), &c), CmEvent::kReleased);
  EXPECT_EQ(c.passive_qpn, 0x22U);
  EXPECT_EQ(feed(two_ids(a_, b_, cm_attr::kDrep, 0xA1, 0xB1)), CmEvent::kNone);
  EXPECT_EQ(tracker_.size(), 0U);
}

TEST_F(CmTest, RejOfARequestReleasesIt) {
  EXPECT_EQ(feed(req(0xA1, 0x11, 0x100, 3)), CmEvent::kRequest);
  CmConnection c;
  EXPECT_EQ(feed(two_ids(b_, a_, cm_attr::kRej, 0xB9, 0xA1), &c), CmEvent::kReleased);
  EXPECT_FALSE(c.established);
  EXPECT_EQ(tracker_.size(), 0U);
  EXPECT_EQ(feed(rep(0xB1, 0xA1, 0x22, 0x5)), CmEvent::kNone);  // too late
}

TEST_F(CmTest, UnansweredRequestsExpireAndAFullTableGivesWay) {
  EXPECT_EQ(feed(req(0xA1, 0x11, 0x100, 3)), CmEvent::kRequest);
  clock_.advance(Duration::from_ms(10));
  const TimePoint cutoff = clock_.now();
  EXPECT_EQ(feed(req(0xA2, 0x12, 0x100, 3)), CmEvent::kRequest);
  EXPECT_EQ(tracker_.expire(cutoff), 1U);
  EXPECT_EQ(tracker_.size(), 1U);
  EXPECT_EQ(feed(rep(0xB1, 0xA1, 0x22, 0x5)), CmEvent::kNone);  // forgotten
  EXPECT_EQ(feed(rep(0xB2, 0xA2, 0x23, 0x5)), CmEvent::kPaired);
  for (uint32_t i = 0; i < CmTracker::kConns + 3; ++i) {
    clock_.advance(Duration::from_us(1));
    feed(req(0x1000 + i, 0x100 + i, i, 3));
  }
  EXPECT_EQ(tracker_.size(), CmTracker::kConns);
  // The newest are kept.
  EXPECT_EQ(feed(rep(0xB3, 0x1000 + CmTracker::kConns + 2, 0x23, 0x5)), CmEvent::kPaired);
}

}  // namespace
}  // namespace rowan::split
