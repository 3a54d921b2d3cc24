// rowand's config parser, one reader per section ([eal], [local], [wan],
// [[peer]], [[route]], [cc], [control], [metrics], [log]): each reads its
// table's keys, checks each value on its own, and reports what it does not know.
#include <sched.h>

#include <algorithm>
#include <cctype>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include <toml++/toml.h>

#include "config/config_parse.h"
#include "crypto/keys.h"
#include "registry.h"

namespace rowan::gw::config_parse {

// DPDK's --lcores syntax: "lcores[@cpus]" groups separated by ',', where a
// set is a number, a range "a-b", or a parenthesised list of those
// ("1,2@(5-7),(3-5)@(0,2)"). Returns the problem, or "" when it is valid:
// well-formed, lcore ids below DPDK's RTE_MAX_LCORE (128), no lcore twice, and
// every CPU one this process may run on.
std::string check_lcores(const std::string& text) {
  constexpr unsigned kMaxLcore = 128;
  static const char* const kSyntax =
      "is not an EAL core list (e.g. \"0\", \"0-2\", \"1@0\", \"(0,1)@2\")";
  size_t i = 0;
  auto number = [&](unsigned& v) {
    const size_t start = i;
    v = 0;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9' && i - start < 5) {
      v = v * 10 + static_cast<unsigned>(text[i++] - '0');
    }
    return i > start && !(i < text.size() && text[i] >= '0' && text[i] <= '9');
  };
  auto item = [&](std::set<unsigned>& out) {
    unsigned lo = 0, hi = 0;
    if (!number(lo)) return false;
    hi = lo;
    if (i < text.size() && text[i] == '-') {
      ++i;
      if (!number(hi) || hi < lo) return false;
    }
    for (unsigned v = lo; v <= hi; ++v) out.insert(v);
    return true;
  };
  auto group = [&](std::set<unsigned>& out) {
    if (i < text.size() && text[i] == '(') {
      ++i;
      while (true) {
        if (!item(out)) return false;
        if (i < text.size() && text[i] == ',') {
          ++i;
          continue;
        }
        break;
      }
      if (i >= text.size() || text[i] != ')') return false;
      ++i;
      return true;
    }
    return item(out);
  };
  std::set<unsigned> lcores_seen;
  std::set<unsigned> cpus_used;
  while (true) {
    std::set<unsigned> lcores;
    if (!group(lcores)) return kSyntax;
    std::set<unsigned> cpus = lcores;
    if (i < text.size() && text[i] == '@') {
      ++i;
      cpus.clear();
      if (!group(cpus)) return kSyntax;
    }
    for (unsigned l : lcores) {
      if (l >= kMaxLcore)
        return fmt::format("lcore {} is not below DPDK's limit of {}", l, kMaxLcore);
      if (!lcores_seen.insert(l).second) return fmt::format("lcore {} is given twice", l);
    }
    cpus_used.insert(cpus.begin(), cpus.end());
    if (i == text.size()) break;
    if (text[i] != ',') return kSyntax;
    ++i;
  }
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (::sched_getaffinity(0, sizeof allowed, &allowed) != 0) return {};
  std::string avail;
  for (unsigned c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &allowed))
      fmt::format_to(std::back_inserter(avail), "{}{}", avail.empty() ? "" : ",", c);
  }
  for (unsigned c : cpus_used) {
    if (c >= CPU_SETSIZE || !CPU_ISSET(c, &allowed)) {
      return fmt::format("CPU {} is not available to this process (available: {})", c, avail);
    }
  }
  return {};
}

