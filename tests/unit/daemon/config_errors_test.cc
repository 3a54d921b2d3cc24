// rowand's config errors: every class of error is reported at its own
// FILE:LINE:COL, all of them at once; --check-config; value types; hostile input.
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

TEST(ConfigErrors, ParseErrorHasItsPosition) {
  const std::string text = kBase + "[cc]\nalgorithm = \"rowan\n";
  const auto errors = errors_of(text);
  ASSERT_EQ(errors.size(), 1u);
  // toml++ reports where the string breaks: the end of line 18.
  EXPECT_EQ(errors[0].rfind("t.toml:18:19: ", 0), 0u) << errors[0];
  const auto e2 = errors_of("[local]\ndevice = = 1\n");
  ASSERT_EQ(e2.size(), 1u);
  EXPECT_EQ(e2[0].rfind("t.toml:2:", 0), 0u) << e2[0];
}

TEST(ConfigErrors, UnknownKeysAnywhere) {
  const std::string text = kBase + R"(mode2 = "x"
[cc]
algoritm = "rowan"
[cc.params]
[control]
sock = "/x"
[bogus]
x = 1
[metrics]
enable = true
)";
  const std::string t2 = text + "[eal]\nlcore = \"1\"\n";
  std::string t3 = t2;
  t3.replace(t3.find("[[peer]]\n"), 9, "[[peer]]\nlink = [\"wan0\"]\n");
  t3.replace(t3.find("address"), 7, "adress");
  const auto errors = errors_of(t3);
  EXPECT_TRUE(has_error(errors, where(t3, "adress"), "unknown key 'local.adress'"));
  EXPECT_TRUE(has_error(errors, where(t3, "[local]"), "local.address is required"));
  EXPECT_TRUE(has_error(errors, where(t3, "link ="), "unknown key 'peer.link'"));
  EXPECT_TRUE(has_error(errors, where(t3, "mode2"), "unknown key 'route.mode2'"));
  EXPECT_TRUE(has_error(errors, where(t3, "algoritm"), "unknown key 'cc.algoritm'"));
  EXPECT_TRUE(has_error(errors, where(t3, "sock ="), "unknown key 'control.sock'"));
  EXPECT_TRUE(has_error(errors, where(t3, "bogus"), "unknown key 'bogus'"));
  EXPECT_TRUE(has_error(errors, where(t3, "enable ="), "unknown key 'metrics.enable'"));
  EXPECT_TRUE(has_error(errors, where(t3, "lcore ="), "unknown key 'eal.lcore'"));
  EXPECT_EQ(errors.size(), 9u);
}

