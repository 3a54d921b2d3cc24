// rowand's configuration: the TOML file (see config/rowand.toml for every key
// and its default) parsed into plain types. Unknown keys and semantic errors
// are reported together, each as `FILE:LINE:COL: message`.
//
// Threading: loaded on the control thread at start-up and on SIGHUP; the
// packet cores only ever see a validated, immutable copy.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "base/units.h"
#include "cc_params.h"
#include "codec/roce.h"
#include "net/net_addr.h"
#include "net/vlan.h"

namespace rowan::gw {

struct EalConfig {
  std::string lcores = "0";  ///< --lcores
  std::string file_prefix;   ///< --file-prefix; default "rowand-<pid>"
  std::string huge_dir;      ///< --huge-dir; empty: none given
  bool no_huge = false;      ///< --no-huge (vdevs only)
  bool in_memory = false;    ///< --in-memory (production)
  uint32_t memory_mb = 0;    ///< -m; 0: EAL default
  std::vector<std::string> extra_args;
  bool operator==(const EalConfig&) const = default;
};

/// How several packet workers share the site port (docs/gateway.md, "Packet
/// workers"): kAuto gives each worker its own RX/TX queue pair (RSS) when
/// the port has that many queues, else the software distributor;
/// kDistributor always uses the distributor.
enum class QueueMode : uint8_t { kAuto, kDistributor };

struct LocalConfig {
  std::string device;        ///< PCI address or vdev spec (net_af_packet0,iface=...)
  roce::IpAddr address;      ///< the gateway's own IP on the site side
  uint8_t prefix_len = 24;   ///< the site subnet (hosts resolved by ARP/ND)
  roce::IpAddr address6;     ///< optional second, IPv6 address (version 0: none)
  uint8_t prefix_len6 = 64;  ///< its subnet (hosts resolved by neighbour discovery)
  std::optional<std::array<uint8_t, 6>> mac;  ///< default: the port's MAC
  uint32_t mtu = 4200;  ///< largest local IP packet (4096-byte RoCE payload + headers)
  /// Split mode: the RoCE path MTU the site's hosts run (256..4096); the
  /// gateways re-segment between sites that differ. 0: as negotiated.
  uint32_t roce_mtu = 0;
  uint16_t rx_ring = 1024;
  uint16_t tx_ring = 1024;
  /// Under load the packet loop wakes at most this often (idle_policy.h);
  /// a packet then waits up to this long. Zero: wake for every frame.
  Duration wake_coalesce = Duration::from_ms(1);
  /// With two or more workers: queues per worker when the port has them.
  QueueMode queues = QueueMode::kAuto;
  /// This gateway's X25519 private key (base64, `rowanctl genkey`; mode 0600).
  /// A relative path is relative to the config file's directory.
  std::string private_key_file;
  /// Plaintext WAN links (no encryption, no peer authentication); logged loudly.
  bool insecure = false;
  /// The 802.1Q tag of packets from the WAN toward the site's hosts
  /// (vlan.h; a [[route]]'s own `vlan` wins for packets from its prefix).
  VlanPolicy vlan;
  /// Split mode: the DSCP (0..63) and PCP (0..7; on a tagged QP) of the CNPs
  /// the gateway sends its site's hosts (mlx5's cnp_dscp and cnp_802p_prio).
  uint8_t cnp_dscp = 48;
  uint8_t cnp_pcp = 6;
  bool operator==(const LocalConfig&) const = default;
};

enum class WanBackend : uint8_t { kUdp, kDpdk };

struct WanLinkConfig {
  std::string name;
  WanBackend backend = WanBackend::kUdp;
  SockAddr bind;                         ///< local address and port (udp) or own IP and port (dpdk)
  std::string device;                    ///< dpdk backend: PCI address or vdev spec
  uint8_t prefix_len = 24;               ///< dpdk backend: the WAN subnet of `bind`
  std::optional<roce::IpAddr> next_hop;  ///< dpdk backend: router toward peers, if not on-link
  BitsPerSec rate = BitsPerSec::from_gbps(1);  ///< link capacity (BDP sizing, CC hints)
  Duration rtt = Duration::from_ms(20);        ///< expected base RTT (BDP sizing, first PTO)
  uint32_t mtu = 1500;                         ///< IP MTU of the long-haul path
  /// udp backend: UDP GSO for sends and GRO for receives on the link's socket
  /// (docs/gateway.md "The UDP WAN backend: segmentation offload").
  bool offload = true;
  bool operator==(const WanLinkConfig&) const = default;
};

struct WanConfig {
  double send_buffer_bdp = 2.0;  ///< per-peer send buffer, in BDPs
  double recv_window_bdp = 2.0;  ///< per-peer receive window, in BDPs
  uint32_t max_flows = 4096;     ///< flows (streams) per peer
  Duration flow_idle_timeout = Duration::from_s(60);
  std::vector<WanLinkConfig> links;
  bool operator==(const WanConfig&) const = default;
};

struct PeerConfig {
  std::string name;
  SockAddr endpoint;               ///< the peer gateway's WAN address and port
  std::vector<std::string> links;  ///< names of [[wan.link]]s to reach it; when the file
                                   ///< names none, parsing fills in every link (never empty)
  /// The peer's address on each of `links`, in order, when the file gives
  /// `endpoints` (then every link is a path to the peer, and endpoints[0] ==
  /// endpoint); empty: the peer is reached over its first link, at endpoint.
  std::vector<SockAddr> endpoints;
  std::string public_key;  ///< the peer's X25519 public key (base64, 44 characters)
  /// Forward error correction on the peer's paths (`fec`): adaptive (the
  /// transport codes a lossy path when it pays, docs/wan-transport.md) or
  /// off (selective repeat alone).
  bool fec = true;
  /// `fec_max_overhead`: repair packets per source packet, at most
  /// (fec::PolicyConfig::max_overhead).
  double fec_max_overhead = kDefaultFecMaxOverhead;
  static constexpr double kDefaultFecMaxOverhead = 0.14;
  bool operator==(const PeerConfig&) const = default;
  /// The links the peer is reached over (paths): every link with
  /// `endpoints`, else the first.
  size_t path_count() const {
    return endpoints.empty() ? std::min<size_t>(links.size(), 1) : endpoints.size();
  }
  /// The peer's address on path `i`.
  const SockAddr& endpoint_of(size_t i) const {
    return endpoints.empty() ? endpoint : endpoints[i];
  }
};

/// How a route's packets cross the WAN (ARCHITECTURE.md, "Modes of a route").
/// There is no "direct" mode in rowand: a prefix with no gateway function is
/// routed by the host's kernel, not given to rowand.
enum class RouteMode : uint8_t { kPassthrough, kSplit };
const char* to_string(RouteMode m);

struct RouteConfig {
  Prefix prefix;
  std::string peer;
  RouteMode mode = RouteMode::kPassthrough;
  /// The tag of packets from this prefix toward the site (none: [local] vlan).
  std::optional<VlanPolicy> vlan;
};

struct CcConfig {
  std::string algorithm = "rowan";
  cc::CcParams params;  ///< the [cc.params] table, parsed by the algorithm
};

struct ControlConfig {
  std::string socket = "/run/rowan/control.sock";
  std::string group = "rowan";  ///< socket group (mode 0660); empty: the daemon's group
  bool operator==(const ControlConfig&) const = default;
};

struct MetricsConfig {
  bool enabled = true;
  SockAddr listen{roce::IpAddr{4, {127, 0, 0, 1}}, 9464};
  bool operator==(const MetricsConfig&) const = default;
};

struct LogConfig {
  std::string level = "info";  ///< trace, debug, info, warn, error
};

struct GatewayConfig {
  std::string path;  ///< the file it came from
  EalConfig eal;
  LocalConfig local;
  WanConfig wan;
  std::vector<PeerConfig> peers;
  std::vector<RouteConfig> routes;
  CcConfig cc;
  ControlConfig control;
  MetricsConfig metrics;
  LogConfig log;

