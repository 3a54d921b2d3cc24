// `rowanctl top`: a live view of a gateway, per peer and per path (WAN link),
// refreshed every interval: goodput, RTT, cwnd, loss and drops.
//
// Rates and ratios come from the difference of two snapshots of the daemon's
// `peers` and `links` results (control.h), so the first frame appears after
// one interval. compute_top() is the pure part (unit-tested); run_top() polls
// the control socket and prints.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace rowan::ctl {

/// One peer over one interval.
struct TopPeerRow {
  std::string name;
  std::string path;          ///< the WAN link it runs on
  std::string state;         ///< up, down, waiting
  double goodput_bps = 0;    ///< transport bytes the peer acknowledged, per second (sent to it)
  double delivered_bps = 0;  ///< IP bytes received from it and delivered into this site
  double srtt_s = 0;
  double min_rtt_s = 0;
  double cwnd_bytes = 0;
  double pacing_bps = 0;
  double loss_ratio = 0;     ///< packets declared lost / packets sent in the interval
  uint64_t retransmits = 0;  ///< retransmitted packets in the interval
  uint64_t drops = 0;        ///< received datagrams dropped (transport and security), interval
};

/// One path (WAN link) over one interval.
struct TopPathRow {
  std::string name;
  std::string peer;
  std::string backend;
  double tx_bps = 0;  ///< bits per second on the wire, both from link counters
  double rx_bps = 0;
  uint64_t tx_full = 0;    ///< sends refused by a full queue, interval
  uint64_t tx_errors = 0;  ///< send errors, interval
};

struct TopFrame {
  double interval_s = 0;
  std::vector<TopPeerRow> peers;
  std::vector<TopPathRow> paths;
  nlohmann::ordered_json to_json() const;
};

/// The frame between two snapshots `dt_s` seconds apart; each snapshot is
/// {"peers":[...], "links":[...]} as the daemon answers those commands. A peer
/// or link missing from `prev` (it just appeared) counts from zero. Counters
/// that went backwards (a restarted daemon) count as zero, never negative.
TopFrame compute_top(const nlohmann::ordered_json& prev, const nlohmann::ordered_json& cur,
                     double dt_s);

/// The frame as two aligned tables (peers, then paths).
void print_top(const TopFrame& frame, std::ostream& out);

struct TopOptions {
  double interval_s = 1;
  int count = 0;      ///< frames to print; 0: until interrupted
  bool json = false;  ///< one JSON object per frame and line
  int timeout_ms = 5000;
};

/// Polls `socket` and prints a frame every interval. Returns 0, or
/// kExitUnavailable / kExitProtocol / kExitError as run_command does.
int run_top(const std::string& socket, const TopOptions& opt, std::ostream& out, std::ostream& err);

}  // namespace rowan::ctl