void read_eal(TableReader& root, EalConfig& eal, Errors& errors) {
  const toml::table* t = root.table("eal");
  if (t == nullptr) return;
  TableReader r(t, "eal.", errors);
  const toml::node* n = nullptr;
  if (const std::string* s = r.string_node("lcores", &n)) {
    if (std::string problem = check_lcores(*s); problem.empty()) {
      eal.lcores = *s;
    } else {
      r.error(n, "lcores", fmt::format("{}: {}", quote_text(*s), problem));
    }
  }
  if (const std::string* s = r.string_node("file_prefix", &n)) {
    if (!s->empty() && !valid_name(*s)) {
      r.error(n, "file_prefix",
              fmt::format("{} must be 1-32 letters, digits, '_', '-' or '.'", quote_text(*s)));
    } else {
      eal.file_prefix = *s;
    }
  }
  if (const std::string* s = r.string_node("huge_dir", &n)) {
    if (!s->empty() && (s->front() != '/' || has_nul(*s))) {
      r.error(n, "huge_dir", fmt::format("{} must be an absolute path", quote_text(*s)));
    } else {
      eal.huge_dir = *s;
    }
  }
  r.boolean("no_huge", eal.no_huge);
  r.boolean("in_memory", eal.in_memory);
  r.integer("memory_mb", eal.memory_mb, 0, 1 << 22);
  if (eal.no_huge && eal.in_memory) {
    errors.add(r.pos(), "eal: no_huge and in_memory cannot both be set (DPDK rejects the pair)");
  }
  if (const toml::node* x = r.get("extra_args")) {
    if (!x->is_array()) {
      r.wrong_type(*x, "extra_args", "an array of strings");
    } else {
      static const std::map<std::string, std::string> kManaged = {{"-l", "lcores"},
                                                                  {"--lcores", "lcores"},
                                                                  {"-c", "lcores"},
                                                                  {"--file-prefix", "file_prefix"},
                                                                  {"--huge-dir", "huge_dir"},
                                                                  {"--no-huge", "no_huge"},
                                                                  {"--in-memory", "in_memory"},
                                                                  {"-m", "memory_mb"}};
      for (const toml::node& e : *x->as_array()) {
        if (!e.is_string()) {
          r.wrong_type(e, "extra_args", "a string in the array");
          continue;
        }
        const std::string& a = e.as_string()->get();
        const std::string opt = a.substr(0, a.find('='));
        if (auto it = kManaged.find(opt); it != kManaged.end()) {
          r.error(&e, "extra_args",
                  fmt::format("{} is set with eal.{} instead", quote_text(opt), it->second));
          continue;
        }
        if (has_nul(a)) {
          r.error(&e, "extra_args", "contains a NUL character");
          continue;
        }
        eal.extra_args.push_back(a);
      }
    }
  }
  r.finish();
}

namespace {

// `vlan`: "sender" (as the sender's frame was tagged), "untagged", or a VID
// 1..4094 (vlan.h VlanPolicy). Returns whether the key was there and valid.
bool read_vlan(TableReader& r, VlanPolicy& out) {
  const toml::node* n = r.get("vlan");
  if (n == nullptr) return false;
  if (n->is_integer()) {
    const int64_t v = n->as_integer()->get();
    if (v < 1 || v > 4094) {
      r.error(n, "vlan", fmt::format("{} is not a VLAN ID (1..4094)", v));
      return false;
    }
    out = {VlanPolicy::Mode::kVid, static_cast<uint16_t>(v)};
    return true;
  }
  if (n->is_string() && n->as_string()->get() == "sender") {
    out = {VlanPolicy::Mode::kSender, 0};
    return true;
  }
  if (n->is_string() && n->as_string()->get() == "untagged") {
    out = {VlanPolicy::Mode::kUntagged, 0};
    return true;
  }
  r.error(n, "vlan",
          fmt::format("{} is not a VLAN ID (1..4094), \"sender\" or \"untagged\"",
                      n->is_string() ? quote_text(n->as_string()->get()) : type_name(*n)));
  return false;
}

}  // namespace

