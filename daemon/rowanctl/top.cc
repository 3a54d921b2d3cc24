#include "top.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <map>
#include <thread>

#include <fmt/format.h>

#include "ctl.h"

namespace rowan::ctl {
namespace {

using Json = nlohmann::ordered_json;

double num(const Json& obj, const char* key) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_number() ? it->get<double>() : 0;
}

std::string str(const Json& obj, const char* key) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : std::string("-");
}

// The sum of every number in `obj` (drop counters by reason).
double sum_numbers(const Json& obj) {
  double s = 0;
  if (obj.is_number()) return obj.get<double>();
  if (obj.is_object()) {
    for (const auto& v : obj) s += sum_numbers(v);
  }
  return s;
}

double drops_of(const Json& peer) {
  double d = 0;
  if (auto it = peer.find("transport_drops"); it != peer.end()) d += sum_numbers(*it);
  if (auto it = peer.find("security_drops"); it != peer.end()) d += sum_numbers(*it);
  return d;
}

// Rows of `snap[key]` by name.
std::map<std::string, const Json*> by_name(const Json& snap, const char* key) {
  std::map<std::string, const Json*> out;
  auto it = snap.find(key);
  if (it == snap.end() || !it->is_array()) return out;
  for (const Json& row : *it) {
    if (row.is_object()) out[str(row, "name")] = &row;
  }
  return out;
}

// cur - prev of a counter, never negative.
double delta(double cur, double prev) { return cur > prev ? cur - prev : 0; }

const Json kEmpty = Json::object();

std::string rate(double bps) { return format_value("x_bps", bps); }

}  // namespace

TopFrame compute_top(const Json& prev, const Json& cur, double dt_s) {
  TopFrame f;
  f.interval_s = dt_s;
  const double dt = dt_s > 0 ? dt_s : 1;
  const auto prev_peers = by_name(prev, "peers");
  const auto prev_links = by_name(prev, "links");
  if (auto it = cur.find("peers"); it != cur.end() && it->is_array()) {
    for (const Json& p : *it) {
      if (!p.is_object()) continue;
      TopPeerRow r;
      r.name = str(p, "name");
      r.path = str(p, "link");
      r.state = str(p, "state");
      auto pi = prev_peers.find(r.name);
      const Json& q = pi != prev_peers.end() ? *pi->second : kEmpty;
      r.goodput_bps = delta(num(p, "delivered_bytes"), num(q, "delivered_bytes")) * 8 / dt;
      r.delivered_bps = delta(num(p, "delivered_ip_bytes"), num(q, "delivered_ip_bytes")) * 8 / dt;
      r.srtt_s = num(p, "srtt_s");
      r.min_rtt_s = num(p, "min_rtt_s");
      r.cwnd_bytes = num(p, "cwnd_bytes");
      r.pacing_bps = num(p, "pacing_rate_bps");
      const double sent = delta(num(p, "packets_sent"), num(q, "packets_sent"));
      const double lost = delta(num(p, "lost_packets"), num(q, "lost_packets"));
      r.loss_ratio = sent > 0 ? std::min(1.0, lost / sent) : 0;
      r.retransmits = static_cast<uint64_t>(
          delta(num(p, "retransmitted_packets"), num(q, "retransmitted_packets")));
      r.drops = static_cast<uint64_t>(delta(drops_of(p), drops_of(q)));
      f.peers.push_back(std::move(r));
    }
  }
  if (auto it = cur.find("links"); it != cur.end() && it->is_array()) {
    for (const Json& l : *it) {
      if (!l.is_object()) continue;
      TopPathRow r;
      r.name = str(l, "name");
      r.peer = str(l, "peer");
      r.backend = str(l, "backend");
      auto li = prev_links.find(r.name);
      const Json& q = li != prev_links.end() ? *li->second : kEmpty;
      r.tx_bps = delta(num(l, "tx_bytes"), num(q, "tx_bytes")) * 8 / dt;
      r.rx_bps = delta(num(l, "rx_bytes"), num(q, "rx_bytes")) * 8 / dt;
      r.tx_full = static_cast<uint64_t>(delta(num(l, "tx_full"), num(q, "tx_full")));
      r.tx_errors = static_cast<uint64_t>(delta(num(l, "tx_errors"), num(q, "tx_errors")));
      f.paths.push_back(std::move(r));
    }
  }
  return f;
}

