// rowand's config: the example files parse, config/rowand.toml shows the real
// defaults, to_toml round-trips, and every class of error is reported at its
// own FILE:LINE:COL — all of them at once.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "config/config.h"
#include "config_test_util.h"
#include "crypto/keys.h"
#include "fec/policy.h"
#include "registry.h"
#include "tools/paths.h"
#include "tools/temp_dir.h"

namespace rowan::gw {
namespace {

using namespace config_testing;  // NOLINT(google-build-using-namespace)
namespace fs = std::filesystem;

// `rowand --check-config` on example `f` as it would be installed (its private
// key file present, in `dir`): the exit status, with its output in `out`/`err`.
int check_example(const char* f, const TempDir& dir, std::string& out, std::string& err) {
  std::string text = read_file(example(f));
  const size_t at = text.find("\nprivate_key_file = \"");
  EXPECT_NE(at, std::string::npos);
  if (at == std::string::npos) return -1;
  const size_t end = text.find('\n', at + 1);
  const std::string key = dir / "private.key";
  write_key(key);
  text.replace(at, end - at, "\nprivate_key_file = \"" + key + "\"");
  const std::string cfg = dir / "example.toml";
  std::ofstream(cfg) << text;
  std::ostringstream out_s, err_s;
  const int rc = check_config_main(cfg, out_s, err_s);
  out = out_s.str();
  err = err_s.str();
  return rc;
}

TEST(ConfigExamples, AllParse) {
  ASSERT_NE(cc::Registry::find(cc::kDefaultAlgorithm), nullptr) << "rowan_cc not linked in";
  const TempDir dir;
  for (const char* f : {"rowand.toml", "two-site/a.toml", "two-site/b.toml"}) {
    SCOPED_TRACE(f);
    std::string out, err;
    EXPECT_EQ(check_example(f, dir, out, err), 0) << err;
    EXPECT_EQ(err, "");
    EXPECT_NE(out.find("configuration ok"), std::string::npos);
  }
}

// The real-NIC examples (docs/gateway.md "Real NICs") pass the check. Their
// lcores name isolated CPUs 2-6 of a NIC host, and the check refuses lcores
// on CPUs this process may not run on: on a smaller host that refusal, and
// nothing else, is what the check may report.
TEST(ConfigExamples, NicExamplesPassTheCheck) {
  ASSERT_NE(cc::Registry::find(cc::kDefaultAlgorithm), nullptr) << "rowan_cc not linked in";
  const TempDir dir;
  for (const char* f : {"nic/mlx5.toml", "nic/ice.toml", "nic/i40e.toml"}) {
    SCOPED_TRACE(f);
    std::string out, err;
    const int rc = check_example(f, dir, out, err);
    if (rc == 0) {
      EXPECT_EQ(err, "");
      EXPECT_NE(out.find("configuration ok"), std::string::npos);
      continue;
    }
    EXPECT_EQ(rc, 78);
    std::istringstream lines(err);
    int errors = 0;
    for (std::string line; std::getline(lines, line); ++errors) {
      EXPECT_NE(line.find("eal.lcores"), std::string::npos) << line;
      EXPECT_NE(line.find("is not available to this process"), std::string::npos) << line;
    }
    EXPECT_EQ(errors, 1) << err;
  }
}

// What start-up would refuse, the check refuses first, each at its position:
// no private key file, a peer without a public key, two peers on one socket,
// a dpdk link that cannot reach its peer, and a key file that cannot be used.
TEST(ConfigStartupChecks, SecureLinksNeedTheirKeys) {
  std::string text = kBase;
  text.replace(text.find("insecure = true\n"), 16, "");
  auto errors = errors_of(text);
  EXPECT_TRUE(has_error(errors, where(text, "[local]"), "local.private_key_file is required"));
  EXPECT_TRUE(has_error(errors, where(text, "[[peer]]"), "peer.public_key is required"));
  EXPECT_EQ(errors.size(), 2u);
  // An empty name is no key file either; insecure = false said out loud changes nothing.
  text.replace(text.find("address = "), 0, "private_key_file = \"\"\ninsecure = false\n");
  errors = errors_of(text);
  EXPECT_TRUE(has_error(errors, where(text, "\"\"\n"), "local.private_key_file is required"));
  EXPECT_EQ(errors.size(), 2u);
  // With insecure = true neither is needed.
  EXPECT_TRUE(errors_of(kBase).empty());
}

TEST(ConfigStartupChecks, KeyFileIsReadAsStartUpReadsIt) {
  const TempDir dir;
  const std::string key = dir / "gw.key";
  std::string text = kBase;
  text.replace(text.find("insecure = true\n"), 16, "private_key_file = \"gw.key\"\n");
  text.replace(text.find("endpoint = "), 0,
               "public_key = \"Ywn0gdQzaTZ5Ey7XAyLFM7u3kF6g8MIO0b1CFNBPr0w=\"\n");
  const std::string cfg = dir / "t.toml";
  std::ofstream(cfg) << text;
  auto check = [&](std::string* err_text) {
    std::ostringstream out, err;
    const int rc = check_config_main(cfg, out, err);
    *err_text = err.str();
    return rc;
  };
  std::string err;
  // Missing: relative to the config file's directory, at the key's position.
  EXPECT_EQ(check(&err), kExitConfig);
  const std::string at = cfg + where(text, "\"gw.key\"").substr(6);
  EXPECT_EQ(err.rfind(at + "local.private_key_file: " + key + ": cannot read", 0), 0u) << err;
  // Readable by others: refused with the fix.
  write_key(key, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  EXPECT_EQ(check(&err), kExitConfig);
  EXPECT_NE(err.find("chmod 600"), std::string::npos) << err;
  // Not a key.
  std::ofstream(key) << "hello\n";
  fs::permissions(key, fs::perms::owner_read | fs::perms::owner_write);
  EXPECT_EQ(check(&err), kExitConfig);
  EXPECT_NE(err.find("not a private key"), std::string::npos) << err;
  // A key: ok.
  write_key(key);
  EXPECT_EQ(check(&err), 0) << err;
  // parse_config reads no files unless asked.
  EXPECT_TRUE(errors_of(text).empty());
}

// Several peers on one UDP link share its socket (wan_link_mux.h), each
// with a route per prefix; a DPDK link's port carries one peer only.
// A udp link's socket uses UDP GSO/GRO unless `offload = false`; a dpdk link
// has no kernel socket, so the key is an error there.
TEST(ConfigParse, UdpLinkOffloadIsOnUnlessTurnedOff) {
  EXPECT_TRUE(parse_config(kBase, "t.toml").wan.links.at(0).offload);
  std::string text = kBase;
  text.replace(text.find("bind = \"198.19.0.1:47910\""), 0, "offload = false\n");
  EXPECT_FALSE(parse_config(text, "t.toml").wan.links.at(0).offload);
  text.replace(text.find("offload = false"), 15, "offload = \"no\"");
  auto errors = errors_of(text);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("offload"), std::string::npos) << errors[0];
  text.replace(text.find("offload = \"no\""), 14,
               "offload = true\nbackend = \"dpdk\"\ndevice = \"net_null0\"");
  errors = errors_of(text);
  EXPECT_TRUE(std::any_of(errors.begin(), errors.end(), [](const std::string& e) {
    return e.find("offload") != std::string::npos &&
           e.find("only used by the udp backend") != std::string::npos;
  })) << ::testing::PrintToString(errors);
}

TEST(ConfigStartupChecks, PeersShareAUdpLinkButNotADpdkPort) {
  const std::string text = kBase + R"(
[[peer]]
name = "c"
endpoint = "198.19.0.3"

[[route]]
prefix = "198.18.3.0/24"
peer = "c"

[[route]]
prefix = "198.18.4.0/24"
peer = "d"
)";
  const auto errors = errors_of(text);
  EXPECT_TRUE(has_error(errors, where(text, "\"d\""),
                        "route.peer: unknown peer 'd' (no [[peer]] has that name)"))
      << ::testing::PrintToString(errors);
  EXPECT_EQ(errors.size(), 1u) << ::testing::PrintToString(errors);
  // Without the stray route: two peers on wan0, a route each.
  const std::string ok = text.substr(0, text.find("\n[[route]]\nprefix = \"198.18.4.0/24\""));
  EXPECT_TRUE(errors_of(ok).empty()) << ::testing::PrintToString(errors_of(ok));
  const GatewayConfig cfg = parse_config(ok, "gw.toml");
  ASSERT_EQ(cfg.peers.size(), 2u);
  EXPECT_EQ(cfg.peers[0].links, cfg.peers[1].links);
  ASSERT_EQ(cfg.routes.size(), 2u);
  EXPECT_EQ(cfg.routes[1].peer, "c");
  // The same endpoint twice is refused: the socket could not tell them apart.
  std::string twice = ok;
  twice.replace(twice.find("198.19.0.3"), 10, "198.19.0.2");
  EXPECT_TRUE(
      has_error(errors_of(twice), where(twice, "\"198.19.0.2\"", 1), "is already the endpoint of"))
      << ::testing::PrintToString(errors_of(twice));
  // A dpdk link: its port answers one peer.
  std::string dpdk = ok;
  dpdk.replace(dpdk.find("bind = "), 0,
               "backend = \"dpdk\"\ndevice = \"net_af_packet1,iface=wan0\"\n");
  EXPECT_TRUE(has_error(errors_of(dpdk), where(dpdk, "[[peer]]", 1),
                        "peer 'c': would share the DPDK port of link 'wan0'"))
      << ::testing::PrintToString(errors_of(dpdk));
}

// peer.endpoints: the peer's address on each of its links, in order.
TEST(ConfigStartupChecks, EndpointsGiveOnePerLinkInOrder) {
  // kBase's [local] and wan0, a second link, and peer b without its route.
  const std::string links = kBase.substr(0, kBase.find("[[peer]]")) +
                            "[[wan.link]]\nname = \"wan1\"\nbind = \"198.19.1.1:47910\"\n\n" +
                            "[[peer]]\nname = \"b\"\nendpoint = \"198.19.0.2\"\n";
  const GatewayConfig two =
      parse_config(links + "endpoints = [\"198.19.0.2\", \"198.19.1.2:47911\"]\n", "gw.toml");
  ASSERT_EQ(two.peers[0].path_count(), 2u);
  EXPECT_EQ(two.peers[0].endpoint_of(1).to_string(), "198.19.1.2:47911");
  EXPECT_EQ(parse_config(to_toml(two), "again.toml").peers, two.peers);
  // Without it: the first link only, as before.
  EXPECT_EQ(parse_config(links, "gw.toml").peers[0].path_count(), 1u);
  // One entry too few, the first not the endpoint, a family that does not
  // match the link, and an address another peer already has.
  std::string bad = links + "endpoints = [\"198.19.0.2\"]\n";
  EXPECT_TRUE(has_error(errors_of(bad), where(bad, "[\"198.19.0.2\"]"),
                        "peer.endpoints: has 1 entries but the peer has 2 links (wan0, wan1)"))
      << ::testing::PrintToString(errors_of(bad));
  bad = links + "endpoints = [\"198.19.0.9\", \"198.19.1.2\"]\n";
  EXPECT_TRUE(has_error(errors_of(bad), where(bad, "\"198.19.0.9\""),
                        "the first entry (198.19.0.9:47910) must be the endpoint"));
  bad = links + "endpoints = [\"198.19.0.2\", \"[2001:2::2]:1\"]\n";
  EXPECT_TRUE(has_error(errors_of(bad), where(bad, "\"[2001:2::2]:1\""),
                        "is IPv6 but link 'wan1' binds IPv4"));
  bad = links + "endpoints = [\"198.19.0.2\", \"198.19.1.2\"]\n" +
        "\n[[peer]]\nname = \"c\"\nendpoint = \"198.19.0.3\"\n" +
        "endpoints = [\"198.19.0.3\", \"198.19.1.2\"]\n";
  EXPECT_TRUE(has_error(errors_of(bad), where(bad, "\"198.19.1.2\"", 1),
                        "198.19.1.2:47910 is already the endpoint of the peer at"))
      << ::testing::PrintToString(errors_of(bad));
}

// peer.fec and peer.fec_max_overhead: adaptive FEC at the transport's cap
// by default, "off" for selective repeat alone; bad values are errors at
// their position.
TEST(ConfigStartupChecks, PeerFecKeys) {
  const std::string peer_end = "endpoint = \"198.19.0.2\"\n";
  auto with = [&](const std::string& keys) {
    std::string t = kBase;
    t.insert(t.find(peer_end) + peer_end.size(), keys);
    return t;
  };
  const GatewayConfig def = parse_config(kBase, "gw.toml");
  EXPECT_TRUE(def.peers[0].fec);
  EXPECT_EQ(def.peers[0].fec_max_overhead, fec::PolicyConfig{}.max_overhead);
  const GatewayConfig off =
      parse_config(with("fec = \"off\"\nfec_max_overhead = 0.05\n"), "gw.toml");
  EXPECT_FALSE(off.peers[0].fec);
  EXPECT_EQ(off.peers[0].fec_max_overhead, 0.05);
  EXPECT_EQ(parse_config(to_toml(off), "again.toml").peers, off.peers);
  EXPECT_TRUE(parse_config(with("fec = \"auto\"\n"), "gw.toml").peers[0].fec);
  std::string bad = with("fec = \"on\"\n");
  EXPECT_TRUE(
      has_error(errors_of(bad), where(bad, "\"on\""), "peer.fec: 'on' is not \"auto\" or \"off\""))
      << ::testing::PrintToString(errors_of(bad));
  bad = with("fec = true\n");
  EXPECT_TRUE(
      has_error(errors_of(bad), where_after(bad, "fec = ", "true"), "peer.fec: expected a string"));
  bad = with("fec_max_overhead = 2.0\n");
  EXPECT_TRUE(
      has_error(errors_of(bad), where(bad, "2.0"), "peer.fec_max_overhead: 2 is outside [0.01, 1]"))
      << ::testing::PrintToString(errors_of(bad));
  bad = with("fec_max_overhead = \"lots\"\n");
  EXPECT_TRUE(has_error(errors_of(bad), where(bad, "\"lots\""), "peer.fec_max_overhead"));
  // A change of either needs a restart (the peer's transport is built with it).
  EXPECT_EQ(reload_blockers(def, off), std::vector<std::string>{"[[peer]]"});
}

// rowand has no "direct" mode: it would drop every packet of such a route.
TEST(ConfigStartupChecks, DirectIsNotARowandMode) {
  const std::string text = kBase + "mode = \"direct\"\n";
  const auto errors = errors_of(text);
  EXPECT_TRUE(
      has_error(errors, where(text, "\"direct\""), "route.mode: 'direct' is not a rowand mode"));
  EXPECT_EQ(errors.size(), 1u);
  EXPECT_TRUE(errors_of(kBase + "mode = \"split\"\n").empty());
}

TEST(ConfigStartupChecks, DpdkLinksReachOnlyWhatTheyCan) {
  const std::string text = R"([local]
device = "net_af_packet0,iface=lan0"
address = "198.18.1.1"
insecure = true

[[wan.link]]
name = "wan0"
backend = "dpdk"
device = "net_af_packet1,iface=wan0"
bind = "198.19.0.1"
mtu = 9600

[[peer]]
name = "b"
endpoint = "198.20.0.2"
)";
  const auto errors = errors_of(text);
  EXPECT_TRUE(has_error(errors, where(text, "\"198.20.0.2\""),
                        "is not on the dpdk link 'wan0''s subnet 198.19.0.0/24"));
  EXPECT_TRUE(has_error(errors, where(text, "\"wan0\""), "above the dpdk backend's 9000"));
  EXPECT_EQ(errors.size(), 2u);
}

