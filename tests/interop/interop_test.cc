// Interop with real RoCEv2 stacks: unmodified rdma-core, perftest and
// librdmacm tools on two soft-RoCE guests (scripts/two-site --hosts qemu, one
// Linux rxe per site) talk through the testbed over an emulated WAN (20 ms
// RTT, 0.1% loss each way by default). Every mode of the suite (a test
// parameter: direct is the baseline, passthrough goes through rowand) runs the
// same tools; each must complete with no QP in error and no data mismatch, and
// where gateways carry the traffic their counters must show the WAN losses
// they repaired.
//
// Booting the guests is slow under emulation, so one testbed serves all tests
// of a mode: the first test of a mode brings it up (after tearing down any
// other), and it stays up until the next mode or the end of the program. ctest
// runs one mode per process (tests/interop/CMakeLists.txt).
//
// Environment:
//   ROWAN_INTEROP_SCALE    multiplies the message counts (default 1; bench/interop uses more)
//   ROWAN_INTEROP_WAN      two-site up arguments for the WAN (default "--rtt 20ms --loss 0.1%")
//   ROWAN_INTEROP_RESULTS  file to append one JSON line per tool run to (bench/interop)
//   ROWAN_INTEROP_PERFTEST_ARGS  more arguments for every perftest run of both sides (e.g. "-e")
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "tools/paths.h"
#include "tools/shell.h"
#include "tools/testbed_lock.h"

namespace rowan::test {
namespace {

using nlohmann::json;

/// One way of connecting the sites: a two-site --mode.
struct Mode {
  std::string name;       ///< two-site --mode
  bool gateways;          ///< rowand carries the traffic (its counters must show repairs)
  std::string loss = {};  ///< WAN loss each way (empty: ROWAN_INTEROP_WAN's); set at run time
                          ///< (`two-site wanem set loss=`) when the mode's testbed is already up
};

// gtest prints a test's parameter with it.
[[maybe_unused]] void PrintTo(const Mode& mode, std::ostream* os) {
  *os << "--mode " << mode.name;
  if (!mode.loss.empty()) *os << " --loss " << mode.loss;
}

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : fallback;
}

int scale() {
  const int s = std::atoi(env_or("ROWAN_INTEROP_SCALE", "1").c_str());
  return s > 0 ? s : 1;
}

// Single-quotes `s` for /bin/sh.
std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) {
    if (c == '\'') {
      q += "'\\''";
    } else {
      q += c;
    }
  }
  return q + "'";
}

std::string script() { return source_dir() + "/scripts/two-site"; }

// The guests see the host's root read-only, but their /tmp, /run and /dev/shm
// are their own tmpfs (docs/qemu-hosts.md), so a checkout or build folder under
// /tmp (as a CI clone may be) is invisible to them. Files a guest must run are
// copied to /var/tmp/rowan-interop first; returns the copy's path.
constexpr const char* kGuestStage = "/var/tmp/rowan-interop";
std::string stage_for_guest(const std::string& host_path) {
  namespace fs = std::filesystem;
  fs::create_directories(kGuestStage);
  const fs::path dst = fs::path(kGuestStage) / fs::path(host_path).filename();
  fs::copy_file(host_path, dst, fs::copy_options::overwrite_existing);
  return dst.string();
}

// The testbed shared by the tests of one mode.
class Testbed {
 public:
  static Testbed& get() {
    static Testbed t;
    return t;
  }

  /// Up for `mode` (tearing down another mode's testbed first). Empty when
  /// up, else why not; a failed boot is not retried for every test.
  std::string ensure(const Mode& mode) {
    if (mode_ == mode.name) {
      // The same testbed at another loss rate: the emulator changes it at run time.
      if (error_.empty() && !mode.loss.empty() && mode.loss != loss_) {
        const ShellResult r = shell(script() + " wanem set loss=" + mode.loss + " 2>&1");
        if (r.status != 0) return "two-site wanem set loss=" + mode.loss + " failed:\n" + r.out;
        loss_ = mode.loss;
        wan_ = base_wan() + " --loss " + loss_;
      }
      return error_;
    }
    down();
    if (!lock_) {
      lock_ = std::make_unique<TestbedLock>(std::chrono::seconds(600));
      if (!lock_->held()) {
        lock_.reset();
        return "the testbed lock stayed taken";
      }
    }
    shell(script() + " down >/dev/null 2>&1");
    mode_ = mode.name;
    loss_ = mode.loss;
    wan_ = base_wan() + (loss_.empty() ? "" : " --loss " + loss_);
    const std::string& wan = wan_;
    const auto t0 = std::chrono::steady_clock::now();
    const ShellResult r =
        shell(script() + " up --hosts qemu --mode " + mode.name + " " + wan + " 2>&1");
    up_s_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    error_ =
        r.status == 0 ? "" : "two-site up --hosts qemu --mode " + mode.name + " failed:\n" + r.out;
    if (r.status == 0) {
      std::cerr << r.out;
      error_ = read_gids();
    }
    return error_;
  }

  /// rxe0's GID index of a guest's IPv4 address (RoCEv2), as its agent found
  /// it at boot. Usually 1, but the order of rxe's GIDs depends on when the
  /// guest's addresses appeared: one boot had an IPv6 GID at index 1 on one
  /// guest, and perftest refused to connect ("Incompatibility issue with GID
  /// types").
  int gid(char site) const { return gid_[site == 'a' ? 0 : 1]; }

  void down() {
    if (mode_.empty()) return;
    const ShellResult r = shell(script() + " down 2>&1");
    EXPECT_EQ(r.status, 0) << "two-site down left something behind:\n" << r.out;
    // Nothing of the guests may be left: QEMU processes, TAPs (they live in
    // the namespaces, which down checks) and run folders.
    EXPECT_NE(shell("pgrep -f 'qemu-system-x86_6[4] -name rowan-two-site-' >/dev/null").status, 0)
        << "a QEMU of the testbed survived two-site down";
    mode_.clear();
    error_.clear();
  }

  void release() {
    down();
    lock_.reset();
  }

  double up_seconds() const { return up_s_; }
  /// The WAN the testbed has now (two-site up arguments).
  std::string wan() const { return wan_.empty() ? base_wan() : wan_; }

 private:
  static std::string base_wan() { return env_or("ROWAN_INTEROP_WAN", "--rtt 20ms --loss 0.1%"); }

  /// The guests' GID indexes from `two-site status --json` (guests.X.gid_ipv4).
  std::string read_gids() {
    const ShellResult r = shell(script() + " status --json");
    const json st = json::parse(r.out, nullptr, false);
    gid_[0] = gid_[1] = -1;
    for (int i = 0; i < 2; ++i) {
      const json::json_pointer at(std::string("/guests/") + "ab"[i] + "/gid_ipv4");
      if (r.status == 0 && st.is_object() && st.contains(at) && st[at].is_number()) {
        gid_[i] = st[at].get<int>();
      }
    }
    if (gid_[0] < 0 || gid_[1] < 0) return "two-site status --json gives no guest GID index";
    if (gid_[0] != 1 || gid_[1] != 1) {
      std::cerr << "interop: rxe0 IPv4 GID index " << gid_[0] << " on a, " << gid_[1] << " on b\n";
    }
    return "";
  }