TEST(ConfigErrors, WrongTypesAndBadValues) {
  const std::string text = R"([local]
device = 5
address = "198.18.1.300"
mtu = "big"
rx_ring = 1000
mac = "01:00:5e:00:00:01"
wake_coalesce = "20ms"
queues = "rss"

[wan]
max_flows = -1
send_buffer_bdp = true

[[wan.link]]
name = "w 0"
bind = "198.19.0.1:99999"
rate = "1gbitz"
rtt = "soon"
mtu = 40

[[peer]]
name = "b"
endpoint = "198.19.0"

[[route]]
prefix = "198.18.2.5/24"
peer = "b"
mode = "tunnel"

[[route]]
prefix = "198.18.3.0/33"
peer = "b"

[metrics]
enabled = "yes"
listen = "localhost:9464"

[log]
level = "verbose"

[eal]
no_huge = true
in_memory = true
extra_args = ["--file-prefix=x", 3]
lcores = "all"
)";
  const auto errors = errors_of(text);
  EXPECT_TRUE(
      has_error(errors, where(text, "5\n"), "local.device: expected a string, got an integer"));
  EXPECT_TRUE(has_error(errors, where(text, "\"198.18.1.300\""), "not an IPv4 or IPv6 address"));
  EXPECT_TRUE(has_error(errors, where(text, "\"big\""), "local.mtu: expected an integer"));
  EXPECT_TRUE(has_error(errors, where(text, "1000"), "not a power of two"));
  EXPECT_TRUE(has_error(errors, where(text, "\"01:00"), "not a unicast MAC"));
  EXPECT_TRUE(has_error(errors, where(text, "\"20ms\""), "local.wake_coalesce: '20ms' is outside"));
  EXPECT_TRUE(has_error(errors, where(text, "\"rss\""), "local.queues: 'rss' is not \"auto\" or"));
  EXPECT_TRUE(has_error(errors, where(text, "-1"), "wan.max_flows: -1 is outside"));
  EXPECT_TRUE(has_error(errors, where(text, "true\n"), "wan.send_buffer_bdp: expected a number"));
  EXPECT_TRUE(has_error(errors, where(text, "\"w 0\""), "wan.link.name"));
  EXPECT_TRUE(has_error(errors, where(text, "\"198.19.0.1:99999\""), "wan.link.bind"));
  EXPECT_TRUE(has_error(errors, where(text, "\"1gbitz\""), "bad rate '1gbitz'"));
  EXPECT_TRUE(has_error(errors, where(text, "\"soon\""), "bad duration 'soon'"));
  EXPECT_TRUE(has_error(errors, where(text, "40\n"), "wan.link.mtu: 40 is outside"));
  EXPECT_TRUE(has_error(errors, where(text, "\"198.19.0\""), "peer.endpoint"));
  EXPECT_TRUE(has_error(errors, where(text, "\"198.18.2.5/24\""), "host bits zero"));
  EXPECT_TRUE(has_error(errors, where(text, "\"tunnel\""), "route.mode"));
  EXPECT_TRUE(has_error(errors, where(text, "\"198.18.3.0/33\""), "route.prefix"));
  EXPECT_TRUE(has_error(errors, where(text, "\"yes\""), "metrics.enabled: expected a boolean"));
  EXPECT_TRUE(has_error(errors, where(text, "\"localhost:9464\""), "metrics.listen"));
  EXPECT_TRUE(has_error(errors, where(text, "\"verbose\""), "log.level"));
  EXPECT_TRUE(has_error(errors, where(text, "[eal]"), "no_huge and in_memory"));
  EXPECT_TRUE(has_error(errors, where(text, "\"--file-prefix=x\""), "eal.file_prefix instead"));
  EXPECT_TRUE(has_error(errors, where(text, "3]"), "eal.extra_args: expected a string"));
  EXPECT_TRUE(has_error(errors, where(text, "\"all\""), "eal.lcores"));
  // Sorted by position.
  EXPECT_TRUE(std::is_sorted(errors.begin(), errors.end(), [](const auto& a, const auto& b) {
    auto key = [](const std::string& s) {
      const size_t c1 = s.find(':'), c2 = s.find(':', c1 + 1), c3 = s.find(':', c2 + 1);
      return std::make_pair(std::stoi(s.substr(c1 + 1, c2 - c1 - 1)),
                            std::stoi(s.substr(c2 + 1, c3 - c2 - 1)));
    };
    return key(a) < key(b);
  }));
}

