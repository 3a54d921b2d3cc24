// rowand: the rowan gateway daemon. Thin on purpose (DPDK l3fwd, Envoy's
// source/exe): parse flags and config, set up the EAL and ports, start the
// control socket, the DPDK telemetry commands and the Prometheus exposer, run
// the site's packet workers (site.h) until a signal; the main lcore runs the
// inline worker or the distributor, and the reloads.
//
//   rowand -c /etc/rowan/rowand.toml
//   rowand --check-config -c FILE      exit 0, or 78 with every error as FILE:LINE:COL
//   rowand --print-config -c FILE      the same checks, then the config with every default
//
// Under systemd (deploy/systemd/rowand.service, Type=notify): READY=1 once the
// ports, the control socket and the exposer are up; STATUS= lines as it goes;
// RELOADING=1/READY=1 around a SIGHUP reload; WATCHDOG=1 from a thread that
// only pets the watchdog while the packet loop's heartbeat advances.
#include <rte_lcore.h>
#include <signal.h>
#include <systemd/sd-daemon.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include "base/clock.h"
#include "config/config.h"
#include "control/control.h"
#include "control/logging.h"
#include "control/metrics.h"
#include "control/reload.h"
#include "control/telemetry.h"
#include "crypto/aead.h"
#include "datapath/dpdk_port.h"
#include "datapath/site.h"
#include "io/af_packet_ring.h"
#include "rowan/build_version.h"

namespace {

std::atomic<bool> g_stop{false};
std::atomic<bool> g_reload{false};
/// Packet-loop passes; the watchdog thread follows it (relaxed: only "has it
/// moved" matters, no data is published through it).
std::atomic<uint64_t> g_heartbeat{0};

/// Pets the systemd watchdog (WatchdogSec=) every half period, but only
/// while the packet loop's heartbeat advances: a stuck packet core gets the
/// daemon restarted. Without WatchdogSec it does nothing.
class Watchdog {
 public:
  Watchdog() {
    uint64_t usec = 0;
    if (sd_watchdog_enabled(0, &usec) <= 0 || usec == 0) return;
    const auto period = std::chrono::microseconds(usec / 2);
    thread_ = std::thread([this, period] { run(period); });
  }
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

