// libFuzzer target for rowand's split engine (daemon/rowand/split/split_engine.*):
// two gateways, A and B, between two simulated hosts, driven by a sequence
// of operations read from the input: RoCEv2 packets from host A or host B
// (a hostile or buggy NIC: any opcode, PSN, QP, flags, length, raw bytes,
// RDMA CM MADs), records from the WAN (any bytes, control records included),
// carrying the queued records across, time passing, timers, housekeeping,
// the WAN send buffer filling, and a peer restart. Properties beyond "no
// crash, no out-of-bounds access, no leak" (ASan/UBSan):
//  - every frame an engine sends toward a host parses as RoCEv2 (never
//    garbage toward an RNIC);
//  - a witness flow (its own QPs and its own peer, well-formed traffic each
//    step) is never corrupted by the fuzzed flows: every witness request
//    host B receives carries its own PSN's payload and RETH, and host B
//    (an RC responder) takes them in PSN order only.
// SPLIT_FUZZ_TRACE=1 prints what host B receives of the witness (to read a
// finding: `split_fuzz crash-...`).
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "split/split_engine.h"
#include "tools/split_flows.h"

namespace {

using namespace rowan;
using Buf = std::vector<uint8_t>;
namespace op = roce::op;

constexpr uint32_t kWitnessReqQp = 0x7001;  // host A's QP of the witness flow
constexpr uint32_t kWitnessRspQp = 0x7002;  // host B's
constexpr uint32_t kWitnessPsn = 0xFFFFF0;  // wraps during a run

void check(bool ok) {
  if (!ok) std::abort();
}

class FakeIo final : public gw::SplitIo {
 public:
  bool carry(gw::Flow& f, const uint8_t* ip, uint32_t len, TimePoint) noexcept override {
    if (!room) return false;
    wan.push_back({f.peer, Buf(ip, ip + len)});
    return true;
  }
  bool has_room(const gw::Flow&, uint32_t) const noexcept override { return room; }
  bool over_share(const gw::Flow&) const noexcept override { return over; }
  bool short_of_room(uint32_t, uint64_t) const noexcept override { return short_room; }
  void send_local(const uint8_t* ip, uint32_t len, TimePoint, const gw::VlanTag&,
                  bool) noexcept override {
    // What it relays or re-originates came parsed from a host or the WAN
    // (with that host's ICRC, right or wrong); what it builds has its own.
    roce::RocePacket p;
    check(roce::parse_ip({ip, len}, p) == roce::ParseError::kOk);
    local.emplace_back(ip, ip + len);
  }
  bool carry_packet(const uint8_t* ip, uint32_t len, TimePoint) noexcept override {
    if (!room) return false;
    // The peer of the packet's flow: the witness's QPs go to peer 1.
    roce::RocePacket p;
    uint32_t peer = 0;
    if (roce::parse_ip({ip, len}, p) == roce::ParseError::kOk &&
        (p.bth.dest_qp == kWitnessReqQp || p.bth.dest_qp == kWitnessRspQp)) {
      peer = 1;
    }
    wan.push_back({peer, Buf(ip, ip + len)});
    return true;
  }
  gw::Flow* find_flow(const gw::FlowKey& key) noexcept override { return flows.find(key); }
  gw::Flow* open_flow(const gw::FlowKey& key, TimePoint now) noexcept override {
    return flows.open(key, key.qp == kWitnessReqQp || key.qp == kWitnessRspQp ? 1 : 0, now);
  }
  rowan::test::SplitFlows flows{512};  // what the gateway's classifier keys
  struct Record {
    uint32_t peer;
    Buf bytes;
  };
  std::vector<Record> wan;
  std::vector<Buf> local;
  bool room = true;
  bool over = false;
  bool short_room = false;
};

class FakeClock {
 public:
  TimePoint now() const { return now_; }
  void advance(Duration d) { now_ = now_ + d; }

 private:
  TimePoint now_ = TimePoint::zero() + Duration::from_s(1);
};

/// Reads the fuzz input.
class Input {
 public:
  Input(const uint8_t* d, size_t n) : d_(d), n_(n) {}
  bool empty() const { return i_ >= n_; }
  uint8_t u8() { return i_ < n_ ? d_[i_++] : 0; }
  uint32_t u24() {
    return static_cast<uint32_t>(u8()) << 16 | static_cast<uint32_t>(u8()) << 8 | u8();
  }
  uint32_t u32() { return u24() << 8 | u8(); }
  Buf bytes(size_t max) {
    const size_t k = std::min<size_t>(u8() % (max + 1), n_ - std::min(i_, n_));
    Buf b(d_ + i_, d_ + i_ + k);
    i_ += k;
    return b;
  }