TEST(ConfigErrors, DuplicatesAndReferences) {
  const std::string text = kBase + R"(
[[route]]
prefix = "198.18.2.128/25"
peer = "nobody"

[[route]]
prefix = "198.18.0.0/16"
peer = "b"

[[route]]
prefix = "198.19.0.0/24"
peer = "b"

[[peer]]
name = "b"
endpoint = "198.19.0.3"
links = ["wan0", "wan9", "wan0"]

[[wan.link]]
name = "wan0"
bind = "198.19.0.1:47911"

[[wan.link]]
name = "fast"
backend = "dpdk"
bind = "198.19.0.1:47912"

[[wan.link]]
name = "slow"
bind = "198.19.0.1"
)";
  const auto errors = errors_of(text);
  EXPECT_TRUE(has_error(errors, where(text, "\"nobody\""), "route.peer: unknown peer 'nobody'"));
  EXPECT_TRUE(has_error(errors, where(text, "\"198.18.2.128/25\""),
                        "overlaps 198.18.2.0/24 of the route at 15:10"));
  EXPECT_TRUE(has_error(errors, where(text, "\"198.18.0.0/16\""), "overlaps the local subnet"));
  EXPECT_TRUE(has_error(errors, where(text, "\"198.19.0.0/24\""), "covers the endpoint"));
  EXPECT_TRUE(has_error(errors, where_after(text, "name = \"b\"\nendpoint = \"198.19.0.3", "\"b\""),
                        "duplicate peer name 'b' (first at 11:8)"));
  EXPECT_TRUE(has_error(errors, where(text, "\"wan9\""), "unknown link 'wan9'"));
  EXPECT_TRUE(has_error(errors, where(text, "\"wan0\"]"), "link 'wan0' is listed twice"));
  EXPECT_TRUE(has_error(errors,
                        where_after(text, "name = \"wan0\"\nbind = \"198.19.0.1:47911", "\"wan0"),
                        "duplicate link name 'wan0' (first at 7:8)"));
  EXPECT_TRUE(has_error(errors, where(text, "[[wan.link]]\nname = \"fast\""),
                        "wan.link.device is required with backend = \"dpdk\""));
  EXPECT_TRUE(has_error(errors, where(text, "\"198.19.0.1\"\n"), "already bound"));
}

TEST(ConfigErrors, CongestionControl) {
  {
    const std::string text = kBase + "[cc]\nalgorithm = \"reno2\"\n";
    const auto errors = errors_of(text);
    ASSERT_EQ(errors.size(), 1u);
    EXPECT_TRUE(has_error(errors, where(text, "\"reno2\""), "unknown congestion control 'reno2'"));
    EXPECT_NE(errors[0].find("cubic"), std::string::npos);  // lists the known ones
  }
  {
    const std::string text = kBase + "[cc]\nalgorithm = \"cubic\"\n[cc.params]\nbeta = 0.95\n";
    EXPECT_TRUE(has_error(errors_of(text), where(text, "beta"), "cc.params (cubic): beta"));
  }
  {
    const std::string text =
        kBase + "[cc]\nalgorithm = \"cubic\"\n[cc.params]\nbeta = 0.7\nwibble = 1\n";
    EXPECT_TRUE(has_error(errors_of(text), where(text, "wibble"), "unknown parameter(s): wibble"));
  }
  {
    const std::string text = kBase + "[cc.params]\nbogus = [1]\n";
    EXPECT_TRUE(has_error(errors_of(text), where(text, "[1]"), "cc.params.bogus: expected"));
  }
  // The default algorithm's defaults are valid, and parameters of every
  // registered algorithm are checked by that algorithm.
  for (const auto& name : cc::Registry::names()) {
    const std::string cc = fmt::format("[cc]\nalgorithm = \"{}\"\n", name);
    const std::string text = fmt::format("{}{}[cc.params]\nno_such_param = 1\n", kBase, cc);
    EXPECT_TRUE(has_error(errors_of(text), where(text, "no_such_param"), "no_such_param")) << name;
    EXPECT_TRUE(errors_of(kBase + cc).empty()) << name;
  }
}

TEST(ConfigErrors, MissingRequiredParts) {
  {
    const std::string text = "[log]\nlevel = \"info\"\n";
    const auto errors = errors_of(text);
    EXPECT_TRUE(has_error(errors, "t.toml:1:1: ", "missing [local] table"));
    EXPECT_TRUE(has_error(errors, "t.toml:1:1: ", "missing [[wan.link]]"));
    EXPECT_EQ(errors.size(), 2u);
  }
  {
    const std::string text = "\n[local]\nmtu = 1500\n[[wan.link]]\nname = \"x\"\n";
    const auto errors = errors_of(text);
    EXPECT_TRUE(has_error(errors, "t.toml:2:1: ", "local.device is required"));
    EXPECT_TRUE(has_error(errors, "t.toml:2:1: ", "local.address is required"));
    EXPECT_TRUE(has_error(errors, "t.toml:4:1: ", "wan.link.bind is required"));
    EXPECT_TRUE(has_error(errors, "t.toml:2:1: ", "local.private_key_file is required"));
    EXPECT_EQ(errors.size(), 4u);
  }
  {
    const std::string text = "local = 3\nwan = []\npeer = {}\n";
    const auto errors = errors_of(text);
    EXPECT_TRUE(has_error(errors, "t.toml:1:9: ", "local: expected a table, got an integer"));
    EXPECT_TRUE(has_error(errors, "t.toml:2:7: ", "wan: expected a table"));
    EXPECT_TRUE(has_error(errors, "t.toml:3:8: ", "peer: expected an array of tables ([[peer]])"));
  }
}