  std::unique_ptr<TestbedLock> lock_;
  std::string mode_;
  std::string loss_;
  std::string wan_;
  std::string error_;
  double up_s_ = 0;
  int gid_[2] = {1, 1};  ///< IPv4 GID index of guest a, b
};

class TestbedEnvironment : public ::testing::Environment {
 public:
  void TearDown() override { Testbed::get().release(); }
};
[[maybe_unused]] ::testing::Environment* const kEnvironment =
    ::testing::AddGlobalTestEnvironment(new TestbedEnvironment);

// What one guest command did.
struct GuestRun {
  int status = -1;
  std::string out;                          ///< stdout and stderr
  double elapsed_s = 0;                     ///< the tool alone, measured in the guest
  std::map<std::string, int64_t> counters;  ///< rxe0 hw_counters deltas over the command
};

// Wraps `cmd` so that the guest prints rxe0's counters before and after it
// and the tool's own run time. `retry_refused` reruns a client whose TCP
// connection to the server was refused, or whose RDMA CM connect was
// rejected (the server is not listening yet).
std::string instrumented(const std::string& cmd, bool retry_refused) {
  const std::string counters =
      "grep -H . /sys/class/infiniband/rxe0/ports/1/hw_counters/* 2>/dev/null | "
      "sed 's|^.*/||'";
  std::ostringstream s;
  s << "echo '@@before'; " << counters << "; ";
  // The tool's stderr goes to a file shown after its stdout: interleaved
  // into a pipe, it would land in the middle of buffered stdout lines.
  if (retry_refused) {
    s << "for try in $(seq 120); do t0=$(date +%s%N); out=$(" << cmd
      << " 2>/tmp/tool.$$.err); rc=$?; t1=$(date +%s%N); "
         "if [ $rc -ne 0 ] && grep -q -e \"Couldn't connect\" -e RDMA_CM_EVENT_REJECTED "
         "/tmp/tool.$$.err; "
         "then sleep 0.5; continue; fi; break; done; printf '%s\\n' \"$out\"; ";
  } else {
    s << "t0=$(date +%s%N); " << cmd << " 2>/tmp/tool.$$.err; rc=$?; t1=$(date +%s%N); ";
  }
  s << "cat /tmp/tool.$$.err; echo \"@@elapsed_ns $((t1 - t0))\"; echo '@@after'; " << counters
    << "; exit $rc";
  return s.str();
}

GuestRun parse_run(const ShellResult& r) {
  GuestRun run;
  run.status = r.status;
  std::istringstream in(r.out);
  std::string line;
  std::map<std::string, int64_t> before;
  int section = 0;  // 1 before, 2 tool output, 3 after
  while (std::getline(in, line)) {
    if (line == "@@before") {
      section = 1;
      continue;
    }
    if (line == "@@after") {
      section = 3;
      continue;
    }
    if (line.rfind("@@elapsed_ns ", 0) == 0) {
      run.elapsed_s = std::stod(line.substr(13)) / 1e9;
      continue;
    }
    const auto colon = line.find(':');
    if ((section == 1 || section == 3) && colon != std::string::npos &&
        line.find_first_not_of("0123456789", colon + 1) == std::string::npos &&
        colon + 1 < line.size()) {
      const std::string key = line.substr(0, colon);
      const int64_t value = std::stoll(line.substr(colon + 1));
      if (section == 1) {
        before[key] = value;
      } else {
        run.counters[key] = value - before[key];
      }
      continue;
    }
    if (section == 1) section = 2;
    run.out += line + "\n";
  }
  return run;
}

GuestRun guest(char site, const std::string& cmd, bool retry_refused = false) {
  return parse_run(shell(script() + " exec " + site + " -- " +
                         quote(instrumented(cmd, retry_refused)) + " 2>&1"));
}

// Waits until the RDMA CM server in `site` listens.
bool cm_listening(char site) {
  return shell(script() + " exec " + site + " -- " +
               quote("for i in $(seq 150); do rdma res show cm_id 2>/dev/null | grep -q LISTEN "
                     "&& exit 0; sleep 0.2; done; exit 1"))
             .status == 0;
}

std::optional<double> match_double(const std::string& text, const std::string& pattern) {
  std::smatch m;
  if (std::regex_search(text, m, std::regex(pattern))) return std::stod(m[1].str());
  return std::nullopt;
}

// The program a guest command line runs (past a leading `nice -n N`).
std::string program_of(const std::string& cmd) {
  std::istringstream words(cmd);
  std::string w;
  words >> w;
  if (w == "nice") {
    words >> w;  // -n
    words >> w;  // N
    words >> w;
  }
  return w;
}

// perftest's result row: "#bytes #iterations BW peak BW average MsgRate".
std::optional<double> perftest_mb_per_s(const std::string& out) {
  return match_double(out, R"(\n\s*\d+\s+\d+\s+[\d.]+\s+([\d.]+)\s+[\d.]+\s*\n)");
}

// The gateways' and the emulator's counters.
struct WanCounters {
  uint64_t retransmitted = 0;  ///< rowand peers: retransmitted_packets, both sites
  uint64_t lost = 0;           ///< rowand peers: lost_packets, both sites
  uint64_t wan_dropped = 0;    ///< rowan-wanem: frames dropped by emulated loss, both ways
};

WanCounters wan_counters(bool gateways) {
  WanCounters c;
  if (gateways) {
    const std::string ctl = binary_dir() + "/daemon/rowanctl/rowanctl";
    for (char site : {'a', 'b'}) {
      const ShellResult r =
          shell(ctl + " -s /run/rowan/" + site + "/control.sock peers --json 2>/dev/null");
      if (r.status != 0) continue;
      for (const json& p : json::parse(r.out, nullptr, false)) {
        c.retransmitted += p.value("retransmitted_packets", uint64_t{0});
        c.lost += p.value("lost_packets", uint64_t{0});
      }
    }
  }
  const ShellResult w = shell(script() + " wanem stats 2>/dev/null");
  const json stats = json::parse(w.out, nullptr, false);
  if (!stats.is_discarded() && stats.contains("stats")) {
    for (const char* dir : {"a2b", "b2a"}) {
      c.wan_dropped += stats["stats"][dir]["dropped"].value("loss", uint64_t{0});
    }
  }
  return c;
}