 private:
  void run(std::chrono::microseconds period) {
    uint64_t last = g_heartbeat.load(std::memory_order_relaxed);
    std::unique_lock<std::mutex> lock(mu_);
    while (!cv_.wait_for(lock, period, [this] { return stop_; })) {
      const uint64_t now = g_heartbeat.load(std::memory_order_relaxed);
      if (now != last) {
        sd_notify(0, "WATCHDOG=1");
      } else {
        spdlog::error("watchdog: the packet loop has not moved for {} ms", period.count() / 1000);
      }
      last = now;
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

extern "C" void on_signal(int sig) {
  if (sig == SIGHUP) {
    g_reload.store(true, std::memory_order_relaxed);
  } else {
    g_stop.store(true, std::memory_order_relaxed);
  }
}

class Handler final : public rowan::gw::ControlHandler {
 public:
  Handler(const rowan::gw::SnapshotSource& gw, rowan::gw::ReloadRequests& reloads)
      : gw_(gw), reloads_(reloads) {}
  nlohmann::ordered_json handle(const std::string& cmd,
                                const nlohmann::ordered_json& args) override {
    (void)args;
    if (cmd == "reload") {
      // The packet loop reloads; this thread answers with its result, within
      // rowanctl's default 5 s timeout.
      const auto result = reloads_.request(std::chrono::seconds(4));
      if (!result) throw std::invalid_argument("reload: the packet loop gave no result within 4 s");
      return result->to_json();
    }
    return gw_.snapshot(cmd);
  }

 private:
  const rowan::gw::SnapshotSource& gw_;
  rowan::gw::ReloadRequests& reloads_;
};

/// Re-reads the config file and applies what a reload can (routes, [cc],
/// [log]); the main lcore only (the workers apply it, site.h).
rowan::gw::ReloadResult reload(const rowan::gw::GatewayConfig& running, rowan::gw::Site& gateway) {
  using namespace rowan;
  gw::ReloadResult r;
  try {
    const gw::GatewayConfig fresh = gw::load_config(running.path);
    r.restart_needed = gw::reload_blockers(running, fresh);
    for (const auto& section : r.restart_needed) {
      spdlog::warn("reload: changes to {} need a restart; keeping the running ones", section);
    }
    r.applied = gateway.reload(fresh);
    if (const auto level = spdlog::level::from_str(fresh.log.level); level != spdlog::get_level()) {
      r.applied += fmt::format("; log level {}", fresh.log.level);
      spdlog::set_level(level);
    }
    r.accepted = true;
    spdlog::info("reloaded {}: {}", running.path, r.applied);
  } catch (const gw::ConfigError& e) {
    r.errors = e.errors();
    for (const auto& line : r.errors) spdlog::error("reload rejected: {}", line);
  }
  return r;
}

int run(const rowan::gw::GatewayConfig& cfg) {
  using namespace rowan;
  gw::ControlPlaneMetrics control_metrics(gw::unix_now());
  sd_notify(0, "STATUS=starting the DPDK EAL");
  // One EAL for the local port and every dpdk WAN link (dpdk_wan_io.h).
  // A net_af_packet vdev gets ring slots that hold the largest frame
  // (io/af_packet_ring.h); its mbufs, the data room those slots need.
  const uint32_t frame = io::ethernet_frame(cfg.local.mtu);
  uint32_t local_mbuf = frame;
  std::vector<std::string> devices{io::af_packet_device(cfg.local.device, frame, &local_mbuf)};
  for (const auto& link : cfg.wan.links) {
    if (link.backend == gw::WanBackend::kDpdk) {
      devices.push_back(io::af_packet_device(link.device, io::ethernet_frame(link.mtu), nullptr));
    }
  }
  gw::route_dpdk_log();  // the EAL's own lines too, at their levels
  gw::init_eal(cfg.eal, devices);
  int rc = 0;
  {
    sd_notify(0, "STATUS=opening ports and WAN links");
    // Several workers: a queue pair each when the port has them and
    // local.queues allows (handoff.h), else the distributor (site.h).
    const uint32_t lcores = rte_lcore_count();
    const uint32_t workers = gw::workers_for(lcores);
    const uint16_t max_queues = gw::Port::max_queue_pairs(cfg.local.device);
    const uint16_t queues = gw::queue_pairs_for(cfg.local.queues, workers, max_queues, max_queues);
    // Workers on rings hold up to two rings of mbufs each besides the port's;
    // with a queue each, every queue's descriptors and the N x (N-1)
    // hand-over rings.
    uint32_t mbufs =
        8191 + (gw::worker_mode(lcores) == gw::WorkerMode::kDistributed ? 2048 * lcores : 0);
    if (queues > 1) {
      mbufs += queues * (uint32_t{cfg.local.rx_ring} + cfg.local.tx_ring) +
               queues * (queues - 1U) * gw::Handoff::kRingSize;
    }
    gw::Port local(cfg.local.device, cfg.local.rx_ring, cfg.local.tx_ring, local_mbuf, mbufs,
                   queues);
    MonotonicClock clock;
    gw::Site gateway(cfg, local, clock);
    gw::ReloadRequests reloads;
    Handler handler(gateway, reloads);
    gw::ControlServer control(cfg.control, handler);
    control.start();
    const gw::Telemetry telemetry(gateway);
    // The exposer comes last: a scrape never sees a half-built data path.
    std::optional<gw::MetricsServer> metrics;
    if (cfg.metrics.enabled) {
      metrics.emplace(
          cfg.metrics, [&gateway] { return gateway.metrics(); }, control_metrics);
    }
    if (cfg.local.insecure) {
      spdlog::warn(
          "INSECURE: local.insecure = true: the WAN links carry plaintext, unauthenticated "
          "datagrams; anyone on the path can read, alter and inject traffic");
    } else {
      spdlog::info("link security: AES-256-GCM on {}", crypto::AesGcm::default_backend_name());
    }
    spdlog::info("rowand up: local {} ({}), {} peer(s), {} route(s), control {}, metrics {}",
                 devices.front(), local.name(), cfg.peers.size(), cfg.routes.size(), control.path(),
                 metrics ? metrics->address() : "off");
    const Watchdog watchdog;
    sd_notifyf(0, "READY=1\nSTATUS=forwarding: %zu peer(s), %zu route(s), metrics on %s",
               cfg.peers.size(), cfg.routes.size(),
               metrics ? metrics->address().c_str() : "nothing");

    if (gateway.workers() > 1 || gateway.mode() != gw::WorkerMode::kInline) {
      spdlog::info("{} packet worker(s) on their own lcores{}", gateway.workers(),
                   gateway.mode() == gw::WorkerMode::kDistributed
                       ? "; the main lcore distributes the site port's frames"
                   : gateway.mode() == gw::WorkerMode::kQueues
                       ? "; each reads its own queue of the site port (RSS)"
                       : "");
      if (gateway.mode() == gw::WorkerMode::kDistributed && workers > 1) {
        spdlog::info("site port {}: {} queue pair(s), {} wanted for queues per worker{}",
                     local.name(), max_queues, workers,
                     cfg.local.queues == gw::QueueMode::kDistributor
                         ? " (local.queues = \"distributor\")"
                         : "");
      }
    } else if (gateway.can_block()) {
      // Idle back-off and wake-up coalescing: idle_policy.h.
      spdlog::info(
          "idle: the loop sleeps until a local frame, a WAN datagram or a timer; under load it "
          "wakes at most every {} us",
          cfg.local.wake_coalesce.ns() / 1000);
    }
    uint64_t loops = 0;
    while (!g_stop.load(std::memory_order_relaxed)) {
      g_heartbeat.store(++loops, std::memory_order_relaxed);
      gateway.main_pass(clock.now());
      // Both flags are taken: one reload answers a SIGHUP and every client.
      const bool by_signal = g_reload.exchange(false);
      if (reloads.take_pending() || by_signal) {
        sd_notify(0, "RELOADING=1");
        reloads.start();
        gw::ReloadResult result = reload(cfg, gateway);
        control_metrics.reload_result(result.accepted, gw::unix_now());
        sd_notify(0,
                  result.accepted
                      ? "READY=1\nSTATUS=forwarding; configuration reloaded"
                      : "READY=1\nSTATUS=forwarding; the last reload was rejected (see the log)");
        reloads.finish(std::move(result));
      }
    }
    spdlog::info("rowand stopping");
    sd_notify(0, "STOPPING=1");
    control.stop();
  }
  gw::cleanup_eal();
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"rowand — the rowan (RDMA over WAN) gateway daemon"};
  app.set_version_flag("--version", std::string("rowand ") + ROWAN_BUILD_VERSION);
  std::string config = "/etc/rowan/rowand.toml";
  bool check = false;
  bool print = false;
  app.add_option("-c,--config", config, "configuration file")->capture_default_str();
  app.add_flag("--check-config", check, "validate the configuration and exit (0 or 78)");
  app.add_flag("--print-config", print,
               "validate the configuration, print it with every default filled in, and exit");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : rowan::gw::kExitUsage;
  }
  if (check) return rowan::gw::check_config_main(config, std::cout, std::cerr);
  // Under systemd each line carries its priority for journald (logging.h).
  const bool journal = rowan::gw::stderr_is_journal();
  rowan::gw::log_to_stderr();
  rowan::gw::set_log_format(journal);
  if (print) {
    try {
      std::cout << rowan::gw::to_toml(rowan::gw::load_config(config));
      return 0;
    } catch (const rowan::gw::ConfigError& e) {
      for (const auto& line : e.errors()) std::cerr << line << "\n";
      return rowan::gw::kExitConfig;
    }
  }

  rowan::gw::GatewayConfig cfg;
  try {
    cfg = rowan::gw::load_config(config);
  } catch (const rowan::gw::ConfigError& e) {
    // FILE:LINE:COL lines as they are; to the journal as errors.
    for (const auto& line : e.errors()) std::cerr << (journal ? "<3>" : "") << line << "\n";
    return rowan::gw::kExitConfig;
  }
  spdlog::set_level(spdlog::level::from_str(cfg.log.level));
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGHUP, &sa, nullptr);
  try {
    return run(cfg);
  } catch (const std::exception& e) {
    spdlog::critical("rowand: {}", e.what());
    return rowan::gw::kExitUnavailable;
  }
}