TEST(ConfigErrors, ManyErrorsAllReportedInOneConfigError) {
  const std::string text = R"([local]
device = "d"
address = "x"
[[wan.link]]
name = "a"
bind = "1.2.3.4"
rate = "0"
[[peer]]
name = "p"
endpoint = "1.2.3.5"
links = ["z"]
[[route]]
prefix = "10.0.0.0/8"
peer = "q"
[cc]
algorithm = "nope"
)";
  try {
    (void)parse_config(text, "t.toml");
    FAIL() << "parsed";
  } catch (const ConfigError& e) {
    ASSERT_EQ(e.errors().size(), 7u) << e.what();
    EXPECT_TRUE(has_error(e.errors(), "t.toml:1:1: ", "local.private_key_file is required"));
    EXPECT_TRUE(has_error(e.errors(), "t.toml:8:1: ", "peer.public_key is required"));
    EXPECT_TRUE(has_error(e.errors(), "t.toml:3:11: ", "local.address"));
    EXPECT_TRUE(has_error(e.errors(), "t.toml:7:8: ", "wan.link.rate"));
    EXPECT_TRUE(has_error(e.errors(), "t.toml:11:10: ", "unknown link 'z'"));
    EXPECT_TRUE(has_error(e.errors(), "t.toml:14:8: ", "unknown peer 'q'"));
    EXPECT_TRUE(has_error(e.errors(), "t.toml:16:13: ", "unknown congestion control"));
    // what() is the same list, one per line.
    const std::string what = e.what();
    EXPECT_EQ(std::count(what.begin(), what.end(), '\n'), 6);
  }
}

// VLAN tags and CNP classes (vlan.h): [local] vlan, cnp_dscp, cnp_pcp and
// [[route]] vlan parse; the defaults keep the sender's tag and send CNPs in
// mlx5's class; bad values are errors at their FILE:LINE:COL.
TEST(Config, VlanAndCnpClass) {
  const GatewayConfig d = parse_config(kBase, "d.toml");
  EXPECT_EQ(d.local.vlan.mode, VlanPolicy::Mode::kSender);
  EXPECT_EQ(d.local.cnp_dscp, 48);
  EXPECT_EQ(d.local.cnp_pcp, 6);
  EXPECT_FALSE(d.routes[0].vlan.has_value());
  std::string text = kBase;
  text.replace(text.find("insecure"), 0, "vlan = 300\ncnp_dscp = 46\ncnp_pcp = 5\n");
  text += "vlan = \"untagged\"\n";
  const GatewayConfig c = parse_config(text, "c.toml");
  EXPECT_EQ(c.local.vlan, (VlanPolicy{VlanPolicy::Mode::kVid, 300}));
  EXPECT_EQ(c.local.cnp_dscp, 46);
  EXPECT_EQ(c.local.cnp_pcp, 5);
  ASSERT_TRUE(c.routes[0].vlan.has_value());
  EXPECT_EQ(c.routes[0].vlan->mode, VlanPolicy::Mode::kUntagged);
  text = kBase;
  text.replace(text.find("insecure"), 0, "vlan = 4095\ncnp_dscp = 64\ncnp_pcp = 8\n");
  text += "vlan = \"trunk\"\n";
  const auto errors = errors_of(text);
  ASSERT_EQ(errors.size(), 4u);
  EXPECT_TRUE(has_error(errors, "t.toml:4:8: ", "local.vlan: 4095 is not a VLAN ID"));
  EXPECT_TRUE(has_error(errors, "t.toml:5:12: ", "local.cnp_dscp: 64 is outside [0, 63]"));
  EXPECT_TRUE(has_error(errors, "t.toml:6:11: ", "local.cnp_pcp: 8 is outside [0, 7]"));
  EXPECT_TRUE(has_error(errors, "t.toml:20:8: ", "route.vlan: 'trunk' is not a VLAN ID"));
}