void read_local(TableReader& root, LocalConfig& local, Errors& errors) {
  const toml::table* t = root.table("local");
  if (t == nullptr) {
    if (root.get("local") == nullptr) {
      errors.add(Pos{}, "missing [local] table (device and address are required)");
    }
    return;
  }
  TableReader r(t, "local.", errors);
  r.require("device");
  r.require("address");
  const toml::node* n = nullptr;
  if (const std::string* s = r.string_node("device", &n)) {
    if (s->empty() || has_nul(*s)) {
      r.error(n, "device",
              "must be a PCI address or a vdev spec (e.g. \"net_af_packet0,iface=lan0\")");
    } else {
      local.device = *s;
    }
  }
  r.ip("address", local.address);
  const unsigned max = local.address.version == 6 ? 128 : 32;
  r.integer("prefix_len", local.prefix_len, 1, max);
  r.ip("address6", local.address6);
  if (local.address6.version == 4 || (local.address6.version == 6 && max == 128)) {
    r.error(r.get("address6"), "address6",
            "must be an IPv6 address next to an IPv4 local.address (a dual-stack site)");
    local.address6 = {};
  }
  r.integer("prefix_len6", local.prefix_len6, 1, 128);
  if (const std::string* s = r.string_node("mac", &n)) {
    std::array<uint8_t, 6> mac{};
    unsigned parsed = 0;
    bool ok = s->size() == 17;
    for (size_t i = 0; ok && i < 6; ++i) {
      auto hex = [](char c) -> int {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        return -1;
      };
      const int hi = hex((*s)[i * 3]);
      const int lo = hex((*s)[i * 3 + 1]);
      if (hi < 0 || lo < 0 || (i < 5 && (*s)[i * 3 + 2] != ':')) {
        ok = false;
      } else {
        mac[i] = static_cast<uint8_t>(hi * 16 + lo);
        ++parsed;
      }
    }
    if (!ok || parsed != 6) {
      r.error(n, "mac", fmt::format("{} is not a MAC address (xx:xx:xx:xx:xx:xx)", quote_text(*s)));
    } else if ((mac[0] & 1) != 0 || mac == std::array<uint8_t, 6>{}) {
      r.error(n, "mac", fmt::format("{} is not a unicast MAC address", quote_text(*s)));
    } else {
      local.mac = mac;
    }
  }
  r.integer("mtu", local.mtu, local.address.version == 6 ? 1280 : 576, 9600);
  r.integer("roce_mtu", local.roce_mtu, 0, 4096);
  if (local.roce_mtu != 0 &&
      (local.roce_mtu < 256 || (local.roce_mtu & (local.roce_mtu - 1)) != 0)) {
    r.error(
        r.get("roce_mtu"), "roce_mtu",
        fmt::format("{} is not a RoCE path MTU (256, 512, 1024, 2048 or 4096; 0: as negotiated)",
                    local.roce_mtu));
    local.roce_mtu = 0;
  }
  auto ring = [&](std::string_view key, uint16_t& out) {
    uint16_t v = out;
    r.integer(key, v, 64, 32768);
    const toml::node* rn = r.get(key);
    if ((v & (v - 1)) != 0) {
      r.error(rn, key, fmt::format("{} is not a power of two", v));
      return;
    }
    out = v;
  };
  ring("rx_ring", local.rx_ring);
  ring("tx_ring", local.tx_ring);
  r.duration("wake_coalesce", local.wake_coalesce, Duration::zero(), Duration::from_ms(10));
  if (const std::string* s = r.string_node("queues", &n)) {
    if (*s == "auto") {
      local.queues = QueueMode::kAuto;
    } else if (*s == "distributor") {
      local.queues = QueueMode::kDistributor;
    } else {
      r.error(n, "queues", fmt::format("{} is not \"auto\" or \"distributor\"", quote_text(*s)));
    }
  }
  read_vlan(r, local.vlan);
  r.integer("cnp_dscp", local.cnp_dscp, 0, 63);
  r.integer("cnp_pcp", local.cnp_pcp, 0, 7);
  r.boolean("insecure", local.insecure);
  r.str("private_key_file", local.private_key_file);
  if (!local.insecure && local.private_key_file.empty()) {
    const toml::node* kn = r.get("private_key_file");
    if (kn == nullptr || kn->is_string()) {
      errors.add(kn != nullptr ? pos_of(*kn) : r.pos(),
                 "local.private_key_file is required unless local.insecure = true (create one "
                 "with `rowanctl genkey`)");
    }
  }
  r.finish();
}

WanBackend read_backend(TableReader& r) {
  const toml::node* n = nullptr;
  const std::string* s = r.string_node("backend", &n);
  if (s == nullptr || *s == "udp") return WanBackend::kUdp;
  if (*s == "dpdk") return WanBackend::kDpdk;
  r.error(n, "backend", fmt::format("{} is not \"udp\" or \"dpdk\"", quote_text(*s)));
  return WanBackend::kUdp;
}