// A gateway's `rowanctl status --json`; an empty object when it does not answer.
json gateway_status(char site) {
  const std::string ctl = binary_dir() + "/daemon/rowanctl/rowanctl";
  const ShellResult r = shell(ctl + " -s /run/rowan/" + std::string(1, site) +
                              "/control.sock status --json 2>/dev/null");
  json st = json::parse(r.out, nullptr, false);
  return r.status == 0 && st.is_object() ? st : json::object();
}

// Split mode's counters (rowanctl status --json, "split"), summed over both
// gateways: flows really run split, not silently in passthrough.
using SplitCounters = std::map<std::string, int64_t>;

SplitCounters split_counters() {
  SplitCounters c;
  for (char site : {'a', 'b'}) {
    const json st = gateway_status(site);
    if (!st.contains("split")) continue;
    for (const auto& [key, value] : st["split"].items()) {
      if (value.is_number_integer()) c[key] += value.get<int64_t>();
    }
  }
  return c;
}

SplitCounters delta(const SplitCounters& after, const SplitCounters& before) {
  SplitCounters d;
  for (const auto& [key, value] : after) {
    const auto it = before.find(key);
    d[key] = value - (it == before.end() ? 0 : it->second);
  }
  return d;
}

class InteropTest : public ::testing::TestWithParam<Mode> {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (network namespaces, QEMU TAPs)";
    for (const char* tool : {"qemu-system-x86_64", "ib_write_bw", "ibv_rc_pingpong", "rping",
                             "rdma", "jq", "ethtool"}) {
      ASSERT_TRUE(have_tool(tool)) << tool << " is not installed (scripts/setup-deps)";
    }
    for (const char* bin :
         {"/tools/rowan-wanem/rowan-wanem", "/daemon/rowand/rowand", "/daemon/rowanctl/rowanctl"}) {
      ASSERT_EQ(access((binary_dir() + bin).c_str(), X_OK), 0)
          << binary_dir() + bin << " is not built";
    }
    setenv("ROWAN_BUILD_DIR", binary_dir().c_str(), 1);
    unsetenv("ROWAN_WANEM");
    unsetenv("ROWAN_ROWAND");
    setenv("ROWAN_EXEC_TIMEOUT", "240", 1);
    const std::string error = Testbed::get().ensure(GetParam());
    ASSERT_TRUE(error.empty()) << error;
  }

  /// Runs `server` in guest `server_site` and `client` in the other one; the
  /// client connects to the server's site host. `cm`: the tools use RDMA CM
  /// (the client starts when the server listens), else perftest's or
  /// pingpong's TCP exchange (the client retries until the server accepts).
  /// Checks that both complete without errors and records the run.
  GuestRun pair(const std::string& tool, char server_site, const std::string& server,
                const std::string& client, bool cm, uint64_t bytes) {
    const char client_site = server_site == 'a' ? 'b' : 'a';
    const WanCounters before = wan_counters(GetParam().gateways);
    const bool split = GetParam().name == "split";
    const SplitCounters split_before = split ? split_counters() : SplitCounters{};
    auto srv = std::async(std::launch::async, [&] { return guest(server_site, server); });
    GuestRun c;
    if (cm && !cm_listening(server_site)) {
      c.out = "the RDMA CM server did not listen within 30 s";
    } else {
      // An RDMA CM client can still be rejected right after the listen shows
      // (rxe under QEMU): it retries as a TCP client does when refused.
      c = guest(client_site, client, true);
    }
    if (c.status != 0) {
      // A server whose client gave up would wait for it until the exec timeout.
      shell(script() + " exec " + server_site + " -- pkill -x " + program_of(server) +
            " >/dev/null 2>&1");
    }
    const GuestRun s = srv.get();
    const WanCounters after = wan_counters(GetParam().gateways);
    split_ = split ? delta(split_counters(), split_before) : SplitCounters{};

    EXPECT_EQ(c.status, 0) << tool << " client failed:\n" << c.out;
    EXPECT_EQ(s.status, 0) << tool << " server failed:\n" << s.out;
    for (const GuestRun* r : {static_cast<const GuestRun*>(&c), &s}) {
      // perftest: "Completion with error", "Failed status"; pingpong: "Failed
      // status", "invalid data"; rping: "data mismatch"; and rxe's counters.
      for (const char* bad : {"with error", "Failed status", "invalid data", "mismatch", "error"}) {
        EXPECT_EQ(r->out.find(bad), std::string::npos) << tool << " reports '" << bad << "':\n"
                                                       << r->out;
      }
      for (const char* counter : {"retry_exceeded_err", "retry_rnr_exceeded_err"}) {
        const auto it = r->counters.find(counter);
        EXPECT_TRUE(it == r->counters.end() || it->second == 0)
            << tool << ": rxe0 " << counter << " rose by " << it->second;
      }
    }
    const auto delta = [](const GuestRun& r, const char* key) {
      const auto it = r.counters.find(key);
      return it == r.counters.end() ? int64_t{0} : it->second;
    };
    json rec = {
        {"tool", tool},
        {"mode", GetParam().name},
        {"server", std::string(1, server_site)},
        {"ok", c.status == 0 && s.status == 0},
        {"bytes", bytes},
        {"client_s", c.elapsed_s},
        {"server_s", s.elapsed_s},
        {"rxe_duplicate_request", delta(c, "duplicate_request") + delta(s, "duplicate_request")},
        {"rxe_out_of_seq_request", delta(c, "out_of_seq_request") + delta(s, "out_of_seq_request")},
        {"rxe_rcvd_seq_err", delta(c, "rcvd_seq_err") + delta(s, "rcvd_seq_err")},
        {"rxe_completer_retry", delta(c, "completer_retry_err") + delta(s, "completer_retry_err")},
        {"rxe_sent_pkts", delta(c, "sent_pkts") + delta(s, "sent_pkts")},
        {"wan_dropped", after.wan_dropped - before.wan_dropped},
        {"gw_retransmitted", after.retransmitted - before.retransmitted},
        {"gw_lost", after.lost - before.lost},
        {"wan", Testbed::get().wan()},
    };
    // The tool's own figure: perftest's BW average (the larger of client's and
    // server's: under TCG one side sometimes measures 0.00), pingpong's Mbit/s.
    const auto client_mbps = perftest_mb_per_s(c.out).value_or(0);
    const auto server_mbps = perftest_mb_per_s(s.out).value_or(0);
    const auto tool_mbps = std::max(client_mbps, server_mbps);
    if (tool_mbps > 0) rec["tool_mb_per_s"] = tool_mbps;
    // Each side's own (0 when it measured none): in split mode the client's
    // clock stops at gateway A's last ACK, the server's at the last arrival.
    if (client_mbps > 0) rec["client_tool_mb_per_s"] = client_mbps;
    if (server_mbps > 0) rec["server_tool_mb_per_s"] = server_mbps;
    if (const auto mbit = match_double(c.out, R"(= ([\d.]+) Mbit/sec)")) {
      rec["tool_mb_per_s"] = *mbit / 8;
    }
    if (const auto us = match_double(c.out, R"(= ([\d.]+) usec/iter)")) rec["usec_per_iter"] = *us;
    // Payload over the client's whole run (connection set-up included): the
    // same measure for every tool.
    if (c.elapsed_s > 0) rec["mb_per_s"] = static_cast<double>(bytes) / 1e6 / c.elapsed_s;
    if (split) {
      for (const char* key :
           {"flows_paired", "flows_egress", "acks_sent", "naks_sent", "cnps_sent", "acks_consumed",
            "reoriginated", "retransmitted", "egress_timeouts", "fatal"}) {
        rec["split_" + std::string(key)] = split_[key];
      }
    }
    record(rec);
    return c;
  }

  /// In split mode: the last pair() ran split, not silently in passthrough —
  /// a gateway paired the flow(s), acknowledged requests itself, and the
  /// other consumed the responder's ACKs.
  void expect_ran_split(const std::string& tool) {
    if (GetParam().name != "split") return;
    EXPECT_GE(split_["flows_paired"], 1) << tool << ": no flow switched to split mode";
    EXPECT_GE(split_["flows_egress"], 1) << tool << ": no egress gateway took a flow over";
    EXPECT_GT(split_["acks_sent"], 0) << tool << ": the ingress gateway acknowledged nothing";
    EXPECT_GT(split_["acks_consumed"], 0) << tool << ": the egress gateway consumed no ACK";
    // split_fatal is recorded, not checked: ib_write_bw's server destroys its
    // QP once the client is done, and the client is done when gateway A has
    // the data (a local ACK), so gateway B's last packets can meet a QP that
    // is gone and its retries run out (docs/split-mode.md, "The price").
  }

  static void record(const json& rec) {
    ::testing::Test::RecordProperty("result", rec.dump());
    std::cerr << "interop: " << rec.dump() << "\n";
    const std::string file = env_or("ROWAN_INTEROP_RESULTS", "");
    if (!file.empty()) std::ofstream(file, std::ios::app) << rec.dump() << "\n";
  }

  // ibv_rc_pingpong with data checking: the server in `server_site`.
  void rc_pingpong(char server_site) {
    const int n = 20 * scale();
    const int size = 4096;
    const char client_site = server_site == 'a' ? 'b' : 'a';
    const auto args = [&](char site) {
      return "ibv_rc_pingpong -d rxe0 -g " + std::to_string(Testbed::get().gid(site)) + " -n " +
             std::to_string(n) + " -s " + std::to_string(size) + " -c";
    };
    const std::string host = server_site == 'a' ? "198.18.1.10" : "198.18.2.10";
    const GuestRun c =
        pair(std::string("ibv_rc_pingpong ") + (server_site == 'a' ? "b->a" : "a->b"), server_site,
             args(server_site), args(client_site) + " " + host, false,
             2ULL * static_cast<uint64_t>(n) * size);
    EXPECT_NE(c.out.find(std::to_string(n) + " iters in"), std::string::npos)
        << "ibv_rc_pingpong did not report " << n << " iterations:\n"
        << c.out;
    expect_ran_split("ibv_rc_pingpong");
  }

  // The JSON a pyverbs peer prints on its "result: {...}" line (null if none).
  static json peer_result(const std::string& out) {
    std::smatch m;
    if (!std::regex_search(out, m, std::regex(R"(result: (\{.*\}))"))) return json();
    return json::parse(m[1].str(), nullptr, false);
  }

  // A pyverbs peer pair from tests/interop (staged for the guests with the
  // module it imports): the server on site B's host, then the client on A's,
  // each with its GID index and `args`. A failed client stops the server.
  std::pair<ShellResult, ShellResult> pyverbs_pair(const std::string& file,
                                                   const std::string& args) {
    stage_for_guest(source_dir() + "/tests/interop/verbs_common.py");
    const std::string py =
        "/usr/bin/python3 " + stage_for_guest(source_dir() + "/tests/interop/" + file);
    auto srv = std::async(std::launch::async, [&] {
      return shell(script() + " exec b -- " +
                   quote(py + " server --gid-index " + std::to_string(Testbed::get().gid('b')) +
                         " " + args) +
                   " 2>&1");
    });
    const ShellResult c =
        shell(script() + " exec a -- " +
              quote(py + " client --gid-index " + std::to_string(Testbed::get().gid('a')) +
                    " --server 198.18.2.10 " + args) +
              " 2>&1");
    if (c.status != 0) shell(script() + " exec b -- pkill -f " + file + " >/dev/null 2>&1");
    return {c, srv.get()};
  }

  // A perftest bandwidth test over the TCP exchange (or RDMA CM with -R).
  void perftest(const std::string& tool, const std::string& extra) {
    const int n = 30 * scale();
    const int size = 65536;
    const bool cm = extra.find("-R") != std::string::npos;
    // At nice 19: perftest busy-polls its CQ, and in a one-vCPU guest the
    // poll loop otherwise takes half the CPU from rxe's deferred softirq work
    // (ksoftirqd) whenever there is some; how much there is varied from run
    // to run, and a guest's ksoftirqd time went with a slow run (on the LAN:
    // 855 ms at 12.7 MB/s, 187 ms at 22.3). A hardware RNIC's transport does
    // not compete with the application's polling. Every mode runs the same.
    const auto args = [&](char site) {
      return "nice -n 19 " + tool + " -d rxe0 " +
             (cm ? "" : "-x " + std::to_string(Testbed::get().gid(site)) + " ") + "-F -n " +
             std::to_string(n) + " -s " + std::to_string(size) + " " + extra + " " +
             env_or("ROWAN_INTEROP_PERFTEST_ARGS", "");
    };
    const GuestRun c = pair(tool + (extra.empty() ? "" : " " + extra), 'b', args('b'),
                            args('a') + " 198.18.2.10", cm, static_cast<uint64_t>(n) * size);
    // The result row: all iterations done (its bandwidth may read 0.00 under
    // TCG, where perftest's cycle-counter calibration is off).
    std::smatch m;
    ASSERT_TRUE(std::regex_search(c.out, m, std::regex(R"(\n\s*65536\s+(\d+)\s+[\d.]+\s+[\d.]+)")))
        << tool << " printed no result row:\n"
        << c.out;
    EXPECT_EQ(std::stoi(m[1].str()), n) << tool << " did not complete its iterations:\n" << c.out;
    // READs travel end to end: nothing for a split gateway to acknowledge.
    if (tool != "ib_read_bw") expect_ran_split(tool + " " + extra);
  }

  SplitCounters split_;  ///< split counters' change over the last pair() (split mode)
};