TEST(CheckConfig, ExitStatusAndOutput) {
  const fs::path dir =
      fs::temp_directory_path() / ("rowan-config-test-" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::string good = (dir / "good.toml").string();
  const std::string bad = (dir / "bad.toml").string();
  std::ofstream(good) << kBase;
  std::ofstream(bad) << kBase << "[log]\nlevel = 3\nfoo = 1\n";
  {
    std::ostringstream out, err;
    EXPECT_EQ(check_config_main(good, out, err), 0);
    EXPECT_EQ(out.str(), good + ": configuration ok\n");
    EXPECT_EQ(err.str(), "");
  }
  {
    std::ostringstream out, err;
    EXPECT_EQ(check_config_main(bad, out, err), kExitConfig);
    EXPECT_EQ(out.str(), "");
    EXPECT_EQ(err.str(), bad + ":18:9: log.level: expected a string, got an integer\n" + bad +
                             ":19:1: unknown key 'log.foo'\n");
  }
  {
    std::ostringstream out, err;
    const std::string missing = (dir / "missing.toml").string();
    EXPECT_EQ(check_config_main(missing, out, err), kExitConfig);
    EXPECT_EQ(err.str().rfind(missing + ":1:1: cannot open", 0), 0u) << err.str();
  }
  {
    std::ostringstream out, err;
    EXPECT_EQ(check_config_main(dir.string(), out, err), kExitConfig);
    EXPECT_EQ(err.str(), dir.string() + ":1:1: cannot read the file: it is a directory\n");
  }
  fs::remove_all(dir);
}

TEST(ConfigErrors, EalCoreLists) {
  auto lcores_error = [](const std::string& lcores) -> std::string {
    const std::string text = "[eal]\nlcores = \"" + lcores + "\"\n" + kBase;
    const auto errors = errors_of(text);
    if (errors.empty()) return "";
    EXPECT_EQ(errors.size(), 1u);
    EXPECT_EQ(errors[0].rfind("t.toml:2:10: eal.lcores: ", 0), 0u) << errors[0];
    return errors[0];
  };
  // Every process may run on CPU 0 of this machine's kind; the syntax forms.
  for (const char* ok : {"0", "0@0", "(0,1)@0", "(0-2)@(0)", "1@0,2@0", "3-5@0"}) {
    EXPECT_EQ(lcores_error(ok), "") << ok;
  }
  for (const char* bad :
       {"", "all", "0,", "1-", "2-1@0", "(0,1", "0@", "0@@1", "0;1", "0 1", "-1"}) {
    EXPECT_NE(lcores_error(bad).find("is not an EAL core list"), std::string::npos) << bad;
  }
  EXPECT_NE(lcores_error("0,0@0").find("lcore 0 is given twice"), std::string::npos);
  EXPECT_NE(lcores_error("200@0").find("lcore 200 is not below"), std::string::npos);
  EXPECT_NE(lcores_error("0@4000").find("CPU 4000 is not available"), std::string::npos);
  EXPECT_NE(lcores_error("99999999").find("not an EAL core list"), std::string::npos);
}

TEST(ConfigTypes, PrefixesAndAddresses) {
  auto p = parse_prefix("198.18.2.0/24");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->to_string(), "198.18.2.0/24");
  EXPECT_TRUE(p->contains(roce::parse_ip_addr("198.18.2.200")));
  EXPECT_FALSE(p->contains(roce::parse_ip_addr("198.18.3.1")));
  EXPECT_FALSE(p->contains(roce::parse_ip_addr("::1")));
  EXPECT_TRUE(p->overlaps(*parse_prefix("198.18.0.0/15")));
  EXPECT_TRUE(p->overlaps(*parse_prefix("198.18.2.64/26")));
  EXPECT_FALSE(p->overlaps(*parse_prefix("198.18.3.0/24")));
  EXPECT_TRUE(parse_prefix("0.0.0.0/0")->overlaps(*p));
  EXPECT_FALSE(parse_prefix("::/0")->overlaps(*p));
  EXPECT_TRUE(parse_prefix("2001:2::/48")->contains(roce::parse_ip_addr("2001:2:0:ffff::1")));
  EXPECT_EQ(network_of({roce::parse_ip_addr("198.18.1.77"), 20}).to_string(), "198.18.0.0/20");
  for (const char* bad : {"198.18.2.1/24", "198.18.2.0", "198.18.2.0/", "198.18.2.0/33",
                          "2001:2::/129", "x/8", "198.18.2.0/-1", "198.18.2.0/2 4", "/24"}) {
    EXPECT_FALSE(parse_prefix(bad)) << bad;
  }
  EXPECT_EQ(parse_sockaddr("198.19.0.2:47910", 1)->to_string(), "198.19.0.2:47910");
  EXPECT_EQ(parse_sockaddr("198.19.0.2", 7)->to_string(), "198.19.0.2:7");
  EXPECT_EQ(parse_sockaddr("[2001:2::2]:80", 1)->to_string(), "[2001:2::2]:80");
  EXPECT_EQ(parse_sockaddr("[2001:2::2]", 9)->to_string(), "[2001:2::2]:9");
  EXPECT_EQ(parse_sockaddr("2001:2::2", 9)->to_string(), "[2001:2::2]:9");
  for (const char* bad : {"198.19.0.2:0", "198.19.0.2:65536", "[198.19.0.2]:1", "[2001:2::2]x",
                          "host:1", "", ":80", "198.19.0.2:", "[2001:2::2"}) {
    EXPECT_FALSE(parse_sockaddr(bad, 5)) << bad;
  }
  EXPECT_FALSE(parse_sockaddr(std::string("1.2.3.4\0:5", 10), 5));
}