void read_wan(TableReader& root, WanConfig& wan, std::vector<LinkPos>& link_pos, Errors& errors) {
  const toml::table* t = root.table("wan");
  if (t == nullptr) return;
  TableReader r(t, "wan.", errors);
  r.real("send_buffer_bdp", wan.send_buffer_bdp, 0.1, 1000);
  r.real("recv_window_bdp", wan.recv_window_bdp, 0.1, 1000);
  r.integer("max_flows", wan.max_flows, 1, 1 << 20);
  r.duration("flow_idle_timeout", wan.flow_idle_timeout, Duration::from_ms(100),
             Duration::from_s(86400));
  each_table(r, "link", [&](const toml::table& lt) {
    TableReader l(&lt, "wan.link.", errors);
    WanLinkConfig link;
    LinkPos lp;
    lp.name = lp.device = lp.bind = l.pos();
    l.require("name");
    l.require("bind");
    const toml::node* n = nullptr;
    if (const std::string* s = l.string_node("name", &n)) {
      lp.name = pos_of(*n);
      if (valid_name(*s)) {
        link.name = *s;
      } else {
        l.error(n, "name",
                fmt::format("{} must be 1-32 letters, digits, '_', '-' or '.'", quote_text(*s)));
      }
    }
    link.backend = read_backend(l);
    if (const toml::node* b = l.get("bind")) lp.bind = pos_of(*b);
    l.sockaddr("bind", link.bind, kDefaultWanPort);
    const toml::node* dev = nullptr;
    if (const std::string* s = l.string_node("device", &dev)) {
      lp.device = pos_of(*dev);
      if (link.backend != WanBackend::kDpdk) {
        l.error(dev, "device", "is only used by the dpdk backend");
      } else if (s->empty() || has_nul(*s)) {
        l.error(dev, "device", "must be a PCI address or a vdev spec");
      } else {
        link.device = *s;
      }
    } else if (link.backend == WanBackend::kDpdk && dev == nullptr) {
      errors.add(l.pos(), "wan.link.device is required with backend = \"dpdk\"");
    }
    const unsigned max = link.bind.addr.version == 6 ? 128 : 32;
    if (const toml::node* pl = l.get("prefix_len")) {
      if (link.backend != WanBackend::kDpdk)
        l.error(pl, "prefix_len", "is only used by the dpdk backend");
    }
    l.integer("prefix_len", link.prefix_len, 1, max);
    if (const toml::node* nh = l.get("next_hop")) {
      roce::IpAddr a;
      l.ip("next_hop", a);
      if (a.version != 0) {
        const Prefix subnet{link.bind.addr, link.prefix_len};
        if (link.backend != WanBackend::kDpdk) {
          l.error(nh, "next_hop", "is only used by the dpdk backend");
        } else if (link.bind.addr.version != 0 && !subnet.contains(a)) {
          l.error(nh, "next_hop",
                  fmt::format("{} is not on the link's subnet {}/{}", roce::to_string(a),
                              roce::to_string(link.bind.addr), link.prefix_len));
        } else {
          link.next_hop = a;
        }
      }
    }
    l.rate("rate", link.rate, BitsPerSec::from_bps(1000));
    l.duration("rtt", link.rtt, Duration::from_us(1), Duration::from_s(10));
    l.integer("mtu", link.mtu, link.bind.addr.version == 6 ? 1280 : 576, 9600);
    if (const toml::node* off = l.get("offload")) {
      if (link.backend != WanBackend::kUdp)
        l.error(off, "offload", "is only used by the udp backend");
    }
    l.boolean("offload", link.offload);
    l.finish();
    wan.links.push_back(std::move(link));
    link_pos.push_back(lp);
  });
  r.finish();
}

// peer.endpoints: the peer's address on each of its links, in the order of
// `links`, the first being `endpoint`; each unique across the peers (a shared
// socket tells its peers apart by them, wan_link_mux.h).
void read_peer_endpoints(TableReader& r, PeerConfig& peer, const WanConfig& wan,
                         std::vector<std::pair<SockAddr, Pos>>& seen) {
  const toml::node* en = r.get("endpoints");
  if (en == nullptr) return;
  if (!en->is_array()) return r.wrong_type(*en, "endpoints", "an array of ADDRESS[:PORT]");
  const toml::array& arr = *en->as_array();
  if (arr.size() != peer.links.size()) {
    return r.error(en, "endpoints",
                   fmt::format("has {} entries but the peer has {} links ({}); give one per link, "
                               "in the order of links",
                               arr.size(), peer.links.size(), fmt::join(peer.links, ", ")));
  }
  std::vector<SockAddr> out;
  for (size_t i = 0; i < arr.size(); ++i) {
    const toml::node& e = *arr.get(i);
    const auto a = e.is_string() ? parse_sockaddr(e.as_string()->get(), kDefaultWanPort)
                                 : std::optional<SockAddr>{};
    if (!a) {
      r.error(&e, "endpoints", "an entry is not ADDRESS[:PORT] (e.g. \"198.19.1.2:47910\")");
      return;
    }
    const WanLinkConfig* link = nullptr;
    for (const auto& l : wan.links) {
      if (l.name == peer.links[i]) link = &l;
    }
    if (i == 0 && !(*a == peer.endpoint)) {
      r.error(&e, "endpoints",
              fmt::format("the first entry ({}) must be the endpoint, {}", a->to_string(),
                          peer.endpoint.to_string()));
      return;
    }
    if (link != nullptr && link->bind.addr.version != a->addr.version) {
      r.error(&e, "endpoints",
              fmt::format("{} is IPv{} but link {} binds IPv{}", a->to_string(), a->addr.version,
                          quote_text(link->name), link->bind.addr.version));
      return;
    }
    if (i > 0) {
      for (const auto& [other, where] : seen) {
        if (other == *a) {
          r.error(&e, "endpoints",
                  fmt::format("{} is already the endpoint of the peer at {}", a->to_string(),
                              at(where)));
          return;
        }
      }
      seen.emplace_back(*a, pos_of(e));
    }
    out.push_back(*a);
  }
  peer.endpoints = std::move(out);
}