TEST_P(InteropTest, RcPingpongDataCheckAToB) { rc_pingpong('b'); }

TEST_P(InteropTest, RcPingpongDataCheckBToA) { rc_pingpong('a'); }

TEST_P(InteropTest, WriteBw) { perftest("ib_write_bw", ""); }

TEST_P(InteropTest, SendBw) { perftest("ib_send_bw", ""); }

TEST_P(InteropTest, ReadBw) { perftest("ib_read_bw", ""); }

TEST_P(InteropTest, WriteBwRdmaCm) { perftest("ib_write_bw", "-R"); }

TEST_P(InteropTest, RpingVerified) {
  const int count = 20 * scale();
  const int size = 4096;
  const std::string common =
      "-a 198.18.2.10 -v -V -C " + std::to_string(count) + " -S " + std::to_string(size);
  const GuestRun c = pair("rping -v -V", 'b', "rping -s " + common, "rping -c " + common, true,
                          2ULL * static_cast<uint64_t>(count) * size);
  // -v prints every ping's payload as the client read it back: "ping data:
  // rdma-ping-N: <pattern>", the pattern cycling through 'A'..'z' from the
  // (N mod 58)th of them.
  std::istringstream in(c.out);
  std::string line;
  int seen = 0;
  const std::regex row(R"(^ping data: rdma-ping-(\d+): (.*)$)");
  while (std::getline(in, line)) {
    std::smatch m;
    if (!std::regex_match(line, m, row)) continue;
    const int i = std::stoi(m[1].str());
    EXPECT_EQ(i, seen) << "ping " << seen << " arrived as " << i;
    const std::string payload = m[2].str();
    ASSERT_FALSE(payload.empty());
    for (size_t k = 0; k < payload.size(); ++k) {
      const char want = static_cast<char>('A' + (i + static_cast<int>(k)) % 58);
      if (payload[k] != want) {
        ADD_FAILURE() << "ping " << i << " payload byte " << k << " is '" << payload[k]
                      << "', not '" << want << "'";
        break;
      }
    }
    ++seen;
  }
  EXPECT_EQ(seen, count) << "rping printed " << seen << " of " << count << " pings:\n" << c.out;
  expect_ran_split("rping");
}

