// rowand: the rowan gateway daemon. Thin on purpose (DPDK l3fwd, Envoy's
// source/exe): parse flags and config, set up the EAL and ports, start the
// control socket, run the packet loop on the main lcore until a signal.
//
//   rowand -c /etc/rowan/rowand.toml
//   rowand --check-config -c FILE      exit 0, or 78 with every error as FILE:LINE:COL
#include <signal.h>
#include <systemd/sd-daemon.h>

#include <atomic>
#include <csignal>
#include <iostream>
#include <memory>
#include <string>

#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include "base/clock.h"
#include "config.h"
#include "control.h"
#include "dpdk_port.h"
#include "gateway.h"

namespace {

std::atomic<bool> g_stop{false};
std::atomic<bool> g_reload{false};

extern "C" void on_signal(int sig) {
  if (sig == SIGHUP) {
    g_reload.store(true, std::memory_order_relaxed);
  } else {
    g_stop.store(true, std::memory_order_relaxed);
  }
}

class Handler final : public rowan::gw::ControlHandler {
 public:
  explicit Handler(const rowan::gw::Gateway& gw) : gw_(gw) {}
  nlohmann::ordered_json handle(const std::string& cmd,
                                const nlohmann::ordered_json& args) override {
    (void)args;
    if (cmd == "reload") {
      g_reload.store(true, std::memory_order_relaxed);
      return {{"requested", true}};
    }
    return gw_.snapshot(cmd);
  }

 private:
  const rowan::gw::Gateway& gw_;
};

int run(const rowan::gw::GatewayConfig& cfg) {
  using namespace rowan;
  gw::init_eal(cfg.eal, {cfg.local.device});
  int rc = 0;
  {
    const uint32_t frame = cfg.local.mtu + 14 + 4;
    gw::Port local(cfg.local.device, cfg.local.rx_ring, cfg.local.tx_ring, frame, 8191);
    MonotonicClock clock;
    gw::Gateway gateway(cfg, local, clock);
    Handler handler(gateway);
    gw::ControlServer control(cfg.control, handler);
    control.start();
    if (cfg.local.insecure) {
      spdlog::warn(
          "INSECURE: local.insecure = true: the WAN links carry plaintext, unauthenticated "
          "datagrams; anyone on the path can read, alter and inject traffic");
    }
    spdlog::info("rowand up: local {} ({}), {} peer(s), {} route(s), control {}", cfg.local.device,
                 local.name(), cfg.peers.size(), cfg.routes.size(), control.path());
    sd_notify(0, "READY=1\nSTATUS=forwarding");

    // Idle back-off (DPDK l3fwd-power): spin briefly after traffic, then
    // sleep in growing steps, never past the transport's next timer.
    const rowan::Duration kMinSleep = Duration::from_us(5);
    const rowan::Duration kMaxSleep = Duration::from_ms(1);
    rowan::Duration sleep = kMinSleep;
    uint32_t idle_polls = 0;
    TimePoint next_publish = clock.now();
    while (!g_stop.load(std::memory_order_relaxed)) {
      const TimePoint now = clock.now();
      if (gateway.poll(now)) {
        idle_polls = 0;
        sleep = kMinSleep;
      } else if (++idle_polls > 32) {
        const rowan::Duration until = gateway.next_timeout() - now;
        const rowan::Duration d = std::min(sleep, until);
        if (d.ns() > 0) gateway.idle_wait(d);
        sleep = std::min(sleep * 2, kMaxSleep);
      }
      if (now >= next_publish) {
        gateway.publish(now);
        next_publish = now + Duration::from_ms(100);
      }
      if (g_reload.exchange(false)) {
        sd_notify(0, "RELOADING=1");
        try {
          const gw::GatewayConfig fresh = gw::load_config(cfg.path);
          for (const auto& section : gw::reload_blockers(cfg, fresh)) {
            spdlog::warn("reload: changes to {} need a restart; keeping the running ones", section);
          }
          spdlog::info("reloaded {}: {}", cfg.path, gateway.reload(fresh));
        } catch (const gw::ConfigError& e) {
          for (const auto& line : e.errors()) spdlog::error("reload rejected: {}", line);
        }
        sd_notify(0, "READY=1");
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
  std::string config = "/etc/rowan/rowand.toml";
  bool check = false;
  app.add_option("-c,--config", config, "configuration file")->capture_default_str();
  app.add_flag("--check-config", check, "validate the configuration and exit (0 or 78)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : rowan::gw::kExitUsage;
  }
  if (check) return rowan::gw::check_config_main(config, std::cout, std::cerr);

  rowan::gw::GatewayConfig cfg;
  try {
    cfg = rowan::gw::load_config(config);
  } catch (const rowan::gw::ConfigError& e) {
    for (const auto& line : e.errors()) std::cerr << line << "\n";
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
