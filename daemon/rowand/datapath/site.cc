#include "datapath/site.h"

#include <rte_eal.h>
#include <rte_lcore.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <set>
#include <stdexcept>

namespace rowan::gw {
namespace {

using J = nlohmann::ordered_json;

constexpr Duration kPublishEvery = Duration::from_ms(100);

/// Adds `b` into `a`: integers are summed, objects merged key by key, and
/// anything else (and every key in `keep`) stays as `a` has it.
void sum_into(J& a, const J& b, const std::set<std::string>& keep) {
  if (!a.is_object() || !b.is_object()) return;
  for (const auto& [k, v] : b.items()) {
    if (keep.count(k) != 0) continue;
    if (!a.contains(k)) {
      a[k] = v;
      continue;
    }
    J& x = a[k];
    if (x.is_number_unsigned() && v.is_number_unsigned()) {
      x = x.get<uint64_t>() + v.get<uint64_t>();
    } else if (x.is_number_integer() && v.is_number_integer()) {
      x = x.get<int64_t>() + v.get<int64_t>();
    } else if (x.is_object() && v.is_object()) {
      sum_into(x, v, keep);
    }
  }
}

/// A peer or link is only as up as its least-up worker connection.
void worst_state(J& a, const J& b, const char* key) {
  if (b.contains(key) && b[key] != "up") a[key] = b[key];
}

}  // namespace

WorkerMode worker_mode(uint32_t lcores) {
  if (lcores <= 1) return WorkerMode::kInline;
  if (lcores == 2) return WorkerMode::kOwner;
  return WorkerMode::kDistributed;
}

J merge_snapshots(const std::string& cmd, const std::vector<J>& parts) {
  if (parts.empty()) return J();
  if (cmd == "status") {
    J out = parts.front();
    J workers = J::array();
    for (const J& p : parts) {
      if (p.contains("worker")) workers.push_back(p["worker"]);
    }
    // Per site, not per worker: the same in every part.
    static const std::set<std::string> keep = {
        "uptime_s", "port", "peers", "neighbors", "neighbors_unresolved", "worker", "routes"};
    for (size_t i = 1; i < parts.size(); ++i) {
      sum_into(out, parts[i], keep);
      for (const char* k : {"neighbors", "neighbors_unresolved"}) {
        if (parts[i].contains(k) && parts[i][k] > out[k]) {
          out[k] = parts[i][k];  // each worker learns the same hosts
        }
      }
    }
    out.erase("worker");
    out["workers"] = std::move(workers);
    return out;
  }
  if (cmd == "peers" || cmd == "links") {
    // One connection per worker and peer: counters add up; the path's
    // estimates (RTT, BDP) and settings are worker 0's.
    static const std::set<std::string> keep = {"bdp_bytes", "outages", "mtu",      "rate_bps",
                                               "state",     "session", "resolved", "queues"};
    J out = parts.front();
    for (size_t i = 1; i < parts.size(); ++i) {
      for (size_t e = 0; e < out.size() && e < parts[i].size(); ++e) {
        sum_into(out[e], parts[i][e], keep);
        worst_state(out[e], parts[i][e], "state");
        worst_state(out[e], parts[i][e], "session");
      }
    }
    return out;
  }
  if (cmd == "flows") {
    J out = J::array();
    for (size_t i = 0; i < parts.size(); ++i) {
      for (const J& f : parts[i]) {
        if (out.size() >= 1000) break;
        J g = f;
        g["worker"] = i;
        out.push_back(std::move(g));
      }
    }
    return out;
  }
  return parts.front();
}

std::vector<ShardRoute> shard_routes(const GatewayConfig& cfg) {
  std::vector<ShardRoute> r;
  for (const RouteConfig& rc : cfg.routes) r.push_back({rc.prefix, rc.mode == RouteMode::kSplit});
  std::stable_sort(r.begin(), r.end(), [](const ShardRoute& a, const ShardRoute& b) {
    return a.prefix.len > b.prefix.len;
  });
  return r;
}

Site::Site(const GatewayConfig& cfg, Port& local, const Clock& clock) : clock_(clock) {
  const uint32_t lcores = rte_lcore_count();
  mode_ = worker_mode(lcores);
  unsigned l = 0;
  RTE_LCORE_FOREACH_WORKER(l) { lcores_.push_back(l); }
  const uint32_t n = workers_for(lcores);
  if (mode_ == WorkerMode::kDistributed && local.queues() == n) {
    mode_ = WorkerMode::kQueues;
    std::vector<SiteIo*> queues;
    for (uint32_t i = 0; i < n; ++i) {
      queue_ios_.push_back(
          std::make_unique<PortSiteIo>(local, static_cast<uint16_t>(i), cfg.local.device, true));
      queues.push_back(queue_ios_.back().get());
    }
    handoff_ = std::make_unique<Handoff>(std::move(queues));
  } else if (mode_ == WorkerMode::kDistributed) {
    port_io_ = std::make_unique<PortSiteIo>(local, 0, cfg.local.device, true);
    dist_ = std::make_unique<Distributor>(*port_io_, n);
    main_idle_ = IdlePolicy(dist_->can_block(), cfg.local.wake_coalesce);
  }
  wan_ports_ = std::make_unique<DpdkWanPorts>(static_cast<uint16_t>(n));
  for (uint32_t i = 0; i < n; ++i) {
    auto s = std::make_unique<Slot>();
    s->site = this;
    if (dist_) {
      s->io = dist_->worker_io(i);
    } else if (handoff_) {
      auto q = handoff_->worker_io(i);
      q->set_routes(shard_routes(cfg));
      s->queue_io = q.get();
      s->io = std::move(q);
    } else {
      s->io = std::make_unique<PortSiteIo>(local, 0, cfg.local.device, true);
    }
    WorkerOptions w;
    w.index = i;
    w.lcore = mode_ == WorkerMode::kInline ? rte_get_main_lcore() : lcores_.at(i);
    w.answers_neighbors = i == 0;
    w.reports_port = i == 0;
    w.wan_ports = wan_ports_.get();
    s->worker = std::make_unique<Worker>(cfg, *s->io, clock, w);
    s->idle = IdlePolicy(s->worker->can_block(), cfg.local.wake_coalesce);
    s->next_publish = clock.now();
    slots_.push_back(std::move(s));
  }
  set_shard_routes(cfg);
  if (mode_ != WorkerMode::kInline) {
    for (uint32_t i = 0; i < n; ++i) {
      const int rc = rte_eal_remote_launch(&Site::worker_main, slots_[i].get(), lcores_[i]);
      if (rc != 0) {
        stop_.store(true);
        rte_eal_mp_wait_lcore();
        throw std::runtime_error("cannot start the packet worker on lcore " +
                                 std::to_string(lcores_[i]));
      }
    }
  }
}

Site::~Site() {
  stop_.store(true, std::memory_order_relaxed);
  if (mode_ != WorkerMode::kInline) rte_eal_mp_wait_lcore();
}

int Site::worker_main(void* arg) {
  Slot& s = *static_cast<Slot*>(arg);
  while (!s.site->stop_.load(std::memory_order_relaxed))
    s.site->worker_pass(s, s.site->clock_.now());
  return 0;
}

void Site::worker_pass(Slot& s, TimePoint now) {
  Worker& g = *s.worker;
  g.busy_meter().on_pass(now, s.worked);
  s.worked = g.poll(now);
  if (s.worked) {
    s.idle.on_work(now);
    g.disarm_wake();
  } else {
    const IdlePolicy::Decision next = s.idle.on_idle(now, g.next_timeout());
    switch (next.action) {
      case IdlePolicy::Action::kPoll:
        break;
      case IdlePolicy::Action::kArm:
        g.arm_wake();  // a frame before this is in the port's ring: poll once more
        break;
      case IdlePolicy::Action::kBlock:
        g.idle_wait(next.duration);
        break;
      case IdlePolicy::Action::kSleep:
        // A timed step: arm first so that a peer or the distributor that
        // hands this worker frames ends it early, and look once more.
        g.arm_wake();
        if (g.poll(now)) {
          s.worked = true;
          s.idle.on_work(now);
          g.disarm_wake();
          break;
        }
        g.idle_wait(next.duration);
        break;
      case IdlePolicy::Action::kNap: {
        const timespec ts{0, static_cast<long>(next.duration.ns())};
        nanosleep(&ts, nullptr);
        break;
      }
    }
  }
  if (now >= s.next_publish || g.publish_wanted()) {
    g.publish(now);
    s.next_publish = now + kPublishEvery;
  }
  if (s.reload_pending.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.reload_cfg) {
      try {
        s.reload_result = g.reload(*s.reload_cfg);
        // Re-sharding on a changed route mode can reorder the packets in
        // flight at that moment, once (docs/gateway.md).
        if (s.queue_io != nullptr) s.queue_io->set_routes(shard_routes(*s.reload_cfg));
      } catch (const std::exception& e) {
        s.reload_result = std::string("reload failed: ") + e.what();
      }
      s.reload_cfg.reset();
      s.reload_done = true;
    }
    s.reload_pending.store(false, std::memory_order_relaxed);
    s.cv.notify_all();
  }
}