// parse_config never crashes: truncations and byte mutations of the example
// (a small deterministic fuzz; the libFuzzer target goes further).
TEST(ConfigRobustness, TruncatedAndMutatedInputNeverCrash) {
  const std::string text = read_file(example("rowand.toml"));
  ASSERT_FALSE(text.empty());
  size_t parsed = 0, rejected = 0;
  auto attempt = [&](const std::string& t) {
    try {
      (void)parse_config(t, "f.toml");
      ++parsed;
    } catch (const ConfigError& e) {
      ++rejected;
      for (const auto& line : e.errors()) ASSERT_EQ(line.rfind("f.toml:", 0), 0u) << line;
    }
  };
  for (size_t n = 0; n < text.size(); n += 13) attempt(text.substr(0, n));
  std::mt19937 rng(42);
  const std::string alphabet = "[]=\"'.,:/{}\n#0123456789abc\\ \t\x01\xff";
  for (int i = 0; i < 1500; ++i) {
    std::string t = text;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < edits; ++k) {
      const size_t at = rng() % t.size();
      switch (rng() % 3) {
        case 0:
          t[at] = alphabet[rng() % alphabet.size()];
          break;
        case 1:
          t.erase(at, 1 + rng() % 8);
          break;
        default:
          t.insert(at, 1, alphabet[rng() % alphabet.size()]);
      }
    }
    attempt(t);
  }
  attempt(std::string(100000, '['));
  attempt(std::string("a = ") + std::string(5000, '[') + std::string(5000, ']'));
  attempt(std::string("\0\0\0", 3));
  EXPECT_GT(rejected, 0u);
  EXPECT_GT(parsed, 0u);  // comment edits and the like still parse
}

}  // namespace
}  // namespace rowan::gw
