// rowand's telemetry on the live two-site testbed (docs/telemetry.md):
//  - a scrape of each gateway passes `promtool check metrics` and carries the
//    metrics an operator needs, with values that match the traffic sent;
//  - the DPDK telemetry socket answers the /rowan/... commands;
//  - a rejected and then an accepted reload show in the reload metrics;
//  - a real Prometheus server scrapes both gateways, loads the alert rules,
//    and every Grafana panel expression (variables substituted) returns data.
//
// The gateways' exposers listen on 127.0.0.1:9464 inside their namespaces;
// the test reaches them through a small forwarder per namespace (a thread that
// joined the namespace with setns and relays connections from a listening
// socket it opened before, in the test's own namespace).
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "tools/paths.h"
#include "tools/shell.h"
#include "tools/testbed.h"

namespace rowan::test {
namespace {

using nlohmann::json;

/// Relays TCP connections made to 127.0.0.1:port() (this namespace) to
/// 127.0.0.1:`target_port` inside network namespace `ns`.
class NsForwarder {
 public:
  NsForwarder(const std::string& ns, uint16_t target_port) {
    listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        listen(listen_fd_, 16) != 0 ||
        getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      return;
    }
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this, ns, target_port] { run(ns, target_port); });
  }
  ~NsForwarder() {
    stop_ = true;
    shutdown(listen_fd_, SHUT_RDWR);
    if (thread_.joinable()) thread_.join();
    close(listen_fd_);
  }
  NsForwarder(const NsForwarder&) = delete;
  NsForwarder& operator=(const NsForwarder&) = delete;
  uint16_t port() const { return port_; }

 private:
  void run(const std::string& ns, uint16_t target_port) {
    // setns changes only this thread; the relay threads it starts inherit it.
    const int nsfd = open(("/run/netns/" + ns).c_str(), O_RDONLY | O_CLOEXEC);
    if (nsfd < 0 || setns(nsfd, CLONE_NEWNET) != 0) return;
    close(nsfd);
    std::vector<std::thread> relays;
    while (!stop_) {
      pollfd p{listen_fd_, POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) continue;
      const int c = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) continue;
      relays.emplace_back([this, c, target_port] { relay(c, target_port); });
    }
    for (auto& t : relays) t.join();
  }
  void relay(int c, uint16_t target_port) {
    const int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(target_port);
    if (connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
      char buf[16384];
      pollfd p[2] = {{c, POLLIN, 0}, {s, POLLIN, 0}};
      bool open_conn = true;
      while (open_conn && !stop_) {
        if (poll(p, 2, 100) <= 0) continue;
        for (int i = 0; i < 2 && open_conn; ++i) {
          if ((p[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
          const ssize_t n = read(p[i].fd, buf, sizeof buf);
          if (n <= 0 || write(p[1 - i].fd, buf, static_cast<size_t>(n)) != n) open_conn = false;
        }
      }
    }
    close(s);
    close(c);
  }
  int listen_fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

/// One sample value of `name{labels...}` from exposition text (first match
/// whose label text contains every `contains`), or -1.
double sample(const std::string& text, const std::string& name,
              const std::vector<std::string>& contains = {}) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    if (line.compare(0, name.size(), name) != 0) continue;
    const char next = line.size() > name.size() ? line[name.size()] : '\0';
    if (next != '{' && next != ' ') continue;
    bool all = true;
    for (const auto& c : contains) all = all && line.find(c) != std::string::npos;
    if (!all) continue;
    return std::stod(line.substr(line.rfind(' ') + 1));
  }
  return -1;
}

/// A TCP port on 127.0.0.1 nobody listens on right now (0 if none found).
uint16_t free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  uint16_t port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  close(fd);
  return port;
}