TEST(ConfigExamples, TwoSiteMatchesTheTestbedContract) {
  const GatewayConfig a = load_example("two-site/a.toml");
  const GatewayConfig b = load_example("two-site/b.toml");
  EXPECT_EQ(Prefix({a.local.address, a.local.prefix_len}).to_string(), "198.18.1.1/24");
  EXPECT_EQ(Prefix({b.local.address, b.local.prefix_len}).to_string(), "198.18.2.1/24");
  ASSERT_EQ(a.wan.links.size(), 1u);
  ASSERT_EQ(b.wan.links.size(), 1u);
  EXPECT_EQ(a.wan.links[0].backend, WanBackend::kUdp);
  EXPECT_EQ(a.wan.links[0].bind.to_string(), "198.19.0.1:47910");
  EXPECT_EQ(b.wan.links[0].bind.to_string(), "198.19.0.2:47910");
  ASSERT_EQ(a.peers.size(), 1u);
  ASSERT_EQ(b.peers.size(), 1u);
  EXPECT_EQ(a.peers[0].endpoint.to_string(), b.wan.links[0].bind.to_string());
  EXPECT_EQ(b.peers[0].endpoint.to_string(), a.wan.links[0].bind.to_string());
  EXPECT_EQ(a.peers[0].links, std::vector<std::string>{"wan0"});  // default: every link
  ASSERT_EQ(a.routes.size(), 2u);
  ASSERT_EQ(b.routes.size(), 2u);
  EXPECT_EQ(a.routes[0].prefix.to_string(), "198.18.2.0/24");
  EXPECT_EQ(b.routes[0].prefix.to_string(), "198.18.1.0/24");
  // IPv6 (2001:2::/48): the gateways' second address and the peer's prefix.
  EXPECT_EQ(Prefix({a.local.address6, a.local.prefix_len6}).to_string(), "2001:2:0:1::1/64");
  EXPECT_EQ(Prefix({b.local.address6, b.local.prefix_len6}).to_string(), "2001:2:0:2::1/64");
  EXPECT_EQ(a.routes[1].prefix.to_string(), "2001:2:0:2::/64");
  EXPECT_EQ(b.routes[1].prefix.to_string(), "2001:2:0:1::/64");
  EXPECT_EQ(a.routes[0].mode, RouteMode::kPassthrough);
  EXPECT_EQ(a.control.socket, "/run/rowan/a/control.sock");
  EXPECT_EQ(b.control.socket, "/run/rowan/b/control.sock");
  EXPECT_EQ(a.metrics.listen.to_string(), "127.0.0.1:9464");
  EXPECT_EQ(b.metrics.listen.to_string(), "127.0.0.1:9464");
  EXPECT_NE(a.eal.file_prefix, b.eal.file_prefix);
  EXPECT_NE(a.local.device.find("iface=lan0"), std::string::npos);
}

