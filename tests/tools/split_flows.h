// The gateway's flow table as the split engine's fakes give it
// (SplitIo::find_flow / open_flow, and the classifier's flow for each packet
// a host sends): a real FlowTable keyed as worker.cc keys RoCEv2, so every
// QP direction has its own flow entry and its own split slots.
#pragma once

#include <cstdint>
#include <span>

#include "datapath/flow_table.h"

namespace rowan::test {

class SplitFlows {
 public:
  explicit SplitFlows(uint32_t capacity) : table_(capacity) {}

  gw::Flow* find(const gw::FlowKey& k) noexcept { return table_.find(k); }
  /// The flow for `k`, created on `peer` when absent (nullptr when full).
  gw::Flow* open(const gw::FlowKey& k, uint32_t peer, TimePoint now) noexcept {
    bool created = false;
    gw::Flow* f = table_.find_or_add(k, now, &created);
    if (f != nullptr && created) f->peer = peer;
    return f;
  }
  /// The flow the classifier gives the RoCEv2 packet `ip`: its addresses and
  /// destination QP (nullptr when it is no RoCEv2 packet or the table is full).
  gw::Flow* classify(std::span<const uint8_t> ip, uint32_t peer, TimePoint now) noexcept {
    roce::RocePacket p;
    if (roce::parse_ip(ip, p) != roce::ParseError::kOk) return nullptr;
    return open(roce_key(p.src, p.dst, p.bth.dest_qp), peer, now);
  }
  static gw::FlowKey roce_key(const roce::IpAddr& src, const roce::IpAddr& dst, uint32_t qp) {
    gw::FlowKey k;
    k.src.version = src.version;
    k.dst.version = dst.version;
    const size_t n = src.version == 6 ? 16 : 4;
    for (size_t i = 0; i < n; ++i) {
      k.src.bytes[i] = src.bytes[i];
      k.dst.bytes[i] = dst.bytes[i];
    }
    k.qp = qp;
    k.proto = 17;
    k.kind = gw::FlowKind::kRoce;
    return k;
  }
  gw::FlowTable& table() noexcept { return table_; }

 private:
  gw::FlowTable table_;
};

/// A bare-IP RC ACK/NAK from `src` to `dst`'s QP `qp` (AETH `syndrome`, `msn`).
inline roce::FrameSpec aeth_spec(const roce::IpAddr& src, const roce::IpAddr& dst, uint32_t qp,
                                 uint32_t psn, uint8_t syndrome, uint32_t msn) {
  roce::FrameSpec s;
  s.with_eth = false;
  s.src = src;
  s.dst = dst;
  s.bth.opcode = roce::op::kRcAck;
  s.bth.dest_qp = qp;
  s.bth.psn = psn & roce::kPsnMask;
  s.aeth.syndrome = syndrome;
  s.aeth.msn = msn;
  return s;
}

}  // namespace rowan::test