// A wrong R_Key reaches the requester as an error completion, not as silent
// success (tests/interop/rkey_error_peer.py, pyverbs in the guests): a READ
// with a wrong R_Key fails with a remote access error; a WRITE with one fails
// itself (end to end) or, in split mode, where the ingress gateway has
// acknowledged it locally, the READ after it does (docs/split-mode.md, "The
// price"). Split mode only: in direct and passthrough the error is the
// remote host's own NAK, which the other tools already carry end to end.
TEST_P(InteropTest, RemoteAccessErrorReachesRequester) {
  if (GetParam().name != "split") GTEST_SKIP() << "end to end in this mode; split mode only";
  // Once per split testbed (CI time): at the suite's 1 % loss.
  if (GetParam().loss != "1%") GTEST_SKIP() << "runs in Split/ (1 % loss) only";
  const SplitCounters before = split_counters();
  const auto [c, s] = pyverbs_pair("rkey_error_peer.py", "");
  SplitCounters d = delta(split_counters(), before);
  EXPECT_EQ(c.status, 0) << "client:\n" << c.out;
  EXPECT_EQ(s.status, 0) << "server:\n" << s.out;
  EXPECT_EQ(c.out.find("FAIL"), std::string::npos) << c.out;
  EXPECT_EQ(s.out.find("FAIL"), std::string::npos) << s.out;
  // Both QPs ran split (the good WRITEs paired them) and the remote host's
  // fatal NAKs went through the gateways, which failed the flows.
  EXPECT_GE(d["flows_paired"], 2) << "the rkey test's QPs did not run split";
  EXPECT_GE(d["fatal"], 2) << "the gateways saw no fatal NAK";
  // The bad READ's NAK reached its waiting requester through gateway A at
  // once (docs/split-mode.md), not after the requester's own ACK timeout.
  EXPECT_GE(d["fatal_relayed"], 1) << "no fatal NAK was relayed to a waiting requester";
  const json result = peer_result(c.out);
  record({{"tool", "rkey error"},
          {"mode", GetParam().name},
          {"ok", c.status == 0 && s.status == 0},
          {"statuses", result},
          {"split_flows_paired", d["flows_paired"]},
          {"split_fatal", d["fatal"]},
          {"split_fatal_relayed", d["fatal_relayed"]},
          {"split_naks_sent", d["naks_sent"]},
          {"wan", Testbed::get().wan()}});
}

// Atomics end to end (tests/interop/atomic_peer.py): host A FETCH_ADDs 1 on a
// counter in host B's memory, 4 outstanding, through the mode's path, while
// host B adds 1000 to it through a loopback QP of its own. Every returned
// value must count each side's earlier adds exactly once (an atomic lost, or
// replayed and executed twice after a WAN loss, shows), the counter must end
// at the exact sum, and COMPARE_SWAP and READ must see it.
TEST_P(InteropTest, AtomicsFromBothSitesSumExactly) {
  const int ops = std::min(300 * scale(), 900);
  const SplitCounters before = split_counters();
  const auto [c, s] = pyverbs_pair("atomic_peer.py", "--ops " + std::to_string(ops));
  const SplitCounters d = delta(split_counters(), before);
  EXPECT_EQ(c.status, 0) << "client:\n" << c.out;
  EXPECT_EQ(s.status, 0) << "server:\n" << s.out;
  EXPECT_EQ(c.out.find("FAIL"), std::string::npos) << c.out;
  EXPECT_EQ(s.out.find("FAIL"), std::string::npos) << s.out;
  EXPECT_NE(s.out.find("ok    the counter is " + std::to_string(ops + 1000 * ops)),
            std::string::npos)
      << s.out;
  if (GetParam().name == "split") {
    EXPECT_GE(d.at("flows_paired"), 1) << "the atomics' QP did not run split";
  }
  const json result = peer_result(s.out);
  record({{"tool", "atomics"},
          {"mode", GetParam().name},
          {"ok", c.status == 0 && s.status == 0},
          {"ops_each_side", ops},
          {"result", result},
          {"split_flows_paired", d.count("flows_paired") ? d.at("flows_paired") : 0},
          {"wan", Testbed::get().wan()}});
}

