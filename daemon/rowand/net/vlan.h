// 802.1Q tags on the site port (docs/gateway.md "VLAN tags and priorities"):
// what a site frame's Ethernet header says, how a frame's tag crosses the
// WAN, and which tag a frame delivered to the site gets.
//
// - A site frame may carry one 802.1Q tag (TPID 0x8100; its PCP is the PFC
//   priority). Two tags (an 802.1ad service tag 0x88A8 outside, or a second
//   0x8100 inside) and a tag cut short are dropped under reasons of their own.
// - Across the WAN, a packet that came tagged travels as a tagged record:
//   F1 | flags (0) | TCI (2, big-endian) | IP packet. 0xF1 is no IP version
//   nibble (like split mode's 0xF0 control records), so a gateway without
//   this format counts the record as `bad_record` instead of misreading it;
//   untagged packets keep the plain record (unchanged wire format).
// - The gateway that delivers a packet to its site tags it by its policy
//   (VlanPolicy: [[route]] vlan, else [local] vlan): by default as the
//   sender's frame was (its VID and PCP; untagged stays untagged).
//
// Threading: pure functions; any thread.
#pragma once

#include <cstdint>

#include "codec/bytes.h"

namespace rowan::gw {

inline constexpr uint16_t kTpidVlan = 0x8100;  ///< IEEE 802.1Q customer tag
inline constexpr uint16_t kTpidQinQ = 0x88A8;  ///< IEEE 802.1ad service tag
inline constexpr uint32_t kVlanTagBytes = 4;

/// An 802.1Q tag (or none): TCI = PCP(3) | DEI(1) | VID(12).
struct VlanTag {
  uint16_t tci = 0;
  bool present = false;
  uint8_t pcp() const noexcept { return static_cast<uint8_t>(tci >> 13); }
  uint16_t vid() const noexcept { return tci & 0x0FFF; }
  static VlanTag make(uint8_t pcp, uint16_t vid) noexcept {
    return {static_cast<uint16_t>((pcp & 7U) << 13 | (vid & 0x0FFFU)), true};
  }
  bool operator==(const VlanTag&) const = default;
};

/// What the Ethernet header of a site frame says.
enum class L2Verdict : uint8_t {
  kOk,         ///< untagged or one 802.1Q tag
  kTruncated,  ///< a tag (TPID 0x8100/0x88A8) without room for it and an ethertype
  kStacked,    ///< two tags, or an 802.1ad service tag
};
struct L2Header {
  uint16_t type = 0;     ///< the ethertype after the tag, if any
  uint32_t l3_off = 14;  ///< where the payload starts
  VlanTag tag;
};

/// Reads the Ethernet header of the `len`-byte frame at `eth` (len >= 14).
inline L2Verdict parse_l2(const uint8_t* eth, uint32_t len, L2Header& out) noexcept {
  const uint16_t tpid = wire::load_be16(eth + 12);
  out = L2Header{tpid, 14, {}};
  if (tpid != kTpidVlan && tpid != kTpidQinQ) return L2Verdict::kOk;
  if (len < 14 + kVlanTagBytes) return L2Verdict::kTruncated;
  const uint16_t inner = wire::load_be16(eth + 16);
  if (tpid == kTpidQinQ || inner == kTpidVlan || inner == kTpidQinQ) return L2Verdict::kStacked;
  out.type = inner;
  out.l3_off = 14 + kVlanTagBytes;
  out.tag = {wire::load_be16(eth + 14), true};
  return L2Verdict::kOk;
}

/// Which tag the site's hosts get on a packet from the WAN.
struct VlanPolicy {
  enum class Mode : uint8_t {
    kSender,    ///< as the sender's frame was: its VID and PCP, or no tag
    kUntagged,  ///< never a tag (the DSCP still says the class)
    kVid,       ///< always VID `vid`: the sender's PCP, or DSCP >> 3 when it had none
  };
  Mode mode = Mode::kSender;
  uint16_t vid = 0;
  bool operator==(const VlanPolicy&) const = default;
};

/// The tag a packet whose sender's frame had `sender` (and whose IP header
/// says `dscp`) gets toward this site's host under `policy`.
inline VlanTag site_tag(const VlanTag& sender, const VlanPolicy& policy, uint8_t dscp) noexcept {
  switch (policy.mode) {
    case VlanPolicy::Mode::kSender:
      return sender;
    case VlanPolicy::Mode::kUntagged:
      return {};
    case VlanPolicy::Mode::kVid:
      break;
  }
  const uint8_t pcp = sender.present ? sender.pcp() : static_cast<uint8_t>(dscp >> 3);
  return VlanTag::make(pcp, policy.vid);
}

/// The DSCP of the IP packet at `ip` (IPv4 or IPv6 header).
inline uint8_t ip_dscp(const uint8_t* ip) noexcept {
  if ((ip[0] >> 4) == 4) return static_cast<uint8_t>(ip[1] >> 2);
  return static_cast<uint8_t>(((ip[0] & 0x0F) << 2) | (ip[1] >> 6));
}

/// The tagged-record header (see above).
inline constexpr uint8_t kTaggedRecord = 0xF1;
inline constexpr uint32_t kTaggedRecordHeader = 4;
inline void put_tagged_header(uint8_t* rec, const VlanTag& tag) noexcept {
  rec[0] = kTaggedRecord;
  rec[1] = 0;
  wire::store_be16(rec + 2, tag.tci);
}
/// The tag of the record at `rec` (`len` bytes) when it is a tagged record
/// with a packet after its header (flags other than 0: not one this
/// gateway knows, so not a tagged record).
inline bool read_tagged_header(const uint8_t* rec, uint32_t len, VlanTag* tag) noexcept {
  if (len <= kTaggedRecordHeader || rec[0] != kTaggedRecord || rec[1] != 0) return false;
  *tag = {wire::load_be16(rec + 2), true};
  return true;
}

}  // namespace rowan::gw