void Site::main_pass(TimePoint now) {
  switch (mode_) {
    case WorkerMode::kInline:
      worker_pass(*slots_.front(), now);
      return;
    case WorkerMode::kOwner:
    case WorkerMode::kQueues: {
      // The workers own the port's queues; the main lcore only answers stop
      // and reload.
      const timespec ts{0, 2000000};
      nanosleep(&ts, nullptr);
      return;
    }
    case WorkerMode::kDistributed:
      break;
  }
  if (dist_->poll()) {
    main_idle_.on_work(now);
    dist_->disarm();
    return;
  }
  const IdlePolicy::Decision next =
      main_idle_.on_idle(now, now + IdlePolicy::kMaxBlock);  // its only timers: the main loop's
  switch (next.action) {
    case IdlePolicy::Action::kPoll:
      break;
    case IdlePolicy::Action::kArm:
      dist_->arm_wake();
      break;
    case IdlePolicy::Action::kSleep:
      // No doorbell: arm so that a worker's TX ends the sleep, look once more.
      dist_->arm_wake();
      if (dist_->poll()) {
        main_idle_.on_work(now);
        dist_->disarm();
        break;
      }
      [[fallthrough]];
    case IdlePolicy::Action::kBlock:
    case IdlePolicy::Action::kNap:
      dist_->wait(next.duration);
      break;
  }
}

