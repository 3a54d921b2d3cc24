// rowand's Prometheus exporter (docs/telemetry.md has the full list).
//
// It reads what the packet workers publish (DataPathMetrics,
// datapath/datapath_metrics.h), never the workers' live counters: at scrape
// time the exporter's thread calls Collector::Collect(), which takes one
// DataPathMetrics per packet lcore, sums them, and builds the metric families
// (cumulative histogram buckets included) there. Values are at most one
// publish interval (100 ms) old.
//
// Threading: Collector and MetricsServer live on the main thread and are read
// by prometheus-cpp's HTTP threads (Collect() is const and only reads through
// the source callback and the mutex-guarded ControlPlaneMetrics).
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "config/config.h"
#include "datapath/datapath_metrics.h"

namespace prometheus {
class Exposer;
}

namespace rowan::gw {

/// State of the control plane that the main thread updates (not per packet).
class ControlPlaneMetrics {
 public:
  /// After a SIGHUP/rowanctl reload was applied (ok) or rejected.
  void reload_result(bool ok, double unix_s);
  struct State {
    bool last_reload_ok = true;
    double last_success_unix_s = 0;  ///< start-up counts as the first success
    uint64_t reloads_ok = 0, reloads_failed = 0;
    double start_unix_s = 0;
  };
  State get() const;
  explicit ControlPlaneMetrics(double start_unix_s);

 private:
  mutable std::mutex mu_;
  State s_;
};

/// Builds every rowan_* metric family from the data path's published copies
/// and the control-plane state. A prometheus::Collectable (metrics.cc).
class Collector;

/// Where DataPathMetrics come from: one copy per packet lcore.
using MetricsSource = std::function<std::vector<DataPathMetrics>()>;

/// The HTTP exposer on [metrics] listen with the collector registered.
/// Started by main after the data path is up; throws std::runtime_error when
/// the address cannot be bound (e.g. the port is taken).
class MetricsServer {
 public:
  MetricsServer(const MetricsConfig& cfg, MetricsSource source, const ControlPlaneMetrics& control);
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;
  /// "127.0.0.1:9464"
  std::string address() const;

 private:
  std::shared_ptr<Collector> collector_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  std::string address_;
};

/// The exposition text of the collector alone (tests, `rowand --print-metrics`).
std::string render_metrics(MetricsSource source, const ControlPlaneMetrics& control);

/// What process_* reports: this process, from /proc (ok false when unreadable).
struct ProcessStats {
  bool ok = false;
  double cpu_seconds = 0;  ///< user + system
  double resident_bytes = 0, virtual_bytes = 0;
  double start_time_unix_s = 0;
  double open_fds = 0, max_fds = 0;
};
ProcessStats read_process_stats();

/// Wall-clock seconds since the epoch (control path only).
double unix_now();

}  // namespace rowan::gw