/// Sends `cmd` on a DPDK telemetry v2 socket and returns the reply.
json telemetry(const std::string& path, const std::string& cmd) {
  const int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::snprintf(a.sun_path, sizeof a.sun_path, "%s", path.c_str());
  json out;
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
    std::vector<char> buf(65536);
    if (read(fd, buf.data(), buf.size()) > 0 &&  // the greeting
        write(fd, cmd.data(), cmd.size()) == static_cast<ssize_t>(cmd.size())) {
      const ssize_t n = read(fd, buf.data(), buf.size());
      if (n > 0) out = json::parse(std::string(buf.data(), static_cast<size_t>(n)), nullptr, false);
    }
  }
  close(fd);
  return out;
}

class MetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string why =
        testbed_missing({"iperf3", "curl", "promtool", "prometheus"},
                        {"/tools/rowan-wanem/rowan-wanem", "/daemon/rowand/rowand"});
    if (!why.empty()) GTEST_SKIP() << why;
    tb_ = std::make_unique<Testbed>();
    ASSERT_TRUE(tb_->held()) << "the testbed lock stayed taken";
    script_ = tb_->script();
    ctl_ = tb_->rowanctl();
    const ShellResult r = tb_->up("--mode passthrough --rate 200mbit --rtt 20ms");
    ASSERT_EQ(r.status, 0) << "two-site up --mode passthrough failed";
  }
  void TearDown() override {
    if (tb_ && tb_->held()) {
      EXPECT_TRUE(tb_->down()) << "two-site down left something behind";
    }
    tb_.reset();
  }

  ShellResult exec(char site, const std::string& cmd) {
    return shell(script_ + " exec " + site + " -- " + cmd);
  }
  /// A few seconds of TCP from site A to site B: RTT samples, cwnd, goodput.
  /// Returns the bytes iperf3's receiver got (0 on failure).
  double traffic(int seconds) {
    exec('b', "sh -c 'iperf3 -s -1 -D --logfile /dev/null'");
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    const ShellResult r = exec('a', "iperf3 -c 198.18.2.10 -t " + std::to_string(seconds) + " -J");
    EXPECT_EQ(r.status, 0) << "iperf3 from site A to site B failed";
    if (r.status != 0) return 0;
    return json::parse(r.out)["end"]["sum_received"]["bytes"].get<double>();
  }
  std::string scrape(char site) {
    const ShellResult r = shell(std::string("ip netns exec rowan-") + site +
                                "-gw curl -sf --max-time 5 http://127.0.0.1:9464/metrics");
    EXPECT_EQ(r.status, 0) << "no scrape from gateway " << site;
    return r.out;
  }
  /// rowanctl reload on `site` (its stdout and stderr, and its status), then
  /// waits for one publish interval.
  ShellResult reload(char site) {
    const ShellResult r =
        shell(ctl_ + " -s /run/rowan/" + std::string(1, site) + "/control.sock reload 2>&1");
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    return r;
  }

  std::unique_ptr<Testbed> tb_;
  std::string script_, ctl_;
};