  const PeerConfig* find_peer(const std::string& name) const;
  const WanLinkConfig* find_link(const std::string& name) const;
};

/// Every problem found in a config file, one `FILE:LINE:COL: message` per line.
class ConfigError : public std::runtime_error {
 public:
  explicit ConfigError(std::vector<std::string> errors);
  const std::vector<std::string>& errors() const { return errors_; }

 private:
  std::vector<std::string> errors_;
};

/// Parses and validates `path`, with every check start-up makes before it
/// opens anything: the text, the values, the sections against each other
/// (peers that would share a socket, routes, links) and the private key file
/// (readable by its owner only, a key). Throws ConfigError (never partially
/// applies).
GatewayConfig load_config(const std::string& path);
/// The same from text, `path` only naming it in messages (tests, fuzzing).
/// Files the config names (local.private_key_file) are only read with
/// `check_files`.
GatewayConfig parse_config(std::string_view text, const std::string& path,
                           bool check_files = false);

/// The configuration as TOML that parse_config reads back to the same values
/// (`rowand --print-config`). Every key is written, defaults included.
std::string to_toml(const GatewayConfig& cfg);

/// What a SIGHUP reload cannot apply without a restart: the names of the
/// sections whose values differ between the running and the new config ("[eal]",
/// "[local]", "[wan]", "[[peer]]", "[control]", "[metrics]"). Routes, [cc] and
/// [log] reload in place and are never listed. Empty: the reload is complete.
std::vector<std::string> reload_blockers(const GatewayConfig& running, const GatewayConfig& next);

/// `rowand --check-config -c FILE`: loads `path`, writes "FILE: configuration
/// ok" to `out` and returns 0, or writes every error (one per line) to `err`
/// and returns kExitConfig.
int check_config_main(const std::string& path, std::ostream& out, std::ostream& err);

/// Exit status for a bad config (sysexits EX_CONFIG).
inline constexpr int kExitConfig = 78;
inline constexpr int kExitUnavailable = 69;
inline constexpr int kExitUsage = 64;

}  // namespace rowan::gw
