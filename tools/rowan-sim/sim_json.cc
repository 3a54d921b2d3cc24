// rowan-sim's JSON output (docs/rowan-sim.md).
#include <nlohmann/json.hpp>

#include "sim.h"

namespace rowan::sim {

// The JSON keys of a path are its members' names.
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(PathResult, id, rate_bps, rtt_s, loss, utilization,
                                   throughput_bps, tail_drops, random_drops, outage_drops,
                                   bytes_acked, lost_packets, downs, ups, srtt_s)

std::string to_json(const Scenario& s, const Result& r) {
  nlohmann::json j;
  j["capacity_bps"] = r.capacity_bps;
  j["utilization"] = r.utilization;
  j["goodput_bps"] = r.goodput_bps;
  j["queue_delay_p50_s"] = r.queue_delay_p50_s;
  j["queue_delay_p95_s"] = r.queue_delay_p95_s;
  j["queue_delay_p99_s"] = r.queue_delay_p99_s;
  j["jain_index"] = r.jain_index;
  j["retransmit_ratio"] = r.retransmit_ratio;
  j["cc"] = s.cc;
  j["rtt_s"] = s.rtt.seconds();
  j["loss"] = s.loss;
  j["duration_s"] = s.duration.seconds();
  j["warmup_s"] = s.warmup.seconds();
  j["jitter_s"] = s.jitter.seconds();
  j["host_delay_s"] = s.host_delay.seconds();
  j["host_offset_s"] = s.host_offset.seconds();
  j["hint_rate"] = s.hint_rate;
  j["hint_rtt"] = s.hint_rtt;
  j["window_bdp"] = s.window_bdp;
  j["rx_stamps"] = s.rx_stamps;
  j["tcp_source"] = s.tcp_source;
  j["fec"] = s.fec == transport::FecMode::kOff ? "off" : "adaptive";
  j["repair_packets"] = r.repair_packets;
  j["repair_bytes"] = r.repair_bytes;
  j["wire_bytes"] = r.wire_bytes;
  j["repair_overhead"] =
      r.wire_bytes > r.repair_bytes
          ? static_cast<double>(r.repair_bytes) / static_cast<double>(r.wire_bytes - r.repair_bytes)
          : 0.0;
  j["recovered_packets"] = r.recovered;
  j["retransmitted_packets"] = r.retx_packets;
  j["unrecoverable_blocks"] = r.unrecoverable;
  if (s.rr_request > 0) {
    j["rr_request_bytes"] = s.rr_request;
    j["messages"] = r.messages;
    j["rr_mean_s"] = r.rr_mean_s;
    j["rr_p50_s"] = r.rr_p50_s;
    j["rr_p99_s"] = r.rr_p99_s;
    j["rr_p999_s"] = r.rr_p999_s;
    j["rr_max_s"] = r.rr_max_s;
  }
  j["tail_drops"] = r.tail_drops;
  j["random_drops"] = r.random_drops;
  j["packets"] = r.packets;
  j["events"] = r.events;
  j["wall_s"] = r.wall_s;
  nlohmann::json flows = nlohmann::json::array();
  for (const FlowResult& f : r.flows) {
    nlohmann::json o;
    o["id"] = f.id;
    o["start_s"] = f.start_s;
    o["goodput_bps"] = f.goodput_bps;
    o["cc"] = f.cc;
    o["rtt_s"] = f.rtt_s;
    o["retransmit_ratio"] = f.retransmit_ratio;
    o["srtt_s"] = f.srtt_s;
    o["min_rtt_s"] = f.min_rtt_s;
    o["lost_packets"] = f.lost_packets;
    o["rtos"] = f.rtos;
    o["spurious_losses"] = f.spurious;
    o["ptos"] = f.ptos;
    o["repair_packets"] = f.repair_packets;
    o["recovered_packets"] = f.recovered;
    o["fec_k"] = f.fec_k;
    o["fec_m"] = f.fec_m;
    o["send_window_growths"] = f.send_window_growths;
    o["recv_window_growths"] = f.recv_window_growths;
    if (f.converge_s >= 0) {
      o["converge_s"] = f.converge_s;
    } else {
      o["converge_s"] = nullptr;
    }
    if (s.verify) o["verify_errors"] = f.verify_errors;
    flows.push_back(o);
  }
  j["flows"] = flows;
  j["simulated_s"] = r.simulated_s;
  j["sim_speed"] = r.wall_s > 0 ? r.simulated_s / r.wall_s : 0;
  if (r.max_rss_bytes > 0) j["max_rss_bytes"] = r.max_rss_bytes;
  j["path_memory_bytes"] = r.path_memory_bytes;
  j["configured_buffer_bytes"] = r.configured_buffer_bytes;
  if (s.verify) j["corrupted_bytes"] = r.corrupted_bytes;
  if (s.drain || !s.outages.empty()) {
    j["drained"] = r.drained;
    j["lost_bytes"] = r.lost_bytes;
  }
  j["paths"] = r.paths;
  nlohmann::json outages = nlohmann::json::array();
  auto opt = [](double v) { return v >= 0 ? nlohmann::json(v) : nlohmann::json(nullptr); };
  for (const OutageResult& o : r.outages) {
    nlohmann::json x;
    x["path"] = o.path;
    x["at_s"] = o.at_s;
    x["duration_s"] = o.duration_s;
    x["detect_s"] = opt(o.detect_s);
    x["recovery_s"] = opt(o.recovery_s);
    x["rejoin_s"] = opt(o.rejoin_s);
    outages.push_back(x);
  }
  j["outages"] = outages;
  return j.dump();
}

}  // namespace rowan::sim