TEST_F(MetricsTest, ScrapePassesPromtoolAndMatchesTraffic) {
  // Scrape site A while iperf3 runs: the bottleneck estimate follows the
  // delivery rate of the last ~10 round trips, so it is checked mid-transfer.
  std::string during;
  std::thread mid([&] {
    std::this_thread::sleep_for(std::chrono::seconds(4));
    during = scrape('a');
  });
  const double received = traffic(6);
  mid.join();
  ASSERT_GT(received, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // one publish interval
  for (char site : {'a', 'b'}) {
    SCOPED_TRACE(std::string("gateway ") + site);
    const std::string text = scrape(site);
    ASSERT_FALSE(text.empty());
    // promtool check metrics: exit 0 means no lint problem (3 would list them).
    std::ofstream(binary_dir() + "/metrics-scrape.txt") << text;
    const ShellResult lint =
        shell("promtool check metrics < " + binary_dir() + "/metrics-scrape.txt 2>&1");
    EXPECT_EQ(lint.status, 0) << lint.out;
    EXPECT_EQ(sample(text, "rowan_build_info"), 1);
    const std::string peer = site == 'a' ? "peer=\"site-b\"" : "peer=\"site-a\"";
    EXPECT_EQ(sample(text, "rowan_peer_up", {peer}), 1);
    EXPECT_GT(sample(text, "rowan_peer_rtt_seconds_count", {peer}), 10);
    EXPECT_GT(sample(text, "rowan_peer_queueing_delay_seconds_count", {peer}), 10);
    // The testbed's RTT is 20 ms: the min RTT is about that.
    const double min_rtt = sample(text, "rowan_peer_min_rtt_seconds", {peer});
    EXPECT_GT(min_rtt, 0.015);
    EXPECT_LT(min_rtt, 0.060);
    EXPECT_GT(sample(text, "rowan_peer_cwnd_bytes", {peer}), 0);
    EXPECT_GT(sample(text, "rowan_peer_last_receive_timestamp_seconds", {peer}), 1.7e9);
    // The testbed's links are encrypted (scripts/lib/gateways.sh): a session
    // was confirmed, and when.
    EXPECT_GE(sample(text, "rowan_peer_handshakes_total", {peer}), 1);
    EXPECT_GT(sample(text, "rowan_peer_last_handshake_timestamp_seconds", {peer}), 1.7e9);
    EXPECT_GT(sample(text, "rowan_port_receive_packets_total", {"role=\"local\""}), 0);
    EXPECT_GE(sample(text, "rowan_drops_total", {"reason=\"no_route\""}), 0);
    EXPECT_EQ(sample(text, "rowan_route_mode", {"mode=\"passthrough\""}), 1);
    EXPECT_EQ(sample(text, "rowan_config_last_reload_successful"), 1);
    EXPECT_GT(sample(text, "rowan_packet_loop_iterations_total"), 0);
  }
  // Everything iperf3 received went through site A's gateway as IP packets
  // (headers on top) and as acknowledged stream bytes (record framing on
  // top); the other traffic of the test (ARP, the iperf3 control
  // connection) is small.
  const std::string a = scrape('a');
  const double carried = sample(a, "rowan_peer_carried_bytes_total", {"peer=\"site-b\""});
  const double goodput = sample(a, "rowan_peer_goodput_bytes_total", {"peer=\"site-b\""});
  EXPECT_GE(carried, received);
  EXPECT_LT(carried, 1.2 * received + 1e6);
  EXPECT_GE(goodput, received);
  EXPECT_LT(goodput, 1.2 * received + 1e6);
  // Mid-transfer there is a bottleneck estimate (bytes/s), below twice the
  // 200 Mbit/s link, and the BDP is that estimate times the min RTT.
  const double btlbw = sample(during, "rowan_peer_bottleneck_bandwidth_bytes_per_second");
  EXPECT_GT(btlbw, 10e3);
  EXPECT_LT(btlbw, 2 * 200e6 / 8);
  const double bdp = sample(during, "rowan_peer_bdp_bytes", {"peer=\"site-b\""});
  const double min_rtt = sample(during, "rowan_peer_min_rtt_seconds", {"peer=\"site-b\""});
  EXPECT_NEAR(bdp, btlbw * min_rtt, 0.01 * bdp + 2);
  EXPECT_GT(sample(a, "rowan_peer_bdp_bytes", {"peer=\"site-b\""}), 0);
  EXPECT_GT(sample(a, "rowan_route_active_flows", {"prefix=\"198.18.2.0/24\""}), 0);
}

TEST_F(MetricsTest, TelemetrySocketAnswersRowanCommands) {
  traffic(1);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const std::string sock = "/var/run/dpdk/rowand-a/dpdk_telemetry.v2";
  ASSERT_EQ(access(sock.c_str(), F_OK), 0) << sock << " does not exist";
  const json peers = telemetry(sock, "/rowan/peers");
  ASSERT_TRUE(peers.contains("/rowan/peers")) << peers.dump();
  EXPECT_EQ(peers["/rowan/peers"], json::array({"site-b"}));
  const json peer = telemetry(sock, "/rowan/peer,site-b")["/rowan/peer"];
  ASSERT_TRUE(peer.is_object()) << peer.dump();
  EXPECT_EQ(peer.value("state", ""), "up");
  EXPECT_GT(peer.value("packets_sent", uint64_t{0}), 100U);
  EXPECT_GT(std::stod(peer.value("min_rtt_s", "0")), 0.015);
  const json status = telemetry(sock, "/rowan/status")["/rowan/status"];
  ASSERT_TRUE(status.is_object()) << status.dump();
  EXPECT_TRUE(status.contains("drops_no_route")) << status.dump();
  EXPECT_GT(status.value("local_rx_packets", uint64_t{0}), 0U);
  const json routes = telemetry(sock, "/rowan/routes")["/rowan/routes"];
  ASSERT_TRUE(routes.is_array()) << routes.dump();
  EXPECT_NE(std::find(routes.begin(), routes.end(), "198.18.2.0/24 site-b passthrough"),
            routes.end())
      << routes.dump();
  EXPECT_EQ(telemetry(sock, "/rowan/link,wan0")["/rowan/link"].value("peer", ""), "site-b");
  // An unknown peer is an error (null), not an empty answer.
  EXPECT_TRUE(telemetry(sock, "/rowan/peer,nobody")["/rowan/peer"].is_null());
}

TEST_F(MetricsTest, ReloadResultIsExported) {
  const std::string cfg = "/run/rowan/two-site/rowand-a.toml";
  std::string good;
  {
    std::ifstream in(cfg);
    good.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  ASSERT_FALSE(good.empty());
  const double t0 = sample(scrape('a'), "rowan_config_last_reload_success_timestamp_seconds");
  std::ofstream(cfg) << good << "\n[bogus]\n";
  // rowanctl waits for the daemon's attempt: rejected, with the check's
  // FILE:LINE:COL lines, and a non-zero exit.
  const ShellResult rejected = reload('a');
  EXPECT_EQ(rejected.status, 1) << rejected.out;
  EXPECT_NE(rejected.out.find(cfg + ":"), std::string::npos) << rejected.out;
  EXPECT_NE(rejected.out.find(": unknown key 'bogus'"), std::string::npos) << rejected.out;
  EXPECT_NE(rejected.out.find("reload rejected"), std::string::npos) << rejected.out;
  std::string text = scrape('a');
  EXPECT_EQ(sample(text, "rowan_config_last_reload_successful"), 0);
  EXPECT_EQ(sample(text, "rowan_config_reloads_total", {"result=\"failure\""}), 1);
  EXPECT_EQ(sample(text, "rowan_config_last_reload_success_timestamp_seconds"), t0);
  std::ofstream(cfg) << good;
  const ShellResult accepted = reload('a');
  EXPECT_EQ(accepted.status, 0) << accepted.out;
  EXPECT_EQ(accepted.out.rfind("reload accepted: ", 0), 0u) << accepted.out;
  text = scrape('a');
  EXPECT_EQ(sample(text, "rowan_config_last_reload_successful"), 1);
  EXPECT_EQ(sample(text, "rowan_config_reloads_total", {"result=\"success\""}), 1);
  EXPECT_GT(sample(text, "rowan_config_last_reload_success_timestamp_seconds"), t0);
}

TEST_F(MetricsTest, PrometheusScrapesBothGatewaysAndEveryPanelReturnsData) {
  NsForwarder fa("rowan-a-gw", 9464);
  NsForwarder fb("rowan-b-gw", 9464);
  ASSERT_NE(fa.port(), 0);
  ASSERT_NE(fb.port(), 0);
  char tmpl[] = "/tmp/rowan-prom-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  const uint16_t web = free_port();
  ASSERT_NE(web, 0);
  std::ofstream(dir + "/prometheus.yml")
      << "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
      << "rule_files: [\"" << source_dir() << "/deploy/prometheus/rowan.rules.yml\"]\n"
      << "scrape_configs:\n"
      << "  - job_name: rowan\n"
      << "    static_configs:\n"
      << "      - targets: [\"127.0.0.1:" << fa.port() << "\"]\n"
      << "        labels: {instance: gw-a}\n"
      << "      - targets: [\"127.0.0.1:" << fb.port() << "\"]\n"
      << "        labels: {instance: gw-b}\n";
  const std::string api = "http://127.0.0.1:" + std::to_string(web) + "/api/v1";
  ASSERT_EQ(shell("prometheus --config.file=" + dir + "/prometheus.yml --storage.tsdb.path=" + dir +
                  "/data --web.listen-address=127.0.0.1:" + std::to_string(web) +
                  " --log.level=warn >" + dir + "/prometheus.log 2>&1 & echo $! >" + dir + "/pid")
                .status,
            0);
  struct Cleanup {
    std::string dir;
    ~Cleanup() { shell("kill $(cat " + dir + "/pid) 2>/dev/null; sleep 0.5; rm -rf " + dir); }
  } cleanup{dir};

  auto query = [&](const std::string& expr) {
    const ShellResult r =
        shell("curl -sf --max-time 10 " + api + "/query --data-urlencode 'query=" + expr + "'");
    return r.status == 0 ? json::parse(r.out, nullptr, false) : json();
  };
  // Both targets up (the forwarders and exposers answer).
  bool up = false;
  for (int i = 0; i < 150 && !up; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    const json r = query("sum(up{job=\"rowan\"})");
    up = r.is_object() && !r["data"]["result"].empty() && r["data"]["result"][0]["value"][1] == "2";
  }
  ASSERT_TRUE(up) << shell("cat " + dir + "/prometheus.log").out;

  // Traffic while Prometheus scrapes, so rates and histogram quantiles have
  // samples in their windows.
  exec('b', "sh -c 'iperf3 -s -1 -D --logfile /dev/null'");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  std::thread iperf([&] { exec('a', "iperf3 -c 198.18.2.10 -t 15 -b 50M >/dev/null"); });
  std::this_thread::sleep_for(std::chrono::seconds(8));

  // The alert rules load and evaluate without errors.
  const ShellResult rules = shell("curl -sf " + api + "/rules");
  ASSERT_EQ(rules.status, 0);
  for (const json& g : json::parse(rules.out)["data"]["groups"]) {
    for (const json& r : g["rules"]) {
      EXPECT_EQ(r.value("health", ""), "ok") << r.value("name", "") << ": " << r.dump();
    }
  }

  // Every panel of every dashboard, with its variables substituted, for both
  // gateways (each gateway's peer is the other site).
  int checked = 0;
  for (const char* file : {"rowan-overview.json", "rowan-peer.json"}) {
    std::ifstream in(source_dir() + "/deploy/grafana/dashboards/" + file);
    const json dash = json::parse(in);
    for (const auto& [instance, peer] :
         std::vector<std::pair<std::string, std::string>>{{"gw-a", "site-b"}, {"gw-b", "site-a"}}) {
      for (const json& panel : dash["panels"]) {
        for (const json& target : panel["targets"]) {
          std::string expr = target["expr"];
          expr = std::regex_replace(expr, std::regex("\\$__rate_interval"), "10s");
          expr = std::regex_replace(expr, std::regex("\\$instance"), instance);
          expr = std::regex_replace(expr, std::regex("\\$peer"), peer);
          const json r = query(expr);
          ASSERT_TRUE(r.is_object()) << file << " / " << panel["title"] << ": " << expr;
          EXPECT_EQ(r.value("status", ""), "success") << expr;
          EXPECT_FALSE(r["data"]["result"].empty())
              << file << " / " << panel["title"] << " returned no data for " << instance << ": "
              << expr;
          ++checked;
        }
      }
    }
  }
  EXPECT_GT(checked, 40);
  iperf.join();
}

// rowand under a fake systemd: NOTIFY_SOCKET and WATCHDOG_USEC as systemd
// sets them for Type=notify with WatchdogSec= (deploy/systemd/rowand.service).
// Runs in a namespace of its own (not the testbed): a veth for the local port
// and one carrying the WAN address.
class NotifyTest : public ::testing::Test {
 protected:
  static constexpr const char* kNs = "rowan-tel-notify";
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (network namespaces)";
    if (!have_tool("curl")) GTEST_SKIP() << "curl is not installed";
    rowand_ = binary_dir() + "/daemon/rowand/rowand";
    if (access(rowand_.c_str(), X_OK) != 0) GTEST_SKIP() << rowand_ << " is not built";
    char tmpl[] = "/tmp/rowan-notify-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    shell(std::string("ip netns del ") + kNs + " 2>/dev/null");
    const std::string n = std::string("ip -n ") + kNs + " ";
    ASSERT_EQ(shell(std::string("ip netns add ") + kNs + " && " + n +
                    "link add lan0 type veth peer name lan1 && " + n +
                    "link add wan0 type veth peer name wan1 && " + n +
                    "addr add 198.18.201.1/24 dev wan0 && " + n + "link set lo up && " + n +
                    "link set lan0 up && " + n + "link set lan1 up && " + n +
                    "link set wan0 up && " + n + "link set wan1 up")
                  .status,
              0);
    netns_ = true;
    std::ofstream(dir_ + "/rowand.toml")
        << "[eal]\nfile_prefix = \"rowand-tel-notify\"\nno_huge = true\n"
        << "[local]\ndevice = \"net_af_packet0,iface=lan0\"\naddress = \"198.18.200.1\"\n"
        << "insecure = true\n"
        << "[[wan.link]]\nname = \"wan0\"\nbind = \"198.18.201.1:47910\"\n"
        << "[[peer]]\nname = \"far\"\nendpoint = \"198.18.201.2:47910\"\n"
        << "[[route]]\nprefix = \"198.18.202.0/24\"\npeer = \"far\"\n"
        << "[control]\nsocket = \"" << dir_ << "/control.sock\"\ngroup = \"\"\n"
        << "[metrics]\nlisten = \"127.0.0.1:9464\"\n";
    fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::snprintf(a.sun_path, sizeof a.sun_path, "%s/notify.sock", dir_.c_str());
    ASSERT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  }
  void TearDown() override {
    if (!pid_.empty())
      shell("kill " + pid_ + " 2>/dev/null; sleep 0.5; kill -9 " + pid_ + " 2>/dev/null");
    if (fd_ >= 0) close(fd_);
    if (netns_) shell(std::string("ip netns del ") + kNs);
    if (!dir_.empty()) shell("rm -rf " + dir_);
  }
  /// Starts rowand in the namespace with the notify environment.
  void start(const std::string& config) {
    const ShellResult r =
        shell("NOTIFY_SOCKET=" + dir_ + "/notify.sock WATCHDOG_USEC=400000 ip netns exec " + kNs +
              " " + rowand_ + " -c " + config + " >" + dir_ + "/rowand.log 2>&1 & echo $!");
    pid_ = r.out.substr(0, r.out.find('\n'));
  }
  /// Notify messages until `until` appears in one or `timeout` passes.
  std::vector<std::string> messages(const std::string& until, std::chrono::milliseconds timeout) {
    std::vector<std::string> out;
    const auto end = std::chrono::steady_clock::now() + timeout;
    char buf[4096];
    while (std::chrono::steady_clock::now() < end) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 50) <= 0) continue;
      const ssize_t n = recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) continue;
      out.emplace_back(buf, static_cast<size_t>(n));
      if (out.back().find(until) != std::string::npos) break;
    }
    return out;
  }
  bool metrics_answer() {
    return shell(std::string("ip netns exec ") + kNs +
                 " curl -sf --max-time 2 http://127.0.0.1:9464/metrics >/dev/null")
               .status == 0;
  }

  std::string rowand_, dir_, pid_;
  int fd_ = -1;
  bool netns_ = false;
};

