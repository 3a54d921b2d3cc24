// A gateway site (ARCHITECTURE.md "Packet workers"): the config, the site
// port and the packet workers, each a Worker (worker.h) owning a shard of
// the flows. How many workers there are comes from [eal] lcores:
//
// - one lcore: one worker, run by the main lcore itself (the default; the
//   packet loop as it always was);
// - two: one worker on the second lcore, owning the port's queue; the main
//   lcore only serves control, reload and stop;
// - N+1 (N >= 2): N workers. When the port was opened with a queue pair per
//   worker (local.queues = "auto" and a port with that many queues), each
//   worker reads and sends on its own queue and hands frames it does not
//   own to their owner (handoff.h); the main lcore serves control, reload
//   and stop. Otherwise the main lcore runs the software distributor
//   (distributor.h) between the port's one RX/TX queue pair and the
//   workers' rings. Either way frames are sharded by shard.h, so a flow (a
//   RoCEv2 QP: addresses + UDP source port) always reaches one worker and
//   is never reordered.
//
// Both gateways of a pair must run the same number of workers: worker i
// talks to the peer's worker i (the WAN link's port + i).
//
// Control and metrics read each worker's published snapshot (no worker is
// stopped); snapshot() merges them on the calling (control) thread: counters
// summed, per-worker figures under status.workers, flows listed with their
// worker. A reload's parsed config is handed to each worker, which applies
// it between two passes.
//
// Threading: the constructor, main_pass(), reload() and the destructor run
// on the main lcore; snapshot() and metrics() on control/exporter threads.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "config/config.h"
#include "datapath/datapath_metrics.h"
#include "datapath/distributor.h"
#include "datapath/dpdk_port.h"
#include "datapath/dpdk_wan_io.h"
#include "datapath/handoff.h"
#include "datapath/idle_policy.h"
#include "datapath/site_io.h"
#include "datapath/worker.h"

namespace rowan::gw {

/// What the control socket and DPDK telemetry read (control thread).
class SnapshotSource {
 public:
  virtual ~SnapshotSource() = default;
  /// The state for `cmd` (status|peers|links|flows|routes); throws
  /// std::invalid_argument for an unknown one.
  virtual nlohmann::ordered_json snapshot(const std::string& cmd) const = 0;
};

/// How a site runs its workers, from the lcore count (and, for kQueues,
/// the port's queues).
enum class WorkerMode : uint8_t { kInline, kOwner, kDistributed, kQueues };
/// kInline, kOwner or kDistributed: what the lcore count alone says.
WorkerMode worker_mode(uint32_t lcores);

/// The routes as shard.h takes them (longest prefix first).
std::vector<ShardRoute> shard_routes(const GatewayConfig& cfg);

class Site final : public SnapshotSource {
 public:
  /// Builds the workers for the EAL's lcores and launches the remote ones.
  /// Throws std::runtime_error.
  Site(const GatewayConfig& cfg, Port& local, const Clock& clock);
  ~Site() override;  ///< stops and joins the workers
  Site(const Site&) = delete;
  Site& operator=(const Site&) = delete;

  uint32_t workers() const noexcept { return static_cast<uint32_t>(slots_.size()); }
  WorkerMode mode() const noexcept { return mode_; }
  /// One pass of the main lcore at `now`: the inline worker's pass, the
  /// distributor's, or a short sleep (kOwner, kQueues). Sleeps when idle.
  void main_pass(TimePoint now);
  /// Applies a reloaded config on every worker (each on its lcore; waits up
  /// to 3 s for them); returns what changed.
  std::string reload(const GatewayConfig& cfg);
  /// True when the inline worker can sleep until a frame (logged at start).
  bool can_block() const noexcept { return slots_.front()->worker->can_block(); }

  nlohmann::ordered_json snapshot(const std::string& cmd) const override;
  /// One DataPathMetrics per worker (plus the distributor's drops).
  std::vector<DataPathMetrics> metrics() const;

 private:
  struct Slot {
    Site* site = nullptr;
    std::unique_ptr<SiteIo> io;
    QueueSiteIo* queue_io = nullptr;  ///< io when it is one (kQueues): routes on reload
    std::unique_ptr<Worker> worker;
    IdlePolicy idle{false, Duration::zero()};
    bool worked = false;
    TimePoint next_publish;
    // Reload hand-over (main lcore → worker).
    std::mutex mu;
    std::condition_variable cv;
    std::atomic<bool> reload_pending{false};
    std::optional<GatewayConfig> reload_cfg;  ///< guarded by mu
    std::string reload_result;                ///< guarded by mu
    bool reload_done = false;                 ///< guarded by mu
  };
  /// One pass of a worker (on its lcore).
  void worker_pass(Slot& s, TimePoint now);
  static int worker_main(void* arg);
  void set_shard_routes(const GatewayConfig& cfg);

  const Clock& clock_;
  WorkerMode mode_;
  std::unique_ptr<SiteIo> port_io_;  ///< the distributor's queue pair (kDistributed)
  std::unique_ptr<Distributor> dist_;
  std::vector<std::unique_ptr<SiteIo>> queue_ios_;  ///< worker i's queue pair (kQueues)
  std::unique_ptr<Handoff> handoff_;                ///< kQueues
  /// The dpdk WAN links' ports, a queue pair per worker (dpdk_wan_io.h);
  /// before slots_, whose workers' paths use them.
  std::unique_ptr<DpdkWanPorts> wan_ports_;
  std::vector<std::unique_ptr<Slot>> slots_;
  std::vector<unsigned> lcores_;  ///< the worker lcores (kOwner, kDistributed)
  std::atomic<bool> stop_{false};
  IdlePolicy main_idle_{false, Duration::zero()};
};

/// The merge snapshot() does, exposed for tests: `parts` are the workers'
/// snapshots for `cmd`, in worker order.
nlohmann::ordered_json merge_snapshots(const std::string& cmd,
                                       const std::vector<nlohmann::ordered_json>& parts);

}  // namespace rowan::gw
