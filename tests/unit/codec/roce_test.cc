// RoCEv2 codec: opcode table, PSN arithmetic, build/parse round trips,
// ICRC invariance, and every malformed-input class the parser must reject.
#include "codec/roce.h"

#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <random>
#include <vector>

namespace rowan::roce {
namespace {

FrameSpec base_spec(uint8_t opcode, int ip_version, std::span<const uint8_t> payload) {
  FrameSpec s;
  s.dst_mac = {0x02, 0, 0, 0, 0, 2};
  s.src_mac = {0x02, 0, 0, 0, 0, 1};
  if (ip_version == 4) {
    s.src = parse_ip_addr("198.18.1.10");
    s.dst = parse_ip_addr("198.18.2.10");
  } else {
    s.src = parse_ip_addr("2001:2::10");
    s.dst = parse_ip_addr("2001:2:0:1::10");
  }
  s.bth.opcode = opcode;
  s.bth.dest_qp = 0x123456;
  s.bth.psn = 0xFFFFFE;
  s.bth.ack_req = true;
  s.reth = {0x00007f0012345678ULL, 0xabcdef01, 4096};
  s.aeth = {0x1f, 0x000042};
  s.atomic_eth = {0x1000, 0x77, 5, 9};
  s.atomic_ack = 0x1122334455667788ULL;
  s.immdt = 0xdeadbeef;
  s.ieth = 0x0badf00d;
  s.deth = {0x80010000, 0x000001};
  s.xrc_srq = 0x00abcd;
  s.feth = 0x00000011;
  s.payload = payload;
  return s;
}

std::vector<uint8_t> build_vec(const FrameSpec& s) {
  std::vector<uint8_t> buf(9000);
  const size_t n = build(s, buf);
  buf.resize(n);
  return buf;
}

TEST(Psn, ArithmeticWrapsModulo2To24) {
  EXPECT_EQ(psn_add(0xFFFFFF, 1), 0u);
  EXPECT_EQ(psn_add(0, -1), 0xFFFFFFu);
  EXPECT_EQ(psn_add(5, 0x1000000), 5u);
  EXPECT_EQ(psn_diff(0, 0xFFFFFF), 1);
  EXPECT_EQ(psn_diff(0xFFFFFF, 0), -1);
  EXPECT_EQ(psn_diff(100, 10), 90);
  EXPECT_TRUE(psn_lt(0xFFFFF0, 3));
  EXPECT_FALSE(psn_lt(3, 0xFFFFF0));
  EXPECT_TRUE(psn_le(7, 7));
  EXPECT_EQ(psn_diff(0x800000, 0), 0x800000);  // the half-way point counts as "after"
}

TEST(OpcodeTable, KnownOpcodesAndHeaders) {
  EXPECT_STREQ(opcode_info(op::kRcSendOnly).name, "RC_SEND_ONLY");
  EXPECT_EQ(opcode_info(op::kRcWriteOnlyImm).ext_len, kRethLen + kImmDtLen);
  EXPECT_EQ(opcode_info(op::kRcReadRequest).mask & kHasPayload, 0);
  EXPECT_EQ(opcode_info(op::kRcAtomicAck).ext_len, kAethLen + kAtomicAckEthLen);
  EXPECT_EQ(opcode_info(op::kRcCompareSwap).ext_len, kAtomicEthLen);
  EXPECT_EQ(opcode_info(op::kUdSendOnlyImm).ext_len, kDethLen + kImmDtLen);
  EXPECT_EQ(opcode_info(op::kRcSendOnlyInv).ext_len, kIethLen);
  EXPECT_EQ(opcode_info(op::kCnp).transport, Transport::kCnp);
  EXPECT_EQ(opcode_info(0x2c).name, nullptr);  // UC has no READ
  EXPECT_EQ(opcode_info(0x40).name, nullptr);  // RD is not supported
  EXPECT_EQ(opcode_info(0xff).name, nullptr);
  // IBA 1.5 and XRC.
  EXPECT_STREQ(opcode_info(op::kRcFlush).name, "RC_FLUSH");
  EXPECT_EQ(opcode_info(op::kRcFlush).ext_len, kFethLen + kRethLen);
  EXPECT_EQ(opcode_info(op::kRcAtomicWrite).ext_len, kRethLen);
  EXPECT_NE(opcode_info(op::kRcAtomicWrite).mask & kHasPayload, 0);
  EXPECT_STREQ(opcode_info(0xa4).name, "XRC_SEND_ONLY");
  EXPECT_EQ(opcode_info(0xa4).transport, Transport::kXrc);
  EXPECT_EQ(opcode_info(0xa4).ext_len, kXrcEthLen);
  EXPECT_EQ(opcode_info(0xaa).ext_len, kXrcEthLen + kRethLen);       // RDMA WRITE only
  EXPECT_EQ(opcode_info(0xb4).ext_len, kXrcEthLen + kAtomicEthLen);  // fetch-add
  EXPECT_EQ(opcode_info(0xb1).ext_len, kAethLen);  // XRC ACK: no XRCETH on responses
  EXPECT_EQ(opcode_info(0xb5).name, nullptr);
  int valid = 0;
  for (int i = 0; i < 256; ++i) valid += opcode_info(static_cast<uint8_t>(i)).valid();
  EXPECT_EQ(valid, 23 + 2 + 12 + 2 + 23 + 1);  // RC, RC 1.5, UC, UD, XRC, CNP
}

// The extended headers in wire order: XRCETH right after the BTH, FETH
// before the RETH.
TEST(OpcodeTable, XrcEthAndFethComeFirst) {
  const std::vector<uint8_t> data(8, 0x5a);
  FrameSpec s = base_spec(0xa6, 4, data);  // XRC RDMA WRITE first
  s.xrc_srq = 0x00c0de;
  std::vector<uint8_t> pmtu(256, 1);
  s.payload = pmtu;
  std::vector<uint8_t> f = build_vec(s);
  RocePacket p;
  ASSERT_EQ(parse_ethernet(f, p), ParseError::kOk);
  EXPECT_EQ(p.xrc_srq, 0x00c0deu);
  EXPECT_EQ(f[p.bth_off + kBthLen + 1], 0x00);
  EXPECT_EQ(f[p.bth_off + kBthLen + 2], 0xc0);
  EXPECT_EQ(f[p.bth_off + kBthLen + 4 + 8], 0xab);  // the R_Key's first byte
  EXPECT_EQ(p.payload_off, p.bth_off + kBthLen + kXrcEthLen + kRethLen);

  FrameSpec fl = base_spec(op::kRcFlush, 4, {});
  fl.feth = 0x00000021;
  f = build_vec(fl);
  ASSERT_EQ(parse_ethernet(f, p), ParseError::kOk);
  EXPECT_EQ(p.feth, 0x21u);
  EXPECT_EQ(f[p.bth_off + kBthLen + 3], 0x21);
  EXPECT_EQ(p.reth.rkey, 0xabcdef01u);
  EXPECT_EQ(p.payload_len, 0u);

  FrameSpec aw = base_spec(op::kRcAtomicWrite, 6, data);
  f = build_vec(aw);
  ASSERT_EQ(parse_ethernet(f, p), ParseError::kOk);
  EXPECT_EQ(p.payload_len, 8u);
  EXPECT_TRUE(icrc_ok(p));
}

class RoundTrip : public ::testing::TestWithParam<std::tuple<int, int, bool>> {};

TEST_P(RoundTrip, EveryOpcodeParsesBackToWhatWasBuilt) {
  const auto [opcode_int, ip_version, vlan] = GetParam();
  const auto opcode = static_cast<uint8_t>(opcode_int);
  const OpcodeInfo& info = opcode_info(opcode);
  std::vector<uint8_t> payload(37);
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<uint8_t>(i * 7);
  // FIRST/MIDDLE packets carry a full PMTU: no pad allowed.
  if (info.mask & (kIsFirst | kIsMiddle)) payload.resize(256);
  FrameSpec s = base_spec(opcode, ip_version, payload);
  s.with_vlan = vlan;
  s.vlan_tci = 0x2064;
  std::vector<uint8_t> f = build_vec(s);
  ASSERT_FALSE(f.empty());

  RocePacket p;
  ASSERT_EQ(parse_ethernet(f, p), ParseError::kOk) << info.name;
  EXPECT_EQ(p.has_vlan, vlan);
  EXPECT_EQ(p.src.version, ip_version);
  EXPECT_EQ(p.bth.opcode, opcode);
  EXPECT_EQ(p.bth.dest_qp, 0x123456u);
  EXPECT_EQ(p.bth.psn, 0xFFFFFEu);
  EXPECT_TRUE(p.bth.ack_req);
  EXPECT_EQ(p.udp_dport, kRoceV2Port);
  EXPECT_EQ(p.headers, info.mask);
  if (info.mask & kHasReth) {
    EXPECT_EQ(p.reth.va, 0x00007f0012345678ULL);
    EXPECT_EQ(p.reth.rkey, 0xabcdef01u);
    EXPECT_EQ(p.reth.dma_len, 4096u);
  }
  if (info.mask & kHasAeth) {
    EXPECT_EQ(p.aeth.syndrome, 0x1f);
    EXPECT_EQ(p.aeth.msn, 0x42u);
    EXPECT_EQ(p.aeth.kind(), AethKind::kAck);
  }
  if (info.mask & kHasAtomicEth) {
    EXPECT_EQ(p.atomic_eth.swap_add, 5u);
    EXPECT_EQ(p.atomic_eth.compare, 9u);
  }
  if (info.mask & kHasAtomicAckEth) {
    EXPECT_EQ(p.atomic_ack, 0x1122334455667788ULL);
  }
  if (info.mask & kHasImmDt) {
    EXPECT_EQ(p.immdt, 0xdeadbeefu);
  }
  if (info.mask & kHasIeth) {
    EXPECT_EQ(p.ieth, 0x0badf00du);
  }
  if (info.mask & kHasDeth) {
    EXPECT_EQ(p.deth.qkey, 0x80010000u);
    EXPECT_EQ(p.deth.src_qp, 1u);
  }
  if (info.mask & kHasXrcEth) {
    EXPECT_EQ(p.xrc_srq, 0x00abcdu);
  }
  if (info.mask & kHasFeth) {
    EXPECT_EQ(p.feth, 0x11u);
  }
  if (info.transport == Transport::kCnp) {
    EXPECT_EQ(p.payload_len, kCnpPayloadLen);
  } else if (info.mask & kHasPayload) {
    ASSERT_EQ(p.payload_len, payload.size());
    EXPECT_EQ(std::memcmp(p.payload().data(), payload.data(), payload.size()), 0);
    EXPECT_EQ(p.bth.pad_count, (4 - payload.size() % 4) % 4);
  } else {
    EXPECT_EQ(p.payload_len, 0u);
  }
  EXPECT_TRUE(icrc_ok(p));

  // The same packet without Ethernet parses identically as bare IP.
  const size_t l2 = p.l3_off;
  RocePacket q;
  ASSERT_EQ(parse_ip({f.data() + l2, f.size() - l2}, q), ParseError::kOk);
  EXPECT_EQ(q.bth.psn, p.bth.psn);
  EXPECT_TRUE(icrc_ok(q));
}

std::vector<int> valid_opcodes() {
  std::vector<int> out;
  for (int i = 0; i < 256; ++i) {
    if (opcode_info(static_cast<uint8_t>(i)).valid()) out.push_back(i);
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(AllOpcodes, RoundTrip,
                         ::testing::Combine(::testing::ValuesIn(valid_opcodes()),
                                            ::testing::Values(4, 6), ::testing::Bool()));

TEST(Icrc, VariantFieldsDoNotChangeIt) {
  std::array<uint8_t, 64> data{};
  for (int v : {4, 6}) {
    std::vector<uint8_t> f = build_vec(base_spec(op::kRcSendOnly, v, data));
    RocePacket p;
    ASSERT_EQ(parse_ethernet(f, p), ParseError::kOk);
    const uint32_t before = compute_icrc(p);
    if (v == 4) {
      f[p.l3_off + 1] |= 0x3;    // ECN CE
      f[p.l3_off + 8] -= 1;      // TTL
      f[p.l3_off + 10] ^= 0x5a;  // checksum
    } else {
      f[p.l3_off + 1] |= 0x30;  // traffic class ECN bits
      f[p.l3_off + 7] -= 1;     // hop limit
    }
    f[p.l4_off + 6] ^= 0xff;   // UDP checksum
    f[p.bth_off + 4] |= 0x80;  // FECN
    ASSERT_EQ(parse_ethernet(f, p), ParseError::kOk);
    EXPECT_EQ(compute_icrc(p), before);
    EXPECT_TRUE(icrc_ok(p));
    EXPECT_TRUE(p.bth.fecn);
  }
}

TEST(Icrc, AnyFlippedCoveredBitIsDetected) {
  std::array<uint8_t, 200> data{};
  std::vector<uint8_t> f = build_vec(base_spec(op::kRcWriteOnly, 4, data));
  RocePacket p;
  ASSERT_EQ(parse_ethernet(f, p), ParseError::kOk);
  // Every bit of the BTH (but the masked byte), the extended headers and the payload.
  for (size_t byte = p.bth_off; byte < p.icrc_off; ++byte) {
    if (byte == p.bth_off + 4u || byte == p.bth_off + 1u) continue;  // masked / PadCnt
    for (int bit = 0; bit < 8; ++bit) {
      std::vector<uint8_t> g = f;
      g[byte] ^= static_cast<uint8_t>(1U << bit);
      RocePacket q;
      if (parse_ethernet(g, q) != ParseError::kOk) continue;  // e.g. opcode became invalid
      EXPECT_FALSE(icrc_ok(q)) << "byte " << byte << " bit " << bit;
    }
  }
}

std::vector<uint8_t> valid_frame(uint8_t opcode = op::kRcSendOnly, size_t payload = 16) {
  std::vector<uint8_t> data(payload, 0xab);
  return build_vec(base_spec(opcode, 4, data));
}

TEST(ParseErrors, EveryTruncationIsRejected) {
  for (uint8_t opcode : {op::kRcSendOnly, op::kRcWriteOnlyImm, op::kRcAtomicAck, op::kUdSendOnly,
                         op::kCnp, op::kRcCompareSwap}) {
    for (int v : {4, 6}) {
      std::vector<uint8_t> data(13, 1);
      const std::vector<uint8_t> f = build_vec(base_spec(opcode, v, data));
      for (size_t n = 0; n < f.size(); ++n) {
        // A copy of exactly n bytes, so ASan would see any read past the end.
        std::vector<uint8_t> cut(f.begin(), f.begin() + static_cast<std::ptrdiff_t>(n));
        RocePacket p;
        EXPECT_NE(parse_ethernet(cut, p), ParseError::kOk) << "len " << n;
      }
    }
  }
}

TEST(ParseErrors, UnknownOpcodeInA48ByteFrame) {
  // The 48-byte, opcode 0xff packet that made Linux rxe read out of bounds:
  // Ethernet + IPv4 + UDP + BTH = 54; here a bare IP packet of 48 bytes.
  std::vector<uint8_t> f = valid_frame();
  RocePacket p;
  ASSERT_EQ(parse_ethernet(f, p), ParseError::kOk);
  std::vector<uint8_t> ip(f.begin() + 14, f.begin() + 14 + 48);
  ip[2] = 0;
  ip[3] = 48;  // IPv4 total length
  ip[24] = 0;
  ip[25] = 28;    // UDP length
  ip[28] = 0xff;  // opcode
  EXPECT_EQ(parse_ip(ip, p), ParseError::kUnknownOpcode);
}

TEST(ParseErrors, BadPadCount) {
  std::vector<uint8_t> f = valid_frame(op::kRcSendOnly, 2);  // 2 data + 2 pad
  RocePacket p;
  ASSERT_EQ(parse_ethernet(f, p), ParseError::kOk);
  EXPECT_EQ(p.bth.pad_count, 2);
  // An ACK (no payload) with PadCnt 3.
  std::vector<uint8_t> ack = valid_frame(op::kRcAck);
  ASSERT_EQ(parse_ethernet(ack, p), ParseError::kOk);
  ack[p.bth_off + 1] |= 0x30;
  EXPECT_EQ(parse_ethernet(ack, p), ParseError::kBadPadCount);
  // A MIDDLE packet with a pad.
  std::vector<uint8_t> mid = valid_frame(op::kRcWriteMiddle, 64);
  ASSERT_EQ(parse_ethernet(mid, p), ParseError::kOk);
  mid[p.bth_off + 1] |= 0x10;
  EXPECT_EQ(parse_ethernet(mid, p), ParseError::kBadPadCount);
  // PadCnt larger than the data: SEND_ONLY with zero bytes and PadCnt 3.
  std::vector<uint8_t> empty = valid_frame(op::kRcSendOnly, 0);
  ASSERT_EQ(parse_ethernet(empty, p), ParseError::kOk);
  empty[p.bth_off + 1] |= 0x30;
  EXPECT_EQ(parse_ethernet(empty, p), ParseError::kBadPadCount);
}

TEST(ParseErrors, Ipv4OptionsFragmentsAndPorts) {
  std::vector<uint8_t> f = valid_frame();
  RocePacket p;
  std::vector<uint8_t> g = f;
  g[14] = 0x46;  // IHL 6
  EXPECT_EQ(parse_ethernet(g, p), ParseError::kIpv4Options);
  g = f;
  g[14 + 6] |= 0x20;  // MF
  EXPECT_EQ(parse_ethernet(g, p), ParseError::kIpFragment);
  g = f;
  g[14 + 9] = 6;  // TCP
  EXPECT_EQ(parse_ethernet(g, p), ParseError::kNotUdp);
  g = f;
  g[14 + 20 + 3] = 0x53;  // dst port 4691
  EXPECT_EQ(parse_ethernet(g, p), ParseError::kNotRoceV2);
  g = f;
  g[14 + 20 + 5] += 4;  // UDP length past the IP packet
  EXPECT_EQ(parse_ethernet(g, p), ParseError::kBadUdpLength);
  g = f;
  g[14 + 3] += 200;  // IP total length past the frame
  EXPECT_EQ(parse_ethernet(g, p), ParseError::kBadIpLength);
  g = f;
  g[12] = 0x08;
  g[13] = 0x06;  // ARP
  EXPECT_EQ(parse_ethernet(g, p), ParseError::kNotIp);
  g = f;
  g[14] = 0x75;
  EXPECT_EQ(parse_ethernet(g, p), ParseError::kBadIpVersion);
  g = f;
  g[14 + 28 + 1] |= 0x01;  // TVer 1
  EXPECT_EQ(parse_ethernet(g, p), ParseError::kBadTver);
}

TEST(ParseErrors, Ipv6ExtensionHeaders) {
  std::array<uint8_t, 8> data{};
  std::vector<uint8_t> f = build_vec(base_spec(op::kRcSendOnly, 6, data));
  RocePacket p;
  ASSERT_EQ(parse_ethernet(f, p), ParseError::kOk);
  f[14 + 6] = 0;  // hop-by-hop
  EXPECT_EQ(parse_ethernet(f, p), ParseError::kIpv6ExtHeaders);
  f[14 + 6] = 44;  // fragment
  EXPECT_EQ(parse_ethernet(f, p), ParseError::kIpv6ExtHeaders);
}

TEST(ParseErrors, EthernetTrailerIsIgnored) {
  // Short frames are padded to 60 bytes on the wire; the IP length rules.
  std::vector<uint8_t> f = valid_frame(op::kRcAck);
  f.resize(f.size() + 6, 0);
  RocePacket p;
  ASSERT_EQ(parse_ethernet(f, p), ParseError::kOk);
  EXPECT_TRUE(icrc_ok(p));
}

TEST(ParseErrors, RandomBytesNeverCrash) {
  std::mt19937 rng(42);
  std::vector<uint8_t> f = valid_frame(op::kRcWriteOnlyImm, 64);
  int ok = 0;
  for (int i = 0; i < 20000; ++i) {
    std::vector<uint8_t> g = f;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) g[rng() % g.size()] = static_cast<uint8_t>(rng());
    g.resize(rng() % (g.size() + 1));
    RocePacket p;
    if (parse_ethernet(g, p) == ParseError::kOk) {
      ++ok;
      ASSERT_LE(p.payload_off + p.payload_len, g.size());
      ASSERT_LE(p.icrc_off + kIcrcLen, g.size());
      (void)compute_icrc(p);
    }
  }
  EXPECT_GT(ok, 0);
}

TEST(Build, RejectsInvalidOpcodeAndSmallBuffer) {
  std::array<uint8_t, 8> data{};
  FrameSpec s = base_spec(0xff, 4, data);
  std::vector<uint8_t> buf(256);
  EXPECT_EQ(build(s, buf), 0u);
  s.bth.opcode = op::kRcSendOnly;
  std::vector<uint8_t> tiny(40);
  EXPECT_EQ(build(s, tiny), 0u);
  s.dst = parse_ip_addr("2001:2::1");  // mixed versions
  EXPECT_EQ(build(s, buf), 0u);
}

}  // namespace
}  // namespace rowan::roce