TEST_F(NotifyTest, ReadyAfterExposerStatusReloadWatchdogStopping) {
  start(dir_ + "/rowand.toml");
  const auto boot = messages("READY=1", std::chrono::seconds(20));
  ASSERT_FALSE(boot.empty()) << shell("cat " + dir_ + "/rowand.log").out;
  ASSERT_NE(boot.back().find("READY=1"), std::string::npos)
      << shell("cat " + dir_ + "/rowand.log").out;
  // STATUS= lines came before READY=1, and by then the exposer and the
  // control socket answer.
  EXPECT_GE(boot.size(), 2U);
  EXPECT_NE(boot.front().find("STATUS="), std::string::npos);
  EXPECT_NE(boot.back().find("STATUS=forwarding"), std::string::npos);
  EXPECT_TRUE(metrics_answer());
  EXPECT_EQ(access((dir_ + "/control.sock").c_str(), F_OK), 0);
  // WATCHDOG=1 every half period (200 ms) while the packet loop runs.
  const auto pets = messages("never", std::chrono::milliseconds(1500));
  int watchdog = 0;
  for (const auto& m : pets) watchdog += m == "WATCHDOG=1" ? 1 : 0;
  EXPECT_GE(watchdog, 4);
  // SIGHUP: RELOADING=1, then READY=1.
  shell("kill -HUP " + pid_);
  const auto reload = messages("READY=1", std::chrono::seconds(5));
  bool reloading = false;
  for (const auto& m : reload) reloading = reloading || m.find("RELOADING=1") != std::string::npos;
  EXPECT_TRUE(reloading);
  ASSERT_FALSE(reload.empty());
  EXPECT_NE(reload.back().find("READY=1"), std::string::npos);
  EXPECT_NE(reload.back().find("configuration reloaded"), std::string::npos);
  // SIGTERM: STOPPING=1.
  shell("kill " + pid_);
  const auto stop = messages("STOPPING=1", std::chrono::seconds(5));
  ASSERT_FALSE(stop.empty());
  EXPECT_EQ(stop.back(), "STOPPING=1");
  pid_.clear();
}

