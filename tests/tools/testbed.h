// The two-site testbed (scripts/two-site) as the integration tests use it:
// what must be there to run, the machine-wide lock, up/exec/wanem/rowanctl,
// and a down that must leave nothing behind.
//
//   void SetUp() override {
//     const std::string why = testbed_missing({"iperf3", "jq"});
//     if (!why.empty()) GTEST_SKIP() << why;
//     tb_ = std::make_unique<Testbed>();
//     ASSERT_TRUE(tb_->held()) << "the testbed lock stayed taken";
//   }
//   void TearDown() override {
//     if (tb_ && tb_->held()) {
//       EXPECT_TRUE(tb_->down()) << "two-site down left something behind";
//     }
//     tb_.reset();
//   }
#pragma once

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <initializer_list>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tools/paths.h"
#include "tools/shell.h"
#include "tools/testbed_lock.h"

namespace rowan::test {

/// Udp RcvbufErrors from the text of /proc/net/snmp (a namespace's own):
/// datagrams its sockets dropped for want of buffer space, the host's loss
/// and not the network's. Nothing when the counter is missing.
inline std::optional<uint64_t> udp_rcvbuf_errors(const std::string& snmp) {
  std::vector<std::string> names;
  std::vector<std::string> values;
  std::istringstream in(snmp);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("Udp: ", 0) != 0) continue;
    std::istringstream words(line.substr(5));
    std::vector<std::string>& into = names.empty() ? names : values;
    for (std::string w; words >> w;) into.push_back(w);
  }
  for (size_t i = 0; i < names.size() && i < values.size(); ++i) {
    if (names[i] == "RcvbufErrors") return std::stoull(values[i]);
  }
  return std::nullopt;
}

/// Why a testbed test cannot run here, or empty: not root, a tool missing
/// (besides ip and ping), a binary not built (paths relative to binary_dir()).
inline std::string testbed_missing(std::initializer_list<const char*> tools = {},
                                   std::initializer_list<const char*> binaries = {
                                       "/tools/rowan-wanem/rowan-wanem", "/daemon/rowand/rowand",
                                       "/daemon/rowanctl/rowanctl"}) {
  if (geteuid() != 0) return "needs root (network namespaces)";
  for (const char* tool : {"ip", "ping"}) {
    if (!have_tool(tool)) return std::string(tool) + " is not installed (scripts/setup-deps)";
  }
  for (const char* tool : tools) {
    if (!have_tool(tool)) return std::string(tool) + " is not installed (scripts/setup-deps)";
  }
  for (const char* bin : binaries) {
    if (access((binary_dir() + bin).c_str(), X_OK) != 0) {
      return binary_dir() + bin + " is not built (ROWAN_BUILD_DPDK=OFF?)";
    }
  }
  return "";
}

/// One testbed, held for the object's lifetime. Not thread-safe; exec() and
/// the other const calls only run commands and may be used from helper threads.
class Testbed {
 public:
  /// Points scripts/two-site at this build (ROWAN_BUILD_DIR; ROWAN_WANEM,
  /// ROWAN_ROWAND and ROWAN_ROWANCTL cleared), takes the testbed lock (waiting
  /// up to `lock_wait`) and clears what a crashed run may have left.
  /// `script`: another copy of two-site (default: the source tree's).
  explicit Testbed(std::string script = "",
                   std::chrono::seconds lock_wait = std::chrono::seconds(300))
      : script_(script.empty() ? source_dir() + "/scripts/two-site" : std::move(script)),
        ctl_(binary_dir() + "/daemon/rowanctl/rowanctl"),
        lock_(std::make_unique<TestbedLock>(lock_wait)) {
    setenv("ROWAN_BUILD_DIR", binary_dir().c_str(), 1);
    for (const char* var : {"ROWAN_WANEM", "ROWAN_ROWAND", "ROWAN_ROWANCTL"}) unsetenv(var);
    if (held()) shell(script_ + " down 2>/dev/null");
  }
  /// Tears down what is still up and releases the lock.
  ~Testbed() {
    if (held() && !down_) shell(script_ + " down 2>/dev/null");
  }
  Testbed(const Testbed&) = delete;
  Testbed& operator=(const Testbed&) = delete;

  bool held() const { return lock_->held(); }
  /// two-site down; true when it left nothing behind.
  bool down() {
    down_ = true;
    return shell(script_ + " down").status == 0;
  }
  /// two-site up ARGS (e.g. "--mode passthrough --rate 200mbit").
  ShellResult up(const std::string& args) {
    down_ = false;
    return shell(script_ + " up " + args);
  }
  /// CMD on site 'a' or 'b''s host.
  ShellResult exec(char site, const std::string& cmd) const {
    return shell(script_ + " exec " + site + " -- " + cmd);
  }
  /// rowan-wanem ctl on the testbed's emulator (e.g. "flap both 1s", "set loss=1%").
  ShellResult wanem(const std::string& args) const { return shell(script_ + " wanem " + args); }
  /// rowanctl CMD --json on a site's gateway; a discarded value while the
  /// daemon does not answer (e.g. restarting).
  nlohmann::json ctl(char site, const std::string& cmd) const {
    const ShellResult r = shell(ctl_ + " -s /run/rowan/" + std::string(1, site) + "/control.sock " +
                                cmd + " --json 2>/dev/null");
    if (r.status != 0) return nlohmann::json(nlohmann::json::value_t::discarded);
    return nlohmann::json::parse(r.out, nullptr, false);
  }
  const std::string& script() const { return script_; }
  const std::string& rowanctl() const { return ctl_; }

 private:
  std::string script_;
  std::string ctl_;
  std::unique_ptr<TestbedLock> lock_;
  bool down_ = false;
};

}  // namespace rowan::test