// A soft-RoCE guest on a VLAN interface, as a PFC fabric's host is: each
// guest gets eth0.100 with an egress-qos-map that puts its frames at a PFC
// priority (PCP 5 on A, 3 on B), a second address on it (198.18.X.110/32)
// and a route to the other guest's through its gateway on that VLAN, so rxe
// sends RoCEv2 for that address's GID in tagged frames. ib_write_bw with a
// GRH traffic class (DSCP 26) and ibv_rc_pingpong -c (data checked, DSCP 0)
// run between the two VLAN addresses, and dumpcap on each site host
// namespace's side of its gateway link checks what the gateway delivered
// (tests/interop/vlan_check.py): every frame from the other host tagged VID
// 100, its requests in the sender's PCP, its ACKs in the PCP of whoever made
// them (the remote host in passthrough, the local gateway for the local QP in
// split mode: docs/split-mode.md, "Priorities of the gateway's own frames"),
// and the DSCP the application set. Direct mode has no gateway: the kernel
// routers between its sites have no VLAN.
TEST_P(InteropTest, VlanGuestsKeepTheirPcpAndDscp) {
  if (!GetParam().gateways) GTEST_SKIP() << "no gateway in this mode";
  if (GetParam().name == "split" && GetParam().loss != "1%") {
    GTEST_SKIP() << "runs in Split/ (1 % loss) only";
  }
  if (shell("/usr/bin/python3 -c 'import scapy.all' 2>/dev/null").status != 0 ||
      !have_tool("dumpcap")) {
    GTEST_SKIP() << "needs python3-scapy and dumpcap (scripts/setup-deps)";
  }
  constexpr int kVid = 100;
  const int pcp[2] = {5, 3};  // a, b
  const std::string addr[2] = {"198.18.1.110", "198.18.2.110"};
  const std::string gid_hex[2] = {"ffff:c612:016e", "ffff:c612:026e"};
  int gid[2] = {-1, -1};
  const auto undo = [&] {
    for (char site : {'a', 'b'}) {
      shell(script() + " exec " + site + " -- 'ip link del eth0.100' >/dev/null 2>&1");
    }
  };
  undo();
  // The gateways' counters, to judge this test's own span by (they cover
  // the daemons' life, and earlier tests' frames are not this test's).
  const json at_start[2] = {gateway_status('a'), gateway_status('b')};
  for (int i = 0; i < 2; ++i) {
    const char site = "ab"[i];
    const std::string n = std::to_string(i + 1);
    // The GID of the VLAN address (RoCE v2 type); rxe adds it shortly after
    // the address appears.
    const std::string setup =
        "set -e; ip link add link eth0 name eth0.100 type vlan id 100 egress-qos-map 0:" +
        std::to_string(pcp[i]) + "; ip addr add " + addr[i] +
        "/32 dev eth0.100; ip link set eth0.100 up; ip route add " + addr[1 - i] +
        "/32 via 198.18." + n + ".1 dev eth0.100 onlink; p=/sys/class/infiniband/rxe0/ports/1; " +
        "for t in $(seq 50); do for g in $(seq 0 31); do "
        "grep -q " +
        gid_hex[i] +
        " $p/gids/$g 2>/dev/null && "
        "[ \"$(cat $p/gid_attrs/types/$g 2>/dev/null)\" = 'RoCE v2' ] && { echo $g; exit 0; }; "
        "done; sleep 0.2; done; exit 1";
    const ShellResult r = shell(script() + " exec " + site + " -- " + quote(setup) + " 2>&1");
    ASSERT_EQ(r.status, 0) << "VLAN set-up in guest " << site << ":\n" << r.out;
    gid[i] = std::stoi(r.out);
  }
  // Both gateways learn their host on the VLAN (tagged ARP both ways).
  const ShellResult ping = shell(script() + " exec a -- " +
                                 quote("ping -c 3 -W 5 -I " + addr[0] + " " + addr[1]) + " 2>&1");
  ASSERT_EQ(ping.status, 0) << "no ping between the VLAN addresses:\n" << ping.out;

  const std::string py = "/usr/bin/python3 " + source_dir() + "/tests/interop/vlan_check.py";
  const bool split = GetParam().name == "split";
  // Captures on both site links around one tool run; then checks each. A is
  // the requester, and with `both_ways` B too.
  const auto checked = [&](const std::string& what, int dscp, const std::function<void()>& run,
                           bool both_ways, int min_cnps_at_a = 0) {
    std::string pcap[2];
    for (int i = 0; i < 2; ++i) {
      pcap[i] = "/run/rowan/two-site/vlan-guest-" + std::string(1, "ab"[i]) + ".pcap";
      shell(
          "rm -f " + pcap[i] + "; ip netns exec rowan-" + std::string(1, "ab"[i]) +
          "-host dumpcap -q -P -s 128 -i eth0 -f 'udp port 4791 or (vlan and udp port 4791)' -w " +
          pcap[i] + " >/dev/null 2>&1 &");
    }
    for (int i = 0;
         i < 100 && (access(pcap[0].c_str(), F_OK) != 0 || access(pcap[1].c_str(), F_OK) != 0);
         ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    run();
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    shell(
        "pkill -INT -f '[d]umpcap.*vlan-guest-' ; for i in $(seq 50); do "
        "pgrep -f '[d]umpcap.*vlan-guest-' >/dev/null || exit 0; sleep 0.1; done");
    for (int i = 0; i < 2; ++i) {
      // At site i arrive the other host's frames: its requests in its PCP;
      // ACKs for site i's requests from the other host (passthrough), or in
      // split mode from gateway i in site i's own tag once the flow is
      // paired (the remote responder's ACK that pairs it is relayed in its
      // own tag).
      const int other = 1 - i;
      const bool gets_requests = i == 1 || both_ways;
      const bool gets_acks = i == 0 || both_ways;
      std::string ack_pcp = std::to_string(pcp[other]);
      if (split) {
        ack_pcp = std::to_string(pcp[i]) + "," + ack_pcp;
        if (gets_acks) ack_pcp += " --want-ack-pcp " + std::to_string(pcp[i]);
      }
      const ShellResult v = shell(
          py + " " + pcap[i] + " --from " + addr[other] + " --vlan " + std::to_string(kVid) +
          " --request-pcp " + std::to_string(pcp[other]) + " --ack-pcp " + ack_pcp + " --dscp " +
          std::to_string(dscp) + (gets_requests ? " --min-requests 10" : " --min-acks 1") +
          (i == 0 ? " --min-cnps " + std::to_string(min_cnps_at_a) : "") + " 2>&1");
      EXPECT_EQ(v.status, 0) << what << ": frames delivered to site "
                             << "ab"[i] << "'s host:\n"
                             << v.out;
      record({{"tool", "vlan " + what},
              {"mode", GetParam().name},
              {"site", std::string(1, "ab"[i])},
              {"ok", v.status == 0},
              {"check", json::parse(v.out, nullptr, false)},
              {"wan", Testbed::get().wan()}});
    }
  };
  // ib_write_bw between the VLAN addresses in DSCP 26 (a GRH traffic class
  // of 104): B's side, or A's with B's address.
  const auto write_bw = [&](int i, const std::string& more) {
    return "nice -n 19 ib_write_bw -d rxe0 -x " + std::to_string(gid[i]) +
           " --tclass=104 -F -s 65536 " + more + (i == 0 ? " " + addr[1] : "");
  };
  // WRITEs from A to B.
  checked(
      "ib_write_bw", 26,
      [&] {
        const GuestRun c = pair("ib_write_bw vlan", 'b', write_bw(1, "-n 30"), write_bw(0, "-n 30"),
                                false, 30ULL * 65536);
        EXPECT_TRUE(std::regex_search(c.out, std::regex(R"(\n\s*65536\s+30\s+[\d.]+)")))
            << "ib_write_bw did not complete its 30 iterations:\n"
            << c.out;
        expect_ran_split("ib_write_bw over VLAN");
      },
      false);
  // SENDs both ways with the data checked, DSCP 0.
  checked(
      "ibv_rc_pingpong", 0,
      [&] {
        const auto args = [&](int i) {
          return "ibv_rc_pingpong -d rxe0 -g " + std::to_string(gid[i]) + " -n 20 -s 4096 -c";
        };
        const GuestRun c = pair("ibv_rc_pingpong vlan", 'b', args(1), args(0) + " " + addr[1],
                                false, 2ULL * 20 * 4096);
        EXPECT_NE(c.out.find("20 iters in"), std::string::npos) << c.out;
        expect_ran_split("ibv_rc_pingpong over VLAN");
      },
      true);
  // CNPs in the CNP class on the QP's VLAN ([local] cnp_pcp 6, cnp_dscp 48):
  // gateway A sends them when a flow is past its share of a WAN that holds
  // more than a BDP unacknowledged, so two QPs over a 10 Mbit/s WAN.
  if (split) {
    // The WAN's own rate, to restore (a2b and b2a have the same).
    const json was = json::parse(shell(script() + " wanem get").out, nullptr, false);
    const json::json_pointer at("/settings/a2b/rate");
    ASSERT_TRUE(was.is_object() && was.contains(at)) << was.dump();
    const std::string rate = was[at].get<std::string>();
    const ShellResult slow = shell(script() + " wanem set rate=10mbit 2>&1");
    ASSERT_EQ(slow.status, 0) << slow.out;
    const SplitCounters before = split_counters();
    checked(
        "ib_write_bw -q 2", 26,
        [&] {
          pair("ib_write_bw -q 2 vlan 10mbit", 'b', write_bw(1, "-q 2 -n 40"),
               write_bw(0, "-q 2 -n 40"), false, 2ULL * 40 * 65536);
        },
        false, 1);
    EXPECT_GT(delta(split_counters(), before)["cnps_sent"], 0);
    const ShellResult back = shell(script() + " wanem set rate=" + rate + " 2>&1");
    EXPECT_EQ(back.status, 0) << back.out;
  }
  // Gateway A took tagged frames and gateway B sent them tagged (and back),
  // and no gateway dropped a frame of the guests' as unsupported L2 (every
  // frame a guest sends here is IPv4, IPv6 or ARP, tagged or not).
  for (int i = 0; i < 2; ++i) {
    const char site = "ab"[i];
    const json st = gateway_status(site);
    ASSERT_TRUE(st.contains("drops")) << site;
    const auto grew = [&](const char* at) {
      const json::json_pointer p(at);
      return st.value(p, uint64_t{0}) - at_start[i].value(p, uint64_t{0});
    };
    EXPECT_GT(grew("/vlan_rx"), 0u) << site;
    EXPECT_GT(grew("/vlan_tx"), 0u) << site;
    EXPECT_EQ(grew("/drops/unsupported_l2"), 0u) << site;
  }
  undo();
}

// Last test of a mode: over all of the mode's runs, the emulated WAN dropped
// frames, and where gateways carry the traffic they repaired the losses (their
// retransmissions) while no tool saw an error.
TEST_P(InteropTest, WanLossesRepaired) {
  const WanCounters c = wan_counters(GetParam().gateways);
  if (GetParam().loss == "0%") {
    // A loss-free run: nothing to repair (the counters cover the testbed's
    // life, so a later run at a loss rate checks its repairs).
    record({{"tool", "wan"},
            {"mode", GetParam().name},
            {"ok", true},
            {"wan", Testbed::get().wan()},
            {"testbed_up_s", Testbed::get().up_seconds()},
            {"wan_dropped", c.wan_dropped}});
    return;
  }
  EXPECT_GT(c.wan_dropped, 0U) << "the emulated WAN dropped nothing: the suite did not test loss";
  if (GetParam().gateways) {
    EXPECT_GT(c.retransmitted, 0U) << "the gateways retransmitted nothing although the WAN dropped "
                                   << c.wan_dropped << " frames";
  }
  record({{"tool", "wan"},
          {"mode", GetParam().name},
          {"ok", true},
          {"testbed_up_s", Testbed::get().up_seconds()},
          {"wan", Testbed::get().wan()},
          {"wan_dropped", c.wan_dropped},
          {"gw_retransmitted", c.retransmitted},
          {"gw_lost", c.lost}});
}

std::string mode_name(const ::testing::TestParamInfo<Mode>& info) {
  std::string name = info.param.name;
  if (info.param.loss.empty()) return name;
  name += "_loss_";
  for (char ch : info.param.loss) {
    if (ch == '%') {
      name += "pct";
    } else {
      name += std::isalnum(static_cast<unsigned char>(ch)) != 0 ? ch : '_';
    }
  }
  return name;
}

// One instantiation per mode, each its own test suite, so a mode's tests run
// together on one testbed. ctest runs each prefix as a test of its own.
INSTANTIATE_TEST_SUITE_P(Direct, InteropTest, ::testing::Values(Mode{"direct", false}), mode_name);
INSTANTIATE_TEST_SUITE_P(Passthrough, InteropTest, ::testing::Values(Mode{"passthrough", true}),
                         mode_name);
// Split mode (docs/split-mode.md) at 0 %, 0.1 % and 1 % loss each way: one
// testbed, the loss changed at run time between the suites (in this order
// when run together: `--gtest_filter=Split*`).
INSTANTIATE_TEST_SUITE_P(SplitLoss0, InteropTest, ::testing::Values(Mode{"split", true, "0%"}),
                         mode_name);
INSTANTIATE_TEST_SUITE_P(SplitLoss01, InteropTest, ::testing::Values(Mode{"split", true, "0.1%"}),
                         mode_name);
INSTANTIATE_TEST_SUITE_P(Split, InteropTest, ::testing::Values(Mode{"split", true, "1%"}),
                         mode_name);

// librowan's WAN-sized RC QP attributes on real soft-RoCE QPs. They come from
// the gateway's telemetry of the path (`rowanctl qp-attrs`, the library's own
// rules), so only passthrough runs them (direct mode has no daemon). This
// suite shares the passthrough suite's testbed (same ctest prefix, one boot).
class QpAttrsTest : public InteropTest {
 protected:
  // The attributes for site B's host from site A's gateway, checked against
  // the rules for a 20 ms passthrough path (docs/librowan.md).
  json qp_attrs() {
    const ShellResult r = shell(binary_dir() +
                                "/daemon/rowanctl/rowanctl -s /run/rowan/a/control.sock "
                                "qp-attrs 198.18.2.10 --message-bytes 65536 --json 2>&1");
    EXPECT_EQ(r.status, 0) << "rowanctl qp-attrs: " << r.out;
    const json a = json::parse(r.out, nullptr, false);
    if (r.status != 0 || a.is_discarded()) return json();
    std::cerr << "interop: qp-attrs " << a.dump() << "\n";
    EXPECT_EQ(a.value("mode", ""), "passthrough") << a.dump();
    const double rtt = a.value("rtt_s", 0.0);
    EXPECT_GT(rtt, 0.015) << a.dump();
    EXPECT_LT(rtt, 0.06) << a.dump();
    // The ACK timeout covers 4 RTT + 10 ms; retries 7; MTU 1024 on 1500-byte Ethernet.
    EXPECT_GE(a.value("ack_timeout_s", 0.0), 4 * rtt + 0.01) << a.dump();
    EXPECT_LT(a.value("ack_timeout_s", 0.0), 2 * (4 * rtt + 0.01)) << a.dump();
    EXPECT_EQ(a.value("retry_cnt", 0), 7) << a.dump();
    EXPECT_EQ(a.value("rnr_retry", 0), 7) << a.dump();
    EXPECT_EQ(a.value("path_mtu_bytes", 0), 1024) << a.dump();
    EXPECT_GE(a.value("max_send_wr", 0), 16) << a.dump();
    return a;
  }
};

// qp_verbs's "key=value ..." lines, one map per QP (lines with qp=).
std::vector<std::map<std::string, int64_t>> qp_lines(const std::string& out) {
  std::vector<std::map<std::string, int64_t>> qps;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("qp=", 0) != 0) continue;
    std::map<std::string, int64_t> kv;
    std::istringstream words(line);
    std::string word;
    while (words >> word) {
      const auto eq = word.find('=');
      if (eq != std::string::npos) kv[word.substr(0, eq)] = std::stoll(word.substr(eq + 1));
    }
    qps.push_back(kv);
  }
  return qps;
}

