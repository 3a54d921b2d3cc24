// rowand's config parser: the checks across sections, on the parsed values
// and the positions kept beside them.
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "config/config_parse.h"

namespace rowan::gw::config_parse {

namespace {

// What rowand opens for each peer (worker.cc): the socket or DPDK port of the
// peer's first link. Peers on one UDP link share its socket
// (wan_link_mux.h), so they must differ in endpoint (checked in read_peers);
// a dpdk link's port answers one peer, so two peers on it are an error. A
// dpdk link carries IPv4 only, an MTU up to 9000, and reaches its peer on
// its subnet or through next_hop (dpdk_wan_io.cc).
void check_peer_links(const GatewayConfig& cfg, const std::vector<PeerPos>& peer_pos,
                      Errors& errors) {
  std::map<std::string, size_t> first_user;  // link name -> index of the first peer on it
  for (size_t i = 0; i < cfg.peers.size(); ++i) {
    const PeerConfig& p = cfg.peers[i];
    if (p.links.empty() || p.name.empty()) continue;
    const WanLinkConfig* link = cfg.find_link(p.links.front());
    if (link == nullptr) continue;
    auto [it, fresh] = first_user.emplace(link->name, i);
    if (!fresh && link->backend == WanBackend::kDpdk) {
      const PeerConfig& other = cfg.peers[it->second];
      errors.add(peer_pos[i].table,
                 fmt::format("peer {}: would share the DPDK port of link {} ({}) with peer {} (at "
                             "{}); a dpdk link carries one peer, so give each its own "
                             "[[wan.link]] or use backend = \"udp\", whose socket peers share",
                             quote_text(p.name), quote_text(link->name), link->device,
                             quote_text(other.name), at(peer_pos[it->second].table)));
    }
    if (link->backend != WanBackend::kDpdk || p.endpoint.addr.version == 0) continue;
    if (p.endpoint.addr.version != 4) {
      errors.add(peer_pos[i].endpoint,
                 fmt::format("peer.endpoint: {} is IPv6, but the dpdk link {} carries IPv4 only",
                             p.endpoint.to_string(), quote_text(link->name)));
    } else if (!link->next_hop && link->bind.addr.version == 4 &&
               !Prefix{link->bind.addr, link->prefix_len}.contains(p.endpoint.addr)) {
      errors.add(peer_pos[i].endpoint,
                 fmt::format("peer.endpoint: {} is not on the dpdk link {}'s subnet {} and the "
                             "link has no next_hop",
                             p.endpoint.to_string(), quote_text(link->name),
                             network_of({link->bind.addr, link->prefix_len}).to_string()));
    }
  }
}

}  // namespace

// Checks across sections, on the parsed values.
void cross_check(const GatewayConfig& cfg, const std::vector<LinkPos>& link_pos,
                 const std::vector<PeerPos>& peer_pos, const std::vector<RoutePos>& route_pos,
                 bool have_wan_table, Errors& errors) {
  check_peer_links(cfg, peer_pos, errors);
  // Links: names, binds and devices unique.
  for (size_t i = 0; i < cfg.wan.links.size(); ++i) {
    const WanLinkConfig& a = cfg.wan.links[i];
    for (size_t j = 0; j < i; ++j) {
      const WanLinkConfig& b = cfg.wan.links[j];
      if (!a.name.empty() && a.name == b.name) {
        errors.add(link_pos[i].name, fmt::format("wan.link.name: duplicate link name {} (first "
                                                 "at {})",
                                                 quote_text(a.name), at(link_pos[j].name)));
      }
      if (a.bind.addr.version != 0 && a.bind == b.bind) {
        errors.add(link_pos[i].bind,
                   fmt::format("wan.link.bind: {} is already bound by the link at {}",
                               a.bind.to_string(), at(link_pos[j].bind)));
      }
      if (!a.device.empty() && a.device == b.device) {
        errors.add(link_pos[i].device,
                   fmt::format("wan.link.device: {} is already used by the link at {}",
                               quote_text(a.device), at(link_pos[j].device)));
      }
    }
    if (a.backend == WanBackend::kDpdk && a.bind.addr.version == 6) {
      errors.add(link_pos[i].bind,
                 fmt::format("wan.link.bind: {} is IPv6, but the dpdk backend carries IPv4 only",
                             a.bind.to_string()));
    }
    if (a.backend == WanBackend::kDpdk && a.mtu > 9000) {
      errors.add(link_pos[i].name,
                 fmt::format("wan.link.mtu: {} is above the dpdk backend's 9000", a.mtu));
    }
    if (!a.device.empty() && a.device == cfg.local.device) {
      errors.add(link_pos[i].device, fmt::format("wan.link.device: {} is the local port's device",
                                                 quote_text(a.device)));
    }
  }
  if (cfg.wan.links.empty()) {
    errors.add(Pos{}, have_wan_table ? "no [[wan.link]]: at least one long-haul link is required"
                                     : "missing [[wan.link]]: at least one long-haul link is "
                                       "required");
  }

  // Routes: known peer, no overlaps, never the local subnet or the WAN.
  const bool have_local = cfg.local.address.version != 0;
  const Prefix local_subnet{cfg.local.address, cfg.local.prefix_len};
  for (size_t i = 0; i < cfg.routes.size(); ++i) {
    const RouteConfig& r = cfg.routes[i];
    if (!r.peer.empty() && cfg.find_peer(r.peer) == nullptr) {
      errors.add(route_pos[i].peer,
                 fmt::format("route.peer: unknown peer {} (no [[peer]] has that name)",
                             quote_text(r.peer)));
    }
    if (r.prefix.addr.version == 0) continue;
    for (size_t j = 0; j < i; ++j) {
      const RouteConfig& o = cfg.routes[j];
      if (o.prefix.addr.version != 0 && r.prefix.overlaps(o.prefix)) {
        errors.add(
            route_pos[i].prefix,
            fmt::format("route.prefix: {} overlaps {} of the route at {}", r.prefix.to_string(),
                        o.prefix.to_string(), at(route_pos[j].prefix)));
      }
    }
    if (have_local && r.prefix.overlaps(local_subnet)) {
      errors.add(route_pos[i].prefix,
                 fmt::format("route.prefix: {} overlaps the local subnet {} (local.address {}/{})",
                             r.prefix.to_string(), network_of(local_subnet).to_string(),
                             roce::to_string(cfg.local.address), cfg.local.prefix_len));
    }
    for (size_t k = 0; k < cfg.peers.size(); ++k) {
      const PeerConfig& p = cfg.peers[k];
      if (p.endpoint.addr.version != 0 && r.prefix.contains(p.endpoint.addr)) {
        errors.add(route_pos[i].prefix,
                   fmt::format("route.prefix: {} covers the endpoint {} of peer {}: the WAN "
                               "itself cannot be carried over the WAN",
                               r.prefix.to_string(), p.endpoint.to_string(), quote_text(p.name)));
      }
    }
  }
}

}  // namespace rowan::gw::config_parse