void read_peers(TableReader& root, std::vector<PeerConfig>& peers, std::vector<PeerPos>& peer_pos,
                const WanConfig& wan, bool insecure, Errors& errors) {
  std::map<std::string, Pos> seen;
  std::vector<std::pair<SockAddr, Pos>> endpoints;
  each_table(root, "peer", [&](const toml::table& pt) {
    TableReader r(&pt, "peer.", errors);
    PeerConfig peer;
    PeerPos pp;
    pp.table = pp.name = pp.endpoint = r.pos();
    r.require("name");
    r.require("endpoint");
    const toml::node* n = nullptr;
    if (const std::string* s = r.string_node("name", &n)) {
      pp.name = pos_of(*n);
      if (!valid_name(*s)) {
        r.error(n, "name",
                fmt::format("{} must be 1-32 letters, digits, '_', '-' or '.'", quote_text(*s)));
      } else if (auto it = seen.find(*s); it != seen.end()) {
        r.error(
            n, "name",
            fmt::format("duplicate peer name {} (first at {})", quote_text(*s), at(it->second)));
      } else {
        seen.emplace(*s, pp.name);
        peer.name = *s;
      }
    }
    if (const toml::node* e = r.get("endpoint")) pp.endpoint = pos_of(*e);
    r.sockaddr("endpoint", peer.endpoint, kDefaultWanPort);
    if (peer.endpoint.addr.version != 0) {
      for (const auto& [other, where] : endpoints) {
        if (other.addr == peer.endpoint.addr && other.port == peer.endpoint.port) {
          errors.add(pp.endpoint, fmt::format("peer.endpoint: {} is already the endpoint of the "
                                              "peer at {}",
                                              peer.endpoint.to_string(), at(where)));
        }
      }
      endpoints.emplace_back(peer.endpoint, pp.endpoint);
    }
    if (const toml::node* ln = r.get("links")) {
      if (!ln->is_array()) {
        r.wrong_type(*ln, "links", "an array of link names");
      } else if (ln->as_array()->empty()) {
        r.error(ln, "links", "is empty (leave it out to use every link)");
      } else {
        for (const toml::node& e : *ln->as_array()) {
          if (!e.is_string()) {
            r.wrong_type(e, "links", "a link name (string)");
            continue;
          }
          const std::string& name = e.as_string()->get();
          const WanLinkConfig* link = nullptr;
          for (const auto& l : wan.links) {
            if (l.name == name) link = &l;
          }
          if (link == nullptr) {
            r.error(
                &e, "links",
                fmt::format("unknown link {} (no [[wan.link]] has that name)", quote_text(name)));
          } else if (std::find(peer.links.begin(), peer.links.end(), name) != peer.links.end()) {
            r.error(&e, "links", fmt::format("link {} is listed twice", quote_text(name)));
          } else if (peer.endpoint.addr.version != 0 &&
                     link->bind.addr.version != peer.endpoint.addr.version) {
            r.error(&e, "links",
                    fmt::format("link {} binds IPv{} but the endpoint is IPv{}", quote_text(name),
                                link->bind.addr.version, peer.endpoint.addr.version));
          } else {
            peer.links.push_back(name);
          }
        }
      }
    } else {
      for (const auto& l : wan.links) {
        if (l.name.empty()) continue;
        if (peer.endpoint.addr.version != 0 && l.bind.addr.version != 0 &&
            l.bind.addr.version != peer.endpoint.addr.version) {
          continue;  // only the links of the endpoint's address family
        }
        peer.links.push_back(l.name);
      }
      if (peer.links.empty() && !wan.links.empty() && peer.endpoint.addr.version != 0) {
        errors.add(pp.endpoint,
                   fmt::format("peer.endpoint: no [[wan.link]] binds an IPv{} address to reach {}",
                               peer.endpoint.addr.version, peer.endpoint.to_string()));
      }
    }
    read_peer_endpoints(r, peer, wan, endpoints);
    if (const std::string* s = r.string_node("fec", &n)) {
      if (*s == "auto") {
        peer.fec = true;
      } else if (*s == "off") {
        peer.fec = false;
      } else {
        r.error(n, "fec", fmt::format("{} is not \"auto\" or \"off\"", quote_text(*s)));
      }
    }
    r.real("fec_max_overhead", peer.fec_max_overhead, 0.01, 1.0);
    if (const std::string* s = r.string_node("public_key", &n); s == nullptr) {
      if (!insecure && r.get("public_key") == nullptr) {
        errors.add(pp.table,
                   "peer.public_key is required unless local.insecure = true (the peer's "
                   "`rowanctl pubkey`)");
      }
    } else {
      if (!crypto::key_from_base64(*s)) {
        r.error(n, "public_key",
                fmt::format("{} is not an X25519 public key (44 base64 characters, as printed by "
                            "`rowanctl pubkey`)",
                            quote_text(*s)));
      } else {
        peer.public_key = *s;
      }
    }
    r.finish();
    peers.push_back(std::move(peer));
    peer_pos.push_back(pp);
  });
}