// rowan_qp_attrs_clamp, rowan_qp_init_attr_apply and rowan_qp_modify (the
// qp_verbs example) bring two RC QPs on rxe0 to RTS with the attributes for
// the path; ibv_query_qp must read back exactly what rowanctl computed from
// the gateway's telemetry, and an RDMA WRITE must complete.
TEST_P(QpAttrsTest, HelperSetsThemOnSoftRoceQps) {
  const json a = qp_attrs();
  ASSERT_TRUE(a.is_object());
  std::ostringstream cmd;
  // The example links librowan.so from the build folder: both are staged.
  stage_for_guest(binary_dir() + "/lib/src/api/librowan.so.0");
  cmd << "LD_LIBRARY_PATH=" << kGuestStage << " "
      << stage_for_guest(binary_dir() + "/tests/interop/interop_qp_verbs") << " -d rxe0 -g 1 --rtt "
      << a["rtt_s"].dump() << " --rate " << a["rate_bps"].dump() << " --mode passthrough";
  const GuestRun r = guest('a', cmd.str());
  ASSERT_EQ(r.status, 0) << "qp_verbs failed:\n" << r.out;
  EXPECT_NE(r.out.find("write=ok"), std::string::npos) << r.out;
  const auto qps = qp_lines(r.out);
  ASSERT_EQ(qps.size(), 2U) << r.out;
  for (const auto& q : qps) {
    for (const char* key : {"timeout", "retry_cnt", "rnr_retry", "min_rnr_timer", "max_rd_atomic",
                            "max_dest_rd_atomic", "path_mtu"}) {
      ASSERT_EQ(q.count(key), 1U) << key << " missing:\n" << r.out;
      EXPECT_EQ(q.at(key), a.value(key, -1))
          << "QP " << q.at("qp") << " holds " << key << "=" << q.at(key) << ", rowanctl computed "
          << a.value(key, -1);
    }
    // The device may round a queue up, never down.
    EXPECT_GE(q.at("max_send_wr"), a.value("max_send_wr", 0)) << r.out;
  }
  record({{"tool", "qp_verbs"},
          {"mode", GetParam().name},
          {"ok", r.status == 0},
          {"qp_attrs", a},
          {"client_s", r.elapsed_s}});
}