// config/rowand.toml promises to show every key with its default: the values
// it sets must be the ones a config that leaves them out gets.
TEST(ConfigDefaults, ExampleShowsTheRealDefaults) {
  const GatewayConfig ex = load_example("rowand.toml");
  const GatewayConfig min = parse_config(kBase, "min.toml");
  const GatewayConfig def;
  EXPECT_EQ(ex.eal.lcores, def.eal.lcores);
  EXPECT_EQ(ex.eal.file_prefix, def.eal.file_prefix);
  EXPECT_EQ(ex.eal.huge_dir, def.eal.huge_dir);
  EXPECT_EQ(ex.eal.no_huge, def.eal.no_huge);
  EXPECT_EQ(ex.eal.in_memory, def.eal.in_memory);
  EXPECT_EQ(ex.eal.memory_mb, def.eal.memory_mb);
  EXPECT_EQ(ex.eal.extra_args, def.eal.extra_args);
  EXPECT_EQ(ex.local.prefix_len, def.local.prefix_len);
  EXPECT_FALSE(ex.local.mac.has_value());
  EXPECT_EQ(ex.local.mtu, def.local.mtu);
  EXPECT_EQ(ex.local.rx_ring, def.local.rx_ring);
  EXPECT_EQ(ex.local.tx_ring, def.local.tx_ring);
  EXPECT_EQ(ex.local.wake_coalesce, def.local.wake_coalesce);
  EXPECT_EQ(ex.local.queues, def.local.queues);
  EXPECT_EQ(ex.local.queues, QueueMode::kAuto);
  EXPECT_EQ(ex.wan.send_buffer_bdp, def.wan.send_buffer_bdp);
  EXPECT_EQ(ex.wan.recv_window_bdp, def.wan.recv_window_bdp);
  EXPECT_EQ(ex.wan.max_flows, def.wan.max_flows);
  EXPECT_EQ(ex.wan.flow_idle_timeout, def.wan.flow_idle_timeout);
  const WanLinkConfig link_def;
  ASSERT_EQ(ex.wan.links.size(), 1u);
  EXPECT_EQ(ex.wan.links[0].backend, link_def.backend);
  EXPECT_EQ(ex.wan.links[0].rate, link_def.rate);
  EXPECT_EQ(ex.wan.links[0].rtt, link_def.rtt);
  EXPECT_EQ(ex.wan.links[0].mtu, link_def.mtu);
  EXPECT_EQ(ex.wan.links[0].bind.port, kDefaultWanPort);
  ASSERT_EQ(ex.routes.size(), 1u);
  EXPECT_EQ(ex.routes[0].mode, RouteConfig{}.mode);
  EXPECT_EQ(ex.cc.algorithm, def.cc.algorithm);
  EXPECT_EQ(ex.cc.algorithm, std::string(cc::kDefaultAlgorithm));
  EXPECT_TRUE(ex.cc.params.empty());
  EXPECT_EQ(ex.control.socket, def.control.socket);
  EXPECT_EQ(ex.control.group, def.control.group);
  EXPECT_EQ(ex.metrics.enabled, def.metrics.enabled);
  EXPECT_EQ(ex.metrics.listen.to_string(), def.metrics.listen.to_string());
  EXPECT_EQ(ex.log.level, def.log.level);

  // And the defaults a minimal file gets are the struct's: the whole config
  // written back differs from the example only in what the example sets
  // beyond the minimum (none of it a default).
  EXPECT_EQ(to_toml(min).find("[cc.params]"), std::string::npos);
  EXPECT_EQ(min.peers[0].endpoint.port, kDefaultWanPort);
  EXPECT_EQ(min.wan.links[0].rate, link_def.rate);
  EXPECT_EQ(min.control.socket, def.control.socket);
  EXPECT_EQ(min.log.level, def.log.level);
}