 private:
  const uint8_t* d_;
  size_t n_;
  size_t i_ = 0;
};

struct Sim {
  FakeIo ia, ib;
  // Small engines (one pair per input): 64 flows, so inputs reach a full
  // table; the smallest pool (one window); 8 translations.
  static constexpr gw::SplitLimits kLimits{64, 0, 8};
  gw::SplitEngine ga{ia, 1500, kLimits};
  gw::SplitEngine gb{ib, 1500, kLimits};
  FakeClock clock;
  roce::IpAddr a_ip = roce::parse_ip_addr("198.18.1.10");
  roce::IpAddr b_ip = roce::parse_ip_addr("198.18.2.10");
  // Stand-ins for the two peers (compared, never dereferenced).
  std::array<uint64_t, 2> peer_tag{};
  gw::PeerState* peer(uint32_t i) {
    return reinterpret_cast<gw::PeerState*>(static_cast<void*>(&peer_tag[i & 1]));
  }
  // The witness: host A sends one WRITE ONLY per step at its next PSN; host
  // B must see them without a gap, each with its own payload.
  uint32_t w_next = kWitnessPsn;  ///< host A's next PSN
  bool w_seen_any = false;
  uint32_t w_expected = kWitnessPsn;  ///< host B's next expected PSN
  uint32_t w_msn = 0;

  static Buf witness_payload(uint32_t psn) {
    Buf b(32);
    for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<uint8_t>(psn * 31 + i);
    return b;
  }
  Buf frame(const roce::FrameSpec& s) {
    Buf b(4400);
    b.resize(roce::build(s, b));
    return b;
  }
  static bool is_witness(const roce::RocePacket& p) {
    return p.bth.dest_qp == kWitnessReqQp || p.bth.dest_qp == kWitnessRspQp;
  }