// ib_write_bw between the guests with the computed attributes: ACK timeout
// exponent (-u), send queue depth (-t), path MTU (-m); perftest's own RC set-up
// uses retry_cnt 7 and rnr_retry 7, which is what the rules give. It must
// complete every iteration with no retry-exceeded error (pair() checks rxe's
// counters on both guests).
TEST_P(QpAttrsTest, PerftestWithThemCompletesWithoutRetryErrors) {
  const json a = qp_attrs();
  ASSERT_TRUE(a.is_object());
  const int depth = a.value("max_send_wr", 128);
  // At least one queue's worth, so perftest keeps the depth (it caps -t at -n).
  const int n = std::max(30 * scale(), depth);
  const int size = 65536;
  const auto args = [&](char site) {
    return "ib_write_bw -d rxe0 -x " + std::to_string(Testbed::get().gid(site)) + " -F -n " +
           std::to_string(n) + " -s " + std::to_string(size) + " -u " +
           std::to_string(a.value("timeout", 14)) + " -t " + std::to_string(depth) + " -m " +
           std::to_string(a.value("path_mtu_bytes", 1024));
  };
  const GuestRun c = pair("ib_write_bw (qp-attrs)", 'b', args('b'), args('a') + " 198.18.2.10",
                          false, static_cast<uint64_t>(n) * size);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(c.out, m, std::regex(R"(\n\s*65536\s+(\d+)\s+[\d.]+\s+[\d.]+)")))
      << "ib_write_bw printed no result row:\n"
      << c.out;
  EXPECT_EQ(std::stoi(m[1].str()), n) << "ib_write_bw did not complete its iterations:\n" << c.out;
  // perftest's banner shows what it set up.
  EXPECT_TRUE(std::regex_search(c.out, std::regex("TX depth\\s*:\\s*" + std::to_string(depth))))
      << c.out;
  EXPECT_TRUE(std::regex_search(
      c.out, std::regex("Mtu\\s*:\\s*" + std::to_string(a.value("path_mtu_bytes", 1024)))))
      << c.out;
}

// The passthrough testbed of InteropTest (same prefix: ctest runs it in the
// same process, on the same guests).
INSTANTIATE_TEST_SUITE_P(Passthrough, QpAttrsTest, ::testing::Values(Mode{"passthrough", true, ""}),
                         mode_name);

}  // namespace
}  // namespace rowan::test