void read_routes(TableReader& root, std::vector<RouteConfig>& routes,
                 std::vector<RoutePos>& route_pos, Errors& errors) {
  each_table(root, "route", [&](const toml::table& rt) {
    TableReader r(&rt, "route.", errors);
    RouteConfig route;
    RoutePos rp;
    rp.prefix = rp.peer = r.pos();
    r.require("prefix");
    r.require("peer");
    const toml::node* n = nullptr;
    if (const std::string* s = r.string_node("prefix", &n)) {
      rp.prefix = pos_of(*n);
      if (auto p = parse_prefix(*s)) {
        route.prefix = *p;
      } else {
        r.error(n, "prefix",
                fmt::format("{} is not a prefix ADDRESS/LEN with the host bits zero (e.g. "
                            "\"198.18.2.0/24\")",
                            quote_text(*s)));
      }
    }
    if (const toml::node* p = r.get("peer")) rp.peer = pos_of(*p);
    r.str("peer", route.peer);
    if (const std::string* s = r.string_node("mode", &n)) {
      if (*s == "passthrough") {
        route.mode = RouteMode::kPassthrough;
      } else if (*s == "split") {
        route.mode = RouteMode::kSplit;
      } else if (*s == "direct") {
        r.error(n, "mode",
                "'direct' is not a rowand mode: a prefix without a gateway function is routed "
                "by the kernel (leave it out of rowand's routes); use \"passthrough\" or "
                "\"split\"");
      } else {
        r.error(n, "mode", fmt::format("{} is not \"passthrough\" or \"split\"", quote_text(*s)));
      }
    }
    VlanPolicy vlan;
    if (read_vlan(r, vlan)) route.vlan = vlan;
    r.finish();
    routes.push_back(std::move(route));
    route_pos.push_back(rp);
  });
}

std::string param_text(const toml::node& n) {
  if (n.is_string()) return n.as_string()->get();
  if (n.is_integer()) return std::to_string(n.as_integer()->get());
  if (n.is_floating_point()) return fmt::format("{}", n.as_floating_point()->get());
  return n.as_boolean()->get() ? "true" : "false";
}