TEST(ConfigRoundTrip, ToTomlParsesBackToTheSameConfig) {
  const std::string rich = R"([eal]
lcores = "0-1"
file_prefix = "gw.x"
huge_dir = "/mnt/huge"
in_memory = true
memory_mb = 512
extra_args = ["--vdev", "net_null0", "--log-level=pmd.*:debug"]

[local]
device = "0000:3b:00.0"
address = "2001:2:1::1"
prefix_len = 64
mac = "02:AB:cd:00:00:01"
mtu = 9000
rx_ring = 2048
tx_ring = 512
wake_coalesce = "250us"
queues = "distributor"
private_key_file = "/etc/rowan/gw.key"

[wan]
send_buffer_bdp = 1.5
recv_window_bdp = 3
max_flows = 100
flow_idle_timeout = "1.5s"

[[wan.link]]
name = "fiber-1"
backend = "dpdk"
bind = "198.19.5.1:5000"
device = "0000:3b:00.1"
prefix_len = 24
next_hop = "198.19.5.254"
rate = "400gbit"
rtt = "150us"
mtu = 9000

[[wan.link]]
name = "backup"
bind = "[2001:2:e::1]"
rate = "1500kbit"
rtt = "1234567ns"

[[peer]]
name = "east"
endpoint = "198.20.0.2"
links = ["fiber-1"]
public_key = "Ywn0gdQzaTZ5Ey7XAyLFM7u3kF6g8MIO0b1CFNBPr0w="

[[peer]]
name = "west"
endpoint = "[2001:2:e::2]"
links = ["backup"]
public_key = "hH8Ik1Qc5WbRf07sf4x/s0cd5Gv5bCeDNlJ9ttHDtjk="

[[route]]
prefix = "2001:2:2::/48"
peer = "east"
mode = "split"
vlan = 300

[[route]]
prefix = "2001:2:3::/48"
peer = "east"
mode = "passthrough"
vlan = "untagged"

[cc]
algorithm = "cubic"
[cc.params]
beta = 0.8
hystart = false
initial_cwnd_packets = 20

[control]
socket = "/tmp/x/\"odd\" name.sock"
group = ""

[metrics]
enabled = false
listen = "[::1]:9100"

[log]
level = "debug"
)";
  for (const std::string& text : {rich, read_file(example("rowand.toml")), kBase}) {
    const GatewayConfig c1 = parse_config(text, "in.toml");
    const std::string t1 = to_toml(c1);
    GatewayConfig c2;
    ASSERT_NO_THROW(c2 = parse_config(t1, "out.toml")) << t1;
    const std::string t2 = to_toml(c2);
    EXPECT_EQ(t2.substr(t2.find('\n')), t1.substr(t1.find('\n')));
    EXPECT_TRUE(reload_blockers(c1, c2).empty());
  }
  const GatewayConfig c = parse_config(rich, "in.toml");
  EXPECT_EQ(c.local.mac.value()[1], 0xAB);
  EXPECT_EQ(c.wan.links[0].rtt, Duration::from_us(150));
  EXPECT_EQ(c.wan.links[0].rate, BitsPerSec::from_gbps(400));
  EXPECT_EQ(c.wan.links[1].rate, BitsPerSec::from_bps(1500000));
  EXPECT_EQ(c.wan.links[1].bind.port, kDefaultWanPort);
  EXPECT_EQ(c.wan.flow_idle_timeout, Duration::from_ms(1500));
  EXPECT_EQ(c.wan.recv_window_bdp, 3.0);
  EXPECT_EQ(c.routes[0].mode, RouteMode::kSplit);
  EXPECT_EQ(c.routes[0].vlan, (VlanPolicy{VlanPolicy::Mode::kVid, 300}));
  EXPECT_EQ(c.routes[1].vlan, (VlanPolicy{VlanPolicy::Mode::kUntagged, 0}));
  EXPECT_EQ(c.cc.params.values().at("beta"), "0.8");
  EXPECT_EQ(c.cc.params.values().at("hystart"), "false");
  EXPECT_EQ(c.control.socket, "/tmp/x/\"odd\" name.sock");
  EXPECT_EQ(c.eal.extra_args.size(), 3u);
}

