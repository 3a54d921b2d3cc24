#include "decode.h"

#include <pcap/pcap.h>

#include <cinttypes>
#include <cstdio>
#include <memory>

#include <fmt/format.h>

#include "codec/bytes.h"
#include "codec/ethertypes.h"
#include "codec/roce.h"

namespace rowan::ctl {
namespace {

constexpr int kExitNoInput = 66;  // EX_NOINPUT

constexpr int kDltEthernet = 1;
constexpr int kDltRaw = 12;        // DLT_RAW on Linux
constexpr int kLinktypeRaw = 101;  // LINKTYPE_RAW as stored in files
constexpr int kDltIpv4 = 228;
constexpr int kDltIpv6 = 229;
constexpr int kDltLinuxSll = 113;
constexpr int kDltLinuxSll2 = 276;

std::string hex32(uint32_t v) { return fmt::format("0x{:08x}", v); }

// Finds the start of the IP packet in a cooked capture; false if not IP.
bool skip_cooked(int linktype, std::span<const uint8_t>& bytes) {
  size_t hdr = linktype == kDltLinuxSll ? 16 : 20;
  if (bytes.size() < hdr) return false;
  const uint16_t proto =
      linktype == kDltLinuxSll ? wire::load_be16(bytes.data() + 14) : wire::load_be16(bytes.data());
  if (proto != kEtherTypeIpv4 && proto != kEtherTypeIpv6) return false;
  bytes = bytes.subspan(hdr);
  return true;
}

}  // namespace

nlohmann::ordered_json decode_frame(uint64_t frame_no, int linktype,
                                    std::span<const uint8_t> bytes) {
  nlohmann::ordered_json j;
  j["frame"] = frame_no;
  roce::RocePacket p;
  roce::ParseError e = roce::ParseError::kOk;
  switch (linktype) {
    case kDltEthernet:
      e = roce::parse_ethernet(bytes, p);
      break;
    case kDltRaw:
    case kLinktypeRaw:
    case kDltIpv4:
    case kDltIpv6:
      e = roce::parse_ip(bytes, p);
      break;
    case kDltLinuxSll:
    case kDltLinuxSll2:
      e = skip_cooked(linktype, bytes) ? roce::parse_ip(bytes, p) : roce::ParseError::kNotIp;
      break;
    default:
      j["ok"] = false;
      j["error"] = fmt::format("unsupported link type {}", linktype);
      return j;
  }
  if (e != roce::ParseError::kOk) {
    j["ok"] = false;
    j["error"] = std::string(roce::to_string(e));
    if (p.src.version != 0) {
      j["ip_version"] = p.src.version;
      j["src"] = roce::to_string(p.src);
      j["dst"] = roce::to_string(p.dst);
    }
    if (e == roce::ParseError::kUnknownOpcode) j["opcode"] = p.bth.opcode;
    return j;
  }
  const roce::OpcodeInfo& info = roce::opcode_info(p.bth.opcode);
  j["ok"] = true;
  j["ip_version"] = p.src.version;
  j["src"] = roce::to_string(p.src);
  j["dst"] = roce::to_string(p.dst);
  if (p.has_vlan) j["vlan"] = p.vlan_tci & 0x0FFF;
  j["ecn"] = p.ecn();
  j["udp_sport"] = p.udp_sport;
  j["opcode"] = p.bth.opcode;
  j["opcode_name"] = info.name;
  j["dest_qp"] = p.bth.dest_qp;
  j["psn"] = p.bth.psn;
  j["ack_req"] = p.bth.ack_req;
  j["se"] = p.bth.se;
  j["fecn"] = p.bth.fecn;
  j["becn"] = p.bth.becn;
  j["pad"] = p.bth.pad_count;
  j["pkey"] = p.bth.pkey;
  if (p.has(roce::kHasReth)) {
    j["reth"] = {{"va", p.reth.va}, {"rkey", p.reth.rkey}, {"dma_len", p.reth.dma_len}};
  }
  if (p.has(roce::kHasAeth)) j["aeth"] = {{"syndrome", p.aeth.syndrome}, {"msn", p.aeth.msn}};
  if (p.has(roce::kHasImmDt)) j["immdt"] = p.immdt;
  if (p.has(roce::kHasIeth)) j["ieth"] = p.ieth;
  if (p.has(roce::kHasDeth)) j["deth"] = {{"qkey", p.deth.qkey}, {"src_qp", p.deth.src_qp}};
  if (p.has(roce::kHasAtomicEth)) {
    j["atomic_eth"] = {{"va", p.atomic_eth.va},
                       {"rkey", p.atomic_eth.rkey},
                       {"swap_add", p.atomic_eth.swap_add},
                       {"compare", p.atomic_eth.compare}};
  }
  if (p.has(roce::kHasAtomicAckEth)) j["atomic_ack"] = p.atomic_ack;
  if (p.has(roce::kHasXrcEth)) j["xrc_srq"] = p.xrc_srq;
  if (p.has(roce::kHasFeth)) j["feth"] = p.feth;
  j["payload_len"] = p.payload_len;
  // As Wireshark shows it: the four ICRC bytes in wire order.
  j["icrc"] = hex32(__builtin_bswap32(p.icrc));
  j["icrc_ok"] = roce::icrc_ok(p);
  return j;
}

namespace {

std::string table_row(const nlohmann::ordered_json& j) {
  if (!j["ok"].get<bool>()) {
    return fmt::format("{:>6}  {}", j["frame"].get<uint64_t>(),
                       "! " + j["error"].get<std::string>());
  }
  std::string flags;
  flags += j["ack_req"].get<bool>() ? 'A' : '-';
  flags += j["se"].get<bool>() ? 'S' : '-';
  flags += j["fecn"].get<bool>() ? 'F' : '-';
  flags += j["becn"].get<bool>() ? 'B' : '-';
  std::string ext;
  if (j.contains("reth")) {
    ext += fmt::format("va=0x{:x} rkey=0x{:x} len={} ", j["reth"]["va"].get<uint64_t>(),
                       j["reth"]["rkey"].get<uint32_t>(), j["reth"]["dma_len"].get<uint32_t>());
  }
  if (j.contains("aeth")) {
    ext += fmt::format("syn=0x{:02x} msn={} ", j["aeth"]["syndrome"].get<uint32_t>(),
                       j["aeth"]["msn"].get<uint32_t>());
  }
  if (j.contains("deth")) {
    ext += fmt::format("qkey=0x{:x} srcqp={} ", j["deth"]["qkey"].get<uint32_t>(),
                       j["deth"]["src_qp"].get<uint32_t>());
  }
  if (j.contains("immdt")) ext += fmt::format("imm=0x{:x} ", j["immdt"].get<uint32_t>());
  if (j.contains("ieth")) ext += fmt::format("inv=0x{:x} ", j["ieth"].get<uint32_t>());
  if (ext.empty()) ext = "-";
  return fmt::format(
      "{:>6}  {:<15} {:<15} {:<34} {:>8} {:>8}  {}  {:>5}  {}  {}", j["frame"].get<uint64_t>(),
      j["src"].get<std::string>(), j["dst"].get<std::string>(), j["opcode_name"].get<std::string>(),
      j["dest_qp"].get<uint32_t>(), j["psn"].get<uint32_t>(), flags,
      j["payload_len"].get<uint32_t>(), j["icrc_ok"].get<bool>() ? "ok " : "BAD", ext);
}

struct PcapCloser {
  void operator()(pcap_t* p) const { pcap_close(p); }
};

}  // namespace

int run_decode(const std::string& path, bool json, std::ostream& out, std::ostream& err) {
  char errbuf[PCAP_ERRBUF_SIZE] = {};
  std::unique_ptr<pcap_t, PcapCloser> pc(pcap_open_offline(path.c_str(), errbuf));
  if (!pc) {
    err << "rowanctl decode: " << path << ": " << errbuf << "\n";
    return kExitNoInput;
  }
  const int linktype = pcap_datalink(pc.get());
  if (!json) {
    out << fmt::format("{:>6}  {:<15} {:<15} {:<34} {:>8} {:>8}  {}  {:>5}  {}  {}\n", "FRAME",
                       "SRC", "DST", "OPCODE", "DEST_QP", "PSN", "ASFB", "LEN", "ICRC", "HEADERS");
  }
  uint64_t n = 0;
  uint64_t ok = 0;
  uint64_t bad_icrc = 0;
  pcap_pkthdr* hdr = nullptr;
  const u_char* bytes = nullptr;
  int rc = 0;
  while ((rc = pcap_next_ex(pc.get(), &hdr, &bytes)) == 1) {
    ++n;
    nlohmann::ordered_json j = decode_frame(n, linktype, {bytes, hdr->caplen});
    if (j["ok"].get<bool>()) {
      ++ok;
      if (!j["icrc_ok"].get<bool>()) ++bad_icrc;
    }
    out << (json ? j.dump() : table_row(j)) << "\n";
  }
  if (rc == PCAP_ERROR) {
    err << "rowanctl decode: " << path << ": " << pcap_geterr(pc.get()) << " after frame " << n
        << "\n";
  }
  if (!json) {
    out << fmt::format("{} frames, {} RoCEv2, {} with a bad ICRC\n", n, ok, bad_icrc);
  }
  return 0;
}

}  // namespace rowan::ctl
