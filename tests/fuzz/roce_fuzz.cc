// libFuzzer target for the RoCEv2 parser (Ethernet and bare IP), the ICRC
// and the decoder behind `rowanctl decode`. Properties checked beyond "no
// crash, no out-of-bounds read" (ASan/UBSan):
//  - every offset a successful parse reports lies inside the input;
//  - a parsed packet rebuilt from its decoded fields parses back to the same
//    fields with a correct ICRC.
#include <pcap/dlt.h>

#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>

#include "codec/roce.h"
#include "decode.h"

namespace {

using namespace rowan::roce;

void check_rebuild(const RocePacket& p) {
  FrameSpec s;
  s.with_eth = p.has_eth;
  s.with_vlan = p.has_vlan;
  s.vlan_tci = p.vlan_tci;
  s.src = p.src;
  s.dst = p.dst;
  s.ttl = p.ttl;
  s.tos = p.tos;
  s.udp_sport = p.udp_sport;
  s.bth = p.bth;
  s.reth = p.reth;
  s.aeth = p.aeth;
  s.atomic_eth = p.atomic_eth;
  s.atomic_ack = p.atomic_ack;
  s.immdt = p.immdt;
  s.ieth = p.ieth;
  s.deth = p.deth;
  s.payload = p.payload();
  static std::array<uint8_t, 70000> buf;
  const size_t n = build(s, buf);
  // A FIRST/MIDDLE packet with an unaligned length cannot be rebuilt unpadded.
  if (n == 0) return;
  RocePacket q;
  const ParseError e =
      p.has_eth ? parse_ethernet({buf.data(), n}, q) : parse_ip({buf.data(), n}, q);
  if (e == ParseError::kBadPadCount) return;  // same reason as above
  if (e != ParseError::kOk || !icrc_ok(q) || q.bth.psn != p.bth.psn ||
      q.bth.dest_qp != p.bth.dest_qp || q.bth.opcode != p.bth.opcode ||
      q.payload_len != p.payload_len ||
      std::memcmp(q.payload().data(), p.payload().data(), p.payload_len) != 0) {
    std::abort();
  }
}

void check(std::span<const uint8_t> in, bool eth) {
  RocePacket p;
  const ParseError e = eth ? parse_ethernet(in, p) : parse_ip(in, p);
  if (e != ParseError::kOk) return;
  if (p.payload_off + p.payload_len > in.size() || p.icrc_off + kIcrcLen > in.size() ||
      p.len > in.size()) {
    std::abort();
  }
  (void)compute_icrc(p);
  check_rebuild(p);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> in(data, size);
  check(in, true);
  check(in, false);
  (void)rowan::ctl::decode_frame(1, DLT_EN10MB, in);
  return 0;
}