void read_cc(TableReader& root, CcConfig& cc, Errors& errors) {
  const toml::table* t = root.table("cc");
  if (t == nullptr) {
    if (cc::Registry::find(cc.algorithm) == nullptr) {
      errors.add(Pos{}, fmt::format("the default congestion control {} is not built in",
                                    quote_text(cc.algorithm)));
    }
    return;
  }
  TableReader r(t, "cc.", errors);
  const toml::node* alg_node = nullptr;
  const std::string* alg = r.string_node("algorithm", &alg_node);
  if (alg != nullptr) cc.algorithm = *alg;
  const bool known = cc::Registry::find(cc.algorithm) != nullptr;
  if (!known) {
    std::string names;
    for (const auto& name : cc::Registry::names()) names += (names.empty() ? "" : ", ") + name;
    errors.add(alg_node != nullptr ? pos_of(*alg_node) : r.pos(),
               fmt::format("cc.algorithm: unknown congestion control {} (known: {})",
                           quote_text(cc.algorithm), names.empty() ? "none" : names));
  }
  std::map<std::string, Pos> param_pos;
  Pos params_at = r.pos();
  if (const toml::table* pt = r.table("params")) {
    params_at = pos_of(*pt);
    for (auto&& [k, v] : *pt) {
      const std::string key(k.str());
      const Pos p = k.source().begin.line > 0 ? pos_of(k.source()) : pos_of(v);
      if (!(v.is_string() || v.is_integer() || v.is_floating_point() || v.is_boolean())) {
        errors.add(pos_of(v), fmt::format("cc.params.{}: expected a string, number or boolean, "
                                          "got {}",
                                          key, type_name(v)));
        continue;
      }
      cc.params.set(key, param_text(v));
      param_pos.emplace(key, p);
    }
  }
  r.finish();
  if (!known) return;
  // Let the algorithm check its own parameters, as rowand will build it (on a
  // fresh copy: CcParams remembers which keys were read).
  try {
    MonotonicClock clock;
    const cc::CcParams probe(cc.params.values());
    (void)cc::Registry::create(cc.algorithm, clock, cc::PathHints{}, probe);
  } catch (const std::exception& e) {
    const std::string msg = e.what();
    Pos p = params_at;
    size_t best = std::string::npos;
    for (const auto& [key, kp] : param_pos) {
      // The algorithm names the key it rejects ("beta: ..." or "unknown parameter(s): a, b").
      const size_t i = msg.find(key);
      if (i == std::string::npos) continue;
      const bool word_start =
          i == 0 || !(std::isalnum(static_cast<unsigned char>(msg[i - 1])) || msg[i - 1] == '_');
      const size_t end = i + key.size();
      const bool word_end =
          end == msg.size() ||
          !(std::isalnum(static_cast<unsigned char>(msg[end])) || msg[end] == '_');
      if (word_start && word_end && i < best) {
        best = i;
        p = kp;
      }
    }
    errors.add(p, fmt::format("cc.params ({}): {}", cc.algorithm, msg));
  }
}

void read_control(TableReader& root, ControlConfig& control, Errors& errors) {
  const toml::table* t = root.table("control");
  if (t == nullptr) return;
  TableReader r(t, "control.", errors);
  const toml::node* n = nullptr;
  if (const std::string* s = r.string_node("socket", &n)) {
    // sockaddr_un.sun_path holds 108 bytes including the terminating NUL.
    if (s->empty() || s->front() != '/' || s->back() == '/' || has_nul(*s) || s->size() > 107) {
      r.error(n, "socket",
              fmt::format("{} must be an absolute file path of at most 107 bytes", quote_text(*s)));
    } else {
      control.socket = *s;
    }
  }
  if (const std::string* s = r.string_node("group", &n)) {
    if (!s->empty() && !valid_name(*s)) {
      r.error(n, "group", fmt::format("{} is not a group name", quote_text(*s)));
    } else {
      control.group = *s;
    }
  }
  r.finish();
}

void read_metrics(TableReader& root, MetricsConfig& metrics, Errors& errors) {
  const toml::table* t = root.table("metrics");
  if (t == nullptr) return;
  TableReader r(t, "metrics.", errors);
  r.boolean("enabled", metrics.enabled);
  r.sockaddr("listen", metrics.listen, 9464);
  r.finish();
}

void read_log(TableReader& root, LogConfig& log, Errors& errors) {
  const toml::table* t = root.table("log");
  if (t == nullptr) return;
  TableReader r(t, "log.", errors);
  const toml::node* n = nullptr;
  if (const std::string* s = r.string_node("level", &n)) {
    static const std::set<std::string> kLevels = {"trace", "debug", "info", "warn", "error"};
    if (kLevels.count(*s) == 0) {
      r.error(n, "level",
              fmt::format("{} is not trace, debug, info, warn or error", quote_text(*s)));
    } else {
      log.level = *s;
    }
  }
  r.finish();
}

}  // namespace rowan::gw::config_parse