  // A host's packet goes to its flow (a new one on peer `peer_i`), as the
  // gateway classifies it; what the engine does not take goes in
  // passthrough on the flow's peer (what does not parse as RoCEv2, on
  // `peer_i`: the engine never sees it).
  void host_a_sends(const Buf& pkt, uint32_t peer_i) { host_sends(ia, ga, pkt, peer_i); }
  void host_b_sends(const Buf& pkt, uint32_t peer_i) { host_sends(ib, gb, pkt, peer_i); }
  void host_sends(FakeIo& io, gw::SplitEngine& g, const Buf& pkt, uint32_t peer_i) {
    gw::Flow* f = io.flows.classify({pkt.data(), pkt.size()}, peer_i, clock.now());
    if (f == nullptr) {
      io.wan.push_back({peer_i, pkt});
      return;
    }
    if (!g.on_local(*f, true, pkt.data(), static_cast<uint32_t>(pkt.size()), clock.now())) {
      io.wan.push_back({f->peer, pkt});  // passthrough
    }
  }
  /// A bare IP RC packet of the witness flow.
  static roce::FrameSpec witness_spec(const roce::IpAddr& src, const roce::IpAddr& dst,
                                      uint8_t opcode, uint32_t qp, uint32_t psn) {
    roce::FrameSpec s;
    s.with_eth = false;
    s.src = src;
    s.dst = dst;
    s.bth.opcode = opcode;
    s.bth.dest_qp = qp;
    s.bth.psn = psn;
    return s;
  }
  void witness_step() {
    roce::FrameSpec s = witness_spec(a_ip, b_ip, op::kRcWriteOnly, kWitnessRspQp, w_next);
    s.bth.ack_req = true;
    s.reth = {0x1000, 0x55, 32};
    const Buf data = witness_payload(w_next);
    s.payload = data;
    // The witness host resends nothing: a request gateway A did not take
    // leaves its PSN missing for good, and host B (an RC responder) takes
    // nothing after it.
    host_a_sends(frame(s), 1);
    w_next = roce::psn_add(w_next, 1);
  }
  /// Host B receives `pkt` from gateway B.
  void host_b_receives(const Buf& pkt) {
    roce::RocePacket p;
    if (roce::parse_ip({pkt.data(), pkt.size()}, p) != roce::ParseError::kOk) return;
    if (p.bth.dest_qp != kWitnessRspQp || p.bth.opcode != op::kRcWriteOnly) return;
    if (!w_seen_any) {
      w_seen_any = true;
      w_expected = p.bth.psn;  // the first one may follow a request gateway A dropped
    }
    const int32_t d = roce::psn_diff(p.bth.psn, w_expected);
    if (std::getenv("SPLIT_FUZZ_TRACE") != nullptr) {
      std::fprintf(stderr, "host B: witness op %02x psn %06x expected %06x len %u rkey %x\n",
                   p.bth.opcode, p.bth.psn, w_expected, p.payload_len, p.reth.rkey);
    }
    if (p.reth.rkey == 0 && p.payload_len == 0) return;  // a QP-failing request
    // Whatever PSN it comes at, a witness request carries its own payload
    // (never another flow's bytes, never another PSN's).
    const Buf want = witness_payload(p.bth.psn);
    check(p.payload_len == want.size() &&
          std::memcmp(p.payload().data(), want.data(), want.size()) == 0);
    check(p.reth.rkey == 0x55 && p.reth.va == 0x1000 && p.reth.dma_len == 32);
    // Out of sequence (the witness host does not go back after a NAK, so a
    // PSN it skipped stays missing): an RC responder NAKs it, takes nothing.
    if (d > 0) return;
    if (d == 0) {
      w_expected = roce::psn_add(w_expected, 1);
      w_msn = (w_msn + 1) & roce::kPsnMask;
    }
    if (p.bth.ack_req) {  // host B acknowledges what it has
      roce::FrameSpec s =
          witness_spec(b_ip, a_ip, op::kRcAck, kWitnessReqQp, roce::psn_add(w_expected, -1));
      s.aeth = {0x1F, w_msn};
      host_b_sends(frame(s), 1);
    }
  }
  void carry_a_to_b(size_t max) {
    std::vector<FakeIo::Record> q;
    q.swap(ia.wan);
    size_t i = 0;
    for (; i < q.size() && i < max; ++i) {
      FakeIo::Record& r = q[i];
      if (gb.blocked(peer(r.peer), 10 + r.peer)) break;
      if (!gb.on_wan(peer(r.peer), 10 + r.peer, r.bytes.data(),
                     static_cast<uint32_t>(r.bytes.size()), clock.now())) {
        if (!r.bytes.empty() && r.bytes[0] != 0xF0) ib.local.push_back(r.bytes);
      }
    }
    // What did not cross stays queued, in order (one stream per peer here).
    ia.wan.insert(ia.wan.begin(), q.begin() + static_cast<std::ptrdiff_t>(i), q.end());
    deliver_b();
  }
  void carry_b_to_a(size_t max) {
    std::vector<FakeIo::Record> q;
    q.swap(ib.wan);
    size_t i = 0;
    for (; i < q.size() && i < max; ++i) {
      FakeIo::Record& r = q[i];
      if (!ga.on_wan(peer(r.peer), 20 + r.peer, r.bytes.data(),
                     static_cast<uint32_t>(r.bytes.size()), clock.now())) {
        if (!r.bytes.empty() && r.bytes[0] != 0xF0) ia.local.push_back(r.bytes);
      }
    }
    ib.wan.insert(ib.wan.begin(), q.begin() + static_cast<std::ptrdiff_t>(i), q.end());
    ia.local.clear();  // host A takes its ACKs/NAKs and does nothing with them
  }
  void deliver_b() {
    std::vector<Buf> q;
    q.swap(ib.local);
    for (const Buf& b : q) host_b_receives(b);
  }
  void unblock() {
    gw::PeerState* p = nullptr;
    uint64_t stream = 0;
    for (int n = 0; n < 8 && gb.take_unblocked(&p, &stream); ++n) {
    }
  }
};

/// A RoCEv2 packet built from the input (any opcode the codec can build).
Buf fuzzed_packet(Sim& s, Input& in, bool from_a) {
  roce::FrameSpec f;
  f.with_eth = false;
  f.src = from_a ? s.a_ip : s.b_ip;
  f.dst = from_a ? s.b_ip : s.a_ip;
  f.bth.opcode = in.u8();
  const uint8_t flags = in.u8();
  f.bth.ack_req = (flags & 1) != 0;
  f.bth.se = (flags & 2) != 0;
  f.bth.becn = (flags & 4) != 0;
  // A few QPs (so flows pair and collide), never the witness's.
  const uint8_t q = in.u8();
  f.bth.dest_qp = (q & 0x80) ? in.u24() : 0x100 + (q & 7);
  if (f.bth.dest_qp == kWitnessReqQp || f.bth.dest_qp == kWitnessRspQp) f.bth.dest_qp = 0x100;
  f.bth.psn = (flags & 8) ? in.u24() : roce::psn_add(0x10, in.u8());
  f.reth = {in.u32(), in.u32(), (flags & 16) ? in.u32() : 1024U * (in.u8() % 8)};
  f.aeth = {in.u8(), in.u24()};
  f.deth = {0x80010000, 1};
  f.udp_sport = 0xC000;
  const uint8_t n = in.u8();
  Buf payload((flags & 32) ? 1024U * (1 + n % 4) : n % 64, static_cast<uint8_t>(n));
  f.payload = payload;
  Buf b(4400);
  b.resize(roce::build(f, b));
  return b;
}

/// An RDMA CM MAD (REQ, REP, RTU, DREQ, DREP, REJ) with fuzzed fields.
Buf fuzzed_mad(Sim& s, Input& in, bool from_a) {
  static constexpr uint16_t kAttrs[] = {0x0010, 0x0013, 0x0014, 0x0015, 0x0016, 0x0012};
  Buf mad(256, 0);
  mad[0] = 1;
  mad[1] = 0x07;
  mad[2] = 2;
  mad[3] = 3;
  const uint16_t attr = kAttrs[in.u8() % 6];
  mad[16] = static_cast<uint8_t>(attr >> 8);
  mad[17] = static_cast<uint8_t>(attr);
  for (int i = 24; i < 24 + 64; ++i) mad[i] = (in.u8() & 1) ? in.u8() : 0;
  mad[24 + 3] = in.u8() & 3;  // a few communication IDs
  roce::FrameSpec f;
  f.with_eth = false;
  f.src = from_a ? s.a_ip : s.b_ip;
  f.dst = from_a ? s.b_ip : s.a_ip;
  f.bth.opcode = op::kUdSendOnly;
  f.bth.dest_qp = 1;
  f.deth = {0x80010000, 1};
  f.payload = mad;
  Buf b(512);
  b.resize(roce::build(f, b));
  return b;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Sim s;
  Input in(data, size);
  for (int step = 0; step < 2000 && !in.empty(); ++step) {
    const uint8_t opcode = in.u8();
    switch (opcode % 16) {
      case 0:
      case 1:
        s.host_a_sends(fuzzed_packet(s, in, true), 0);
        break;
      case 2:
      case 3:
        s.host_b_sends(fuzzed_packet(s, in, false), 0);
        break;
      case 4:
        s.host_a_sends(fuzzed_mad(s, in, true), 0);
        break;
      case 5:
        s.host_b_sends(fuzzed_mad(s, in, false), 0);
        break;
      case 6: {  // raw bytes from a host (anything a NIC might emit)
        const Buf raw = in.bytes(200);
        roce::RocePacket p;
        if (roce::parse_ip({raw.data(), raw.size()}, p) == roce::ParseError::kOk &&
            Sim::is_witness(p)) {
          break;
        }
        if (in.u8() & 1) {
          s.host_a_sends(raw, 0);
        } else {
          s.host_b_sends(raw, 0);
        }
        break;
      }
      case 7: {  // a raw WAN record (control records: first byte 0xF0)
        Buf raw = in.bytes(120);
        if (in.u8() & 1 && !raw.empty()) raw[0] = 0xF0;
        roce::RocePacket p;
        if (roce::parse_ip({raw.data(), raw.size()}, p) == roce::ParseError::kOk &&
            Sim::is_witness(p)) {
          break;
        }
        if (in.u8() & 1) {
          s.ia.wan.push_back({0, raw});
        } else {
          s.ib.wan.push_back({0, raw});
        }
        break;
      }
      case 8:
        s.carry_a_to_b(1 + in.u8());
        break;
      case 9:
        s.carry_b_to_a(1 + in.u8());
        break;
      case 10:
        s.clock.advance(Duration::from_us(1 + 97 * static_cast<int64_t>(in.u8())));
        s.ga.poll(s.clock.now());
        s.gb.poll(s.clock.now());
        s.unblock();
        break;
      case 11:
        s.ga.expire(s.clock.now() - Duration::from_ms(in.u8()));
        s.gb.expire(s.clock.now() - Duration::from_ms(in.u8()));
        break;
      case 12: {
        const uint8_t b = in.u8();
        s.ia.room = s.ib.room = (b & 1) == 0;
        s.ia.over = s.ib.over = (b & 2) != 0;
        s.ia.short_room = s.ib.short_room = (b & 4) != 0;
        break;
      }
      case 13:  // peer 0 restarted (seen by either gateway)
        if (in.u8() & 1) {
          s.ga.on_peer_restart(s.peer(0), 0, s.clock.now());
        } else {
          s.gb.on_peer_restart(s.peer(0), 0, s.clock.now());
        }
        break;
      default:
        s.witness_step();
        break;
    }
    if (step % 64 == 0) (void)s.ga.snapshot().size();  // the JSON view of any state
    s.ga.next_timeout();
    s.gb.next_timeout();
  }
  // Drain: whatever is queued crosses, and the witness checks hold to the end.
  s.ia.room = s.ib.room = true;
  for (int i = 0; i < 4; ++i) {
    s.clock.advance(Duration::from_ms(10));
    s.ga.poll(s.clock.now());
    s.gb.poll(s.clock.now());
    s.unblock();
    s.carry_a_to_b(100000);
    s.carry_b_to_a(100000);
  }
  return 0;
}