void Site::set_shard_routes(const GatewayConfig& cfg) {
  if (dist_) dist_->set_routes(shard_routes(cfg));
}

std::string Site::reload(const GatewayConfig& cfg) {
  if (mode_ == WorkerMode::kInline) return slots_.front()->worker->reload(cfg);
  for (auto& s : slots_) {
    std::lock_guard<std::mutex> lock(s->mu);
    s->reload_cfg = cfg;
    s->reload_done = false;
    s->reload_pending.store(true, std::memory_order_release);
  }
  std::string what;
  for (size_t i = 0; i < slots_.size(); ++i) {
    Slot& s = *slots_[i];
    std::unique_lock<std::mutex> lock(s.mu);
    if (!s.cv.wait_for(lock, std::chrono::seconds(3), [&] { return s.reload_done; })) {
      what += "; worker " + std::to_string(i) + " did not answer within 3 s";
    } else if (i == 0) {
      what = s.reload_result + what;
    }
  }
  // Re-sharding on a changed route mode can reorder the packets in flight
  // at that moment, once (docs/gateway.md).
  set_shard_routes(cfg);
  return what;
}

J Site::snapshot(const std::string& cmd) const {
  std::vector<J> parts;
  parts.reserve(slots_.size());
  for (const auto& s : slots_) parts.push_back(s->worker->snapshot(cmd));
  J out = merge_snapshots(cmd, parts);
  if (cmd == "status") {
    const char* mode = dist_ ? "distributor" : handoff_ ? "rss" : "single";
    const size_t count = dist_ ? 1 : handoff_ ? handoff_->workers() : 1;
    if (out.contains("local") && out["local"].is_object()) {
      out["local"]["queues"] = J{{"mode", mode}, {"count", count}};
    }
  }
  if (cmd == "status" && handoff_) {
    uint64_t full = 0;
    J& workers = out["workers"];
    for (uint32_t i = 0; i < handoff_->workers() && i < workers.size(); ++i) {
      const HandoffStats hs = handoff_->stats(i);
      full += hs.ring_full;
      workers[i]["handoff_out"] = hs.out;
      workers[i]["handoff_in"] = hs.in;
      workers[i]["handoff_drops"] = hs.ring_full;
      workers[i]["handoff_hold"] = hs.hold;
      workers[i]["broadcast"] = hs.broadcast;
      workers[i]["copy_nombuf"] = hs.copy_nombuf;
    }
    out["drops"]["worker_busy"] = full;
  }
  if (cmd == "status" && dist_) {
    const DistributorStats ds = dist_->stats();
    uint64_t busy = 0;
    for (uint64_t b : ds.worker_busy) busy += b;
    out["drops"]["worker_busy"] = busy;
    out["distributor"] = J{{"rx_packets", ds.rx_packets},     {"tx_packets", ds.tx_packets},
                           {"broadcast", ds.broadcast},       {"copy_nombuf", ds.copy_nombuf},
                           {"backpressure", ds.backpressure}, {"to_worker", ds.to_worker},
                           {"worker_busy", ds.worker_busy}};
  }
  return out;
}

std::vector<DataPathMetrics> Site::metrics() const {
  std::vector<DataPathMetrics> v;
  for (const auto& s : slots_) v.push_back(s->worker->metrics());
  if (handoff_) {
    for (uint32_t i = 0; i < handoff_->workers() && i < v.size(); ++i) {
      const HandoffStats hs = handoff_->stats(i);
      for (WorkerMetrics& w : v[i].workers) {
        w.handoff_out = hs.out;
        w.handoff_in = hs.in;
        w.handoff_drops = hs.ring_full;
      }
      v[i].drops[static_cast<size_t>(Drop::kWorkerBusy)] += hs.ring_full;
    }
  }
  if (dist_) {
    DataPathMetrics d;
    d.drops.assign(static_cast<size_t>(Drop::kCount), 0);
    for (uint64_t b : dist_->stats().worker_busy)
      d.drops[static_cast<size_t>(Drop::kWorkerBusy)] += b;
    v.push_back(std::move(d));
  }
  return v;
}

}  // namespace rowan::gw