TEST_F(NotifyTest, BadConfigExits78AndTakenMetricsPortExits69) {
  std::ofstream(dir_ + "/bad.toml") << "[local]\nbogus = 1\n";
  EXPECT_EQ(shell(rowand_ + " -c " + dir_ + "/bad.toml 2>/dev/null").status, 78);
  // Something else already listens on the metrics port: rowand fails the
  // start (69) instead of running without metrics, and never says READY=1.
  const ShellResult squat =
      shell(std::string("ip netns exec ") + kNs +
            " /usr/bin/python3 -c 'import socket,time; s=socket.socket(); "
            "s.bind((\"127.0.0.1\",9464)); s.listen(); time.sleep(30)' >/dev/null 2>&1 & echo $!");
  const std::string squatter = squat.out.substr(0, squat.out.find('\n'));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const ShellResult r =
      shell("NOTIFY_SOCKET=" + dir_ + "/notify.sock ip netns exec " + kNs + " " + rowand_ + " -c " +
            dir_ + "/rowand.toml >" + dir_ + "/rowand.log 2>&1");
  shell("kill " + squatter);
  EXPECT_EQ(r.status, 69) << shell("cat " + dir_ + "/rowand.log").out;
  for (const auto& m : messages("READY=1", std::chrono::milliseconds(200))) {
    EXPECT_EQ(m.find("READY=1"), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace rowan::test