Json TopFrame::to_json() const {
  Json peers_j = Json::array();
  for (const auto& r : peers) {
    peers_j.push_back(Json{{"name", r.name},
                           {"path", r.path},
                           {"state", r.state},
                           {"goodput_bps", r.goodput_bps},
                           {"delivered_bps", r.delivered_bps},
                           {"srtt_s", r.srtt_s},
                           {"min_rtt_s", r.min_rtt_s},
                           {"cwnd_bytes", r.cwnd_bytes},
                           {"pacing_rate_bps", r.pacing_bps},
                           {"loss_ratio", r.loss_ratio},
                           {"retransmitted_packets", r.retransmits},
                           {"drops", r.drops}});
  }
  Json paths_j = Json::array();
  for (const auto& r : paths) {
    paths_j.push_back(Json{{"name", r.name},
                           {"peer", r.peer},
                           {"backend", r.backend},
                           {"tx_bps", r.tx_bps},
                           {"rx_bps", r.rx_bps},
                           {"tx_full", r.tx_full},
                           {"tx_errors", r.tx_errors}});
  }
  return Json{{"interval_s", interval_s}, {"peers", peers_j}, {"paths", paths_j}};
}

void print_top(const TopFrame& f, std::ostream& out) {
  std::vector<std::vector<std::string>> rows{{"PEER", "PATH", "STATE", "GOODPUT", "RX", "SRTT",
                                              "MIN_RTT", "CWND", "PACING", "LOSS", "RETX",
                                              "DROPS"}};
  for (const auto& r : f.peers) {
    rows.push_back({r.name, r.path, r.state, rate(r.goodput_bps), rate(r.delivered_bps),
                    format_value("srtt_s", r.srtt_s), format_value("min_rtt_s", r.min_rtt_s),
                    format_value("cwnd_bytes", r.cwnd_bytes), rate(r.pacing_bps),
                    format_value("loss_ratio", r.loss_ratio), std::to_string(r.retransmits),
                    std::to_string(r.drops)});
  }
  if (f.peers.empty()) {
    out << "no peers\n";
  } else {
    print_aligned(rows, out);
  }
  out << "\n";
  rows = {{"PATH", "PEER", "BACKEND", "TX", "RX", "TX_FULL", "TX_ERRORS"}};
  for (const auto& r : f.paths) {
    rows.push_back({r.name, r.peer, r.backend, rate(r.tx_bps), rate(r.rx_bps),
                    std::to_string(r.tx_full), std::to_string(r.tx_errors)});
  }
  if (f.paths.empty()) {
    out << "no paths\n";
  } else {
    print_aligned(rows, out);
  }
}

int run_top(const std::string& socket, const TopOptions& opt, std::ostream& out,
            std::ostream& err) {
  using Clock = std::chrono::steady_clock;
  auto snapshot = [&](Json& snap) {
    Json peers, links;
    if (const int rc = fetch(socket, "peers", opt.timeout_ms, peers, err); rc != 0) return rc;
    if (const int rc = fetch(socket, "links", opt.timeout_ms, links, err); rc != 0) return rc;
    // rowand answers bare arrays; {"peers":[...]} is accepted too (control.h).
    if (peers.is_object() && peers.contains("peers")) peers = Json(peers["peers"]);
    if (links.is_object() && links.contains("links")) links = Json(links["links"]);
    snap = Json{{"peers", peers}, {"links", links}};
    return 0;
  };
  const bool tty = &out == &std::cout && ::isatty(STDOUT_FILENO) == 1 && !opt.json;
  Json prev;
  if (const int rc = snapshot(prev); rc != 0) return rc;
  Clock::time_point prev_at = Clock::now();
  const auto step =
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(opt.interval_s));
  Clock::time_point next = prev_at + step;
  for (int frame = 0; opt.count == 0 || frame < opt.count; ++frame) {
    std::this_thread::sleep_until(next);
    next += step;
    Json cur;
    if (const int rc = snapshot(cur); rc != 0) return rc;
    const Clock::time_point now = Clock::now();
    const TopFrame f = compute_top(prev, cur, std::chrono::duration<double>(now - prev_at).count());
    prev = std::move(cur);
    prev_at = now;
    if (opt.json) {
      out << f.to_json().dump() << "\n";
    } else {
      if (tty) out << "\x1b[H\x1b[2J";  // home, clear: the view stays in place
      if (frame > 0 && !tty) out << "\n";
      out << fmt::format("rowanctl top — {} — every {:.3g} s\n\n", socket, opt.interval_s);
      print_top(f, out);
    }
    out.flush();
  }
  return 0;
}

}  // namespace rowan::ctl