// Values are compared, not their text: the same values written another way
// need nothing; every key of a section counts (local.roce_mtu too); the one
// [wan] key that reloads in place (flow_idle_timeout) is not a blocker.
TEST(ConfigReload, BlockersCompareValues) {
  const GatewayConfig a = parse_config(kBase, "a.toml");
  std::string same = kBase;
  same.replace(same.find("\"198.19.0.2\""), 12, "\"198.19.0.2:47910\"");
  same.replace(same.find("[[peer]]"), 0, "[wan]\nsend_buffer_bdp = 2\n");
  EXPECT_TRUE(reload_blockers(a, parse_config(same, "same.toml")).empty());
  std::string text = kBase;
  text.replace(text.find("[local]\n"), 8, "[local]\nroce_mtu = 1024\n");
  EXPECT_EQ(reload_blockers(a, parse_config(text, "b.toml")), std::vector<std::string>{"[local]"});
  text = kBase;
  text.replace(text.find("[[peer]]"), 0, "[wan]\nflow_idle_timeout = \"5s\"\n");
  EXPECT_TRUE(reload_blockers(a, parse_config(text, "c.toml")).empty());
  text.replace(text.find("flow_idle_timeout"), 0, "max_flows = 7\n");
  EXPECT_EQ(reload_blockers(a, parse_config(text, "d.toml")), std::vector<std::string>{"[wan]"});
}

TEST(ConfigReload, OnlyRoutesCcAndLogReloadInPlace) {
  const GatewayConfig a = parse_config(kBase, "a.toml");
  std::string text = kBase + "[cc.params]\ntarget_queue = \"300us\"\n[log]\nlevel = \"debug\"\n";
  text.replace(text.find("198.18.2.0/24"), 13, "198.18.4.0/22");
  EXPECT_TRUE(reload_blockers(a, parse_config(text, "b.toml")).empty());
  text += "[metrics]\nlisten = \"127.0.0.1:9999\"\n";
  text.replace(text.find("[local]\n"), 8, "[local]\nmtu = 1500\n");
  EXPECT_EQ(reload_blockers(a, parse_config(text, "c.toml")),
            (std::vector<std::string>{"[local]", "[metrics]"}));
}

}  // namespace
}  // namespace rowan::gw
