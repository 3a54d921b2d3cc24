// rowand's configuration written back as TOML (rowand --print-config), and
// what a reload cannot apply in place.
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include <toml++/toml.h>

#include "config/config.h"

namespace rowan::gw {

namespace {

std::string rate_text(BitsPerSec r) {
  const uint64_t b = r.bps();
  if (b != 0 && b % 1000000000000ULL == 0) return fmt::format("{}tbit", b / 1000000000000ULL);
  if (b != 0 && b % 1000000000ULL == 0) return fmt::format("{}gbit", b / 1000000000ULL);
  if (b != 0 && b % 1000000ULL == 0) return fmt::format("{}mbit", b / 1000000ULL);
  if (b != 0 && b % 1000ULL == 0) return fmt::format("{}kbit", b / 1000ULL);
  return fmt::format("{}bit", b);
}

std::string duration_text(Duration d) {
  const int64_t ns = d.ns();
  if (ns != 0 && ns % 1000000000 == 0) return fmt::format("{}s", ns / 1000000000);
  if (ns != 0 && ns % 1000000 == 0) return fmt::format("{}ms", ns / 1000000);
  if (ns != 0 && ns % 1000 == 0) return fmt::format("{}us", ns / 1000);
  return fmt::format("{}ns", ns);
}

template <class T>
toml::array string_array(const std::vector<T>& v) {
  toml::array a;
  for (const auto& e : v) a.push_back(e);
  return a;
}

toml::table eal_table(const EalConfig& e) {
  return toml::table{{"lcores", e.lcores},
                     {"file_prefix", e.file_prefix},
                     {"huge_dir", e.huge_dir},
                     {"no_huge", e.no_huge},
                     {"in_memory", e.in_memory},
                     {"memory_mb", int64_t{e.memory_mb}},
                     {"extra_args", string_array(e.extra_args)}};
}

// `vlan` as the config file writes it (config_sections.cc read_vlan).
void insert_vlan(toml::table& t, const VlanPolicy& v) {
  switch (v.mode) {
    case VlanPolicy::Mode::kSender:
      t.insert("vlan", "sender");
      return;
    case VlanPolicy::Mode::kUntagged:
      t.insert("vlan", "untagged");
      return;
    case VlanPolicy::Mode::kVid:
      t.insert("vlan", int64_t{v.vid});
      return;
  }
}

toml::table local_table(const LocalConfig& l) {
  toml::table t{{"device", l.device},
                {"address", roce::to_string(l.address)},
                {"prefix_len", int64_t{l.prefix_len}},
                {"mtu", int64_t{l.mtu}},
                {"roce_mtu", int64_t{l.roce_mtu}},
                {"rx_ring", int64_t{l.rx_ring}},
                {"tx_ring", int64_t{l.tx_ring}},
                {"wake_coalesce", duration_text(l.wake_coalesce)},
                {"queues", l.queues == QueueMode::kAuto ? "auto" : "distributor"},
                {"cnp_dscp", int64_t{l.cnp_dscp}},
                {"cnp_pcp", int64_t{l.cnp_pcp}},
                {"insecure", l.insecure}};
  insert_vlan(t, l.vlan);
  if (l.address6.version == 6) {
    t.insert("address6", roce::to_string(l.address6));
    t.insert("prefix_len6", int64_t{l.prefix_len6});
  }
  if (l.mac) {
    const auto& m = *l.mac;
    t.insert("mac", fmt::format("{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", m[0], m[1], m[2], m[3],
                                m[4], m[5]));
  }
  if (!l.private_key_file.empty()) t.insert("private_key_file", l.private_key_file);
  return t;
}

toml::table wan_table(const WanConfig& w) {
  toml::array links;
  for (const auto& l : w.links) {
    toml::table lt{{"name", l.name},
                   {"backend", l.backend == WanBackend::kDpdk ? "dpdk" : "udp"},
                   {"bind", l.bind.to_string()},
                   {"rate", rate_text(l.rate)},
                   {"rtt", duration_text(l.rtt)},
                   {"mtu", int64_t{l.mtu}}};
    if (l.backend == WanBackend::kDpdk) {
      lt.insert("device", l.device);
      lt.insert("prefix_len", int64_t{l.prefix_len});
      if (l.next_hop) lt.insert("next_hop", roce::to_string(*l.next_hop));
    }
    links.push_back(std::move(lt));
  }
  toml::table t{{"send_buffer_bdp", w.send_buffer_bdp},
                {"recv_window_bdp", w.recv_window_bdp},
                {"max_flows", int64_t{w.max_flows}},
                {"flow_idle_timeout", duration_text(w.flow_idle_timeout)}};
  if (!links.empty()) t.insert("link", std::move(links));
  return t;
}

toml::array peers_array(const std::vector<PeerConfig>& peers) {
  toml::array a;
  for (const auto& p : peers) {
    toml::table t{
        {"name", p.name}, {"endpoint", p.endpoint.to_string()}, {"links", string_array(p.links)}};
    if (!p.endpoints.empty()) {
      toml::array e;
      for (const auto& x : p.endpoints) e.push_back(x.to_string());
      t.insert("endpoints", std::move(e));
    }
    if (!p.public_key.empty()) t.insert("public_key", p.public_key);
    t.insert("fec", p.fec ? "auto" : "off");
    t.insert("fec_max_overhead", p.fec_max_overhead);
    a.push_back(std::move(t));
  }
  return a;
}

toml::array routes_array(const std::vector<RouteConfig>& routes) {
  toml::array a;
  for (const auto& r : routes) {
    toml::table t{{"prefix", r.prefix.to_string()}, {"peer", r.peer}, {"mode", to_string(r.mode)}};
    if (r.vlan) insert_vlan(t, *r.vlan);
    a.push_back(std::move(t));
  }
  return a;
}

toml::table cc_table(const CcConfig& c) {
  toml::table t{{"algorithm", c.algorithm}};
  if (!c.params.empty()) {
    // Values as the text the algorithm parses (it reads every kind as text).
    toml::table params;
    for (const auto& [k, v] : c.params.values()) params.insert(k, v);
    t.insert("params", std::move(params));
  }
  return t;
}

}  // namespace

// Written by toml++'s formatter (quoting, escapes, [[arrays of tables]]);
// the tables come out in toml++'s key order.
std::string to_toml(const GatewayConfig& cfg) {
  toml::table doc{
      {"eal", eal_table(cfg.eal)},
      {"local", local_table(cfg.local)},
      {"wan", wan_table(cfg.wan)},
      {"cc", cc_table(cfg.cc)},
      {"control", toml::table{{"socket", cfg.control.socket}, {"group", cfg.control.group}}},
      {"metrics",
       toml::table{{"enabled", cfg.metrics.enabled}, {"listen", cfg.metrics.listen.to_string()}}},
      {"log", toml::table{{"level", cfg.log.level}}}};
  if (!cfg.peers.empty()) doc.insert("peer", peers_array(cfg.peers));
  if (!cfg.routes.empty()) doc.insert("route", routes_array(cfg.routes));
  std::ostringstream out;
  out << "# rowand configuration";
  // A comment ends at the line's end: a path with a newline is not echoed.
  if (!cfg.path.empty() && cfg.path.find_first_of("\r\n") == std::string::npos) {
    out << " (from " << cfg.path << ")";
  }
  out << "\n\n" << toml::toml_formatter(doc) << "\n";
  return out.str();
}

std::vector<std::string> reload_blockers(const GatewayConfig& running, const GatewayConfig& next) {
  std::vector<std::string> out;
  if (!(running.eal == next.eal)) out.emplace_back("[eal]");
  if (!(running.local == next.local)) out.emplace_back("[local]");
  // wan.flow_idle_timeout applies on reload (Worker::reload); the rest of [wan] does not.
  WanConfig wan = next.wan;
  wan.flow_idle_timeout = running.wan.flow_idle_timeout;
  if (!(running.wan == wan)) out.emplace_back("[wan]");
  if (running.peers != next.peers) out.emplace_back("[[peer]]");
  if (!(running.control == next.control)) out.emplace_back("[control]");
  if (!(running.metrics == next.metrics)) out.emplace_back("[metrics]");
  return out;
}

}  // namespace rowan::gw
