// Cross-checks the codec against an independent implementation, scapy's
// scapy.contrib.roce (IPv4 only), in both directions:
//  - frames scapy built decode to the fields and ICRC scapy put in them;
//  - frames rowan built carry the ICRC scapy computes for them.
#include <gtest/gtest.h>
#include <pcap/pcap.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "codec/roce.h"
#include "decode.h"
#include "tools/paths.h"

namespace rowan::roce {
namespace {

const char* kPython = "/usr/bin/python3";  // Debian's, which has python3-scapy

std::string script() { return test::source_dir() + "/tests/unit/codec/scapy_vectors.py"; }

std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "rowan_" + std::to_string(getpid()) + "_" + name;
}

void require_scapy() {
  if (std::system((std::string(kPython) + " -c 'import scapy.contrib.roce' 2>/dev/null").c_str()) !=
      0) {
    GTEST_FAIL() << "python3-scapy is missing: run scripts/setup-deps";
  }
}

struct PcapCloser {
  void operator()(pcap_t* p) const { pcap_close(p); }
};

TEST(ScapyCrossCheck, FramesScapyBuiltDecodeToItsFields) {
  require_scapy();
  const std::string pcap = temp_path("scapy.pcap");
  const std::string expect = temp_path("scapy.json");
  const std::string cmd = std::string(kPython) + " " + script() + " generate " + pcap + " " +
                          expect + " --count 500 --seed 7";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;

  std::ifstream in(expect);
  const nlohmann::json want = nlohmann::json::parse(in);
  char errbuf[PCAP_ERRBUF_SIZE];
  std::unique_ptr<pcap_t, PcapCloser> pc(pcap_open_offline(pcap.c_str(), errbuf));
  ASSERT_TRUE(pc) << errbuf;
  pcap_pkthdr* hdr = nullptr;
  const u_char* bytes = nullptr;
  size_t i = 0;
  while (pcap_next_ex(pc.get(), &hdr, &bytes) == 1) {
    ASSERT_LT(i, want.size());
    const auto got = ctl::decode_frame(i + 1, pcap_datalink(pc.get()), {bytes, hdr->caplen});
    const auto& w = want[i];
    ASSERT_TRUE(got["ok"].get<bool>()) << "frame " << i + 1 << ": " << got.dump();
    for (const char* key : {"opcode", "dest_qp", "psn", "ack_req", "se", "fecn", "becn", "pad",
                            "payload_len", "icrc", "src", "dst"}) {
      EXPECT_EQ(got[key].dump(), w[key].dump()) << "frame " << i + 1 << " field " << key;
    }
    EXPECT_TRUE(got["icrc_ok"].get<bool>()) << "frame " << i + 1;
    ++i;
  }
  EXPECT_EQ(i, want.size());
  std::remove(pcap.c_str());
  std::remove(expect.c_str());
}

TEST(ScapyCrossCheck, FramesRowanBuiltCarryScapysIcrc) {
  require_scapy();
  const std::string pcap = temp_path("rowan.pcap");
  std::unique_ptr<pcap_t, PcapCloser> dead(pcap_open_dead(DLT_EN10MB, 65535));
  pcap_dumper_t* dump = pcap_dump_open(dead.get(), pcap.c_str());
  ASSERT_NE(dump, nullptr);
  std::mt19937 rng(11);  // 32-bit results
  auto r32 = [&rng] { return static_cast<uint32_t>(rng()); };
  std::vector<uint8_t> payload(600);
  std::vector<uint8_t> buf(2048);
  int built = 0;
  for (int opcode = 0; opcode < 256; ++opcode) {
    const OpcodeInfo& info = opcode_info(static_cast<uint8_t>(opcode));
    if (!info.valid()) continue;
    for (int k = 0; k < 4; ++k) {
      FrameSpec s;
      s.src = parse_ip_addr("198.18.1.10");
      s.dst = parse_ip_addr("198.18.2.10");
      s.tos = static_cast<uint8_t>(rng());
      s.ttl = static_cast<uint8_t>(1 + rng() % 255);
      s.with_vlan = k == 3;
      s.vlan_tci = 100;
      s.udp_sport = static_cast<uint16_t>(49152 + rng() % 16384);
      s.bth.opcode = static_cast<uint8_t>(opcode);
      s.bth.dest_qp = r32() & 0xFFFFFF;
      s.bth.psn = r32() & 0xFFFFFF;
      s.bth.ack_req = (rng() & 1) != 0;
      s.bth.becn = (rng() & 1) != 0;
      s.reth = {rng(), r32(), r32()};
      s.aeth = {static_cast<uint8_t>(rng()), r32() & 0xFFFFFF};
      s.immdt = r32();
      for (auto& b : payload) b = static_cast<uint8_t>(rng());
      size_t len = (info.mask & (kIsFirst | kIsMiddle)) ? 256 : rng() % payload.size();
      s.payload = {payload.data(), len};
      const size_t n = build(s, buf);
      ASSERT_GT(n, 0u);
      pcap_pkthdr h{};
      h.caplen = h.len = static_cast<bpf_u_int32>(n);
      pcap_dump(reinterpret_cast<u_char*>(dump), &h, buf.data());
      ++built;
    }
  }
  pcap_dump_close(dump);
  const std::string cmd = std::string(kPython) + " " + script() + " verify " + pcap;
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  EXPECT_EQ(built, 63 * 4);  // every valid opcode (RC with IBA 1.5, UC, UD, XRC, CNP), 4 variants
  std::remove(pcap.c_str());
}

}  // namespace
}  // namespace rowan::roce
