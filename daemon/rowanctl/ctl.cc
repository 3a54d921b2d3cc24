#include "ctl.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <system_error>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "control/control.h"

namespace rowan::ctl {
namespace {

using Json = nlohmann::ordered_json;

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string number(double v) {
  if (v == std::floor(v) && std::fabs(v) < 1e15) return fmt::format("{}", static_cast<int64_t>(v));
  return fmt::format("{:.4g}", v);
}

std::string scaled(double v, const char* const* units, int n, double step, const char* fmt3) {
  int i = 0;
  double x = v;
  while (i + 1 < n && std::fabs(x) >= step) {
    x /= step;
    ++i;
  }
  return fmt::format(fmt::runtime(fmt3), x, units[i]);
}

std::string seconds(double s) {
  const double a = std::fabs(s);
  if (a == 0) return "0 s";
  if (a < 1e-3) return fmt::format("{:.1f} us", s * 1e6);
  if (a < 1) return fmt::format("{:.2f} ms", s * 1e3);
  if (a < 120) return fmt::format("{:.2f} s", s);
  const auto t = static_cast<int64_t>(s);
  if (t >= 86400) return fmt::format("{}d{:02}h{:02}m", t / 86400, t % 86400 / 3600, t % 3600 / 60);
  if (t >= 3600) return fmt::format("{}h{:02}m{:02}s", t / 3600, t % 3600 / 60, t % 60);
  return fmt::format("{}m{:02}s", t / 60, t % 60);
}

// Flattens nested objects into dotted keys, in order.
void flatten(const std::string& prefix, const Json& obj,
             std::vector<std::pair<std::string, Json>>& out) {
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    const std::string key = prefix.empty() ? it.key() : prefix + "." + it.key();
    if (it->is_object() && !it->empty()) {
      flatten(key, *it, out);
    } else {
      out.emplace_back(key, *it);
    }
  }
}

// The columns a narrow table shows, in order, when the rows have them.
const std::vector<std::string>* narrow_columns(const std::string& cmd) {
  static const std::vector<std::string> kPeers = {"name",
                                                  "endpoint",
                                                  "state",
                                                  "cc",
                                                  "srtt_s",
                                                  "min_rtt_s",
                                                  "cwnd_bytes",
                                                  "pacing_rate_bps",
                                                  "pacing_bps",
                                                  "bytes_in_flight",
                                                  "delivered_bytes",
                                                  "retransmitted_packets",
                                                  "lost_packets",
                                                  "outages",
                                                  "paths"};
  static const std::vector<std::string> kLinks = {
      "name",       "backend",    "bind",       "peer",     "path",  "state",
      "srtt_s",     "cwnd_bytes", "bytes_sent", "rate_bps", "rtt_s", "mtu",
      "tx_packets", "rx_packets", "tx_full",    "tx_errors"};
  static const std::vector<std::string> kFlows = {
      "kind", "src",    "dst",     "sport", "dport",     "dest_qp", "proto",
      "peer", "stream", "packets", "bytes", "ce_marked", "dropped", "idle_s"};
  if (cmd == "peers") return &kPeers;
  if (cmd == "links") return &kLinks;
  if (cmd == "flows") return &kFlows;
  return nullptr;
}

void print_rows(const Json& rows, const std::string& what, bool wide, std::ostream& out) {
  if (rows.empty()) {
    out << "no " << what << "\n";
    return;
  }
  std::vector<std::string> columns;
  std::vector<std::vector<std::pair<std::string, Json>>> flat;
  for (const Json& row : rows) {
    std::vector<std::pair<std::string, Json>> cells;
    if (row.is_object()) {
      flatten("", row, cells);
    } else {
      cells.emplace_back("value", row);
    }
    for (const auto& [k, v] : cells) {
      if (std::find(columns.begin(), columns.end(), k) == columns.end()) columns.push_back(k);
    }
    flat.push_back(std::move(cells));
  }
  if (const auto* narrow = narrow_columns(what); narrow != nullptr && !wide) {
    std::vector<std::string> picked;
    for (const auto& c : *narrow) {
      if (std::find(columns.begin(), columns.end(), c) != columns.end()) picked.push_back(c);
    }
    // Rows with none of the usual columns are shown whole.
    if (!picked.empty()) columns = std::move(picked);
  }
  std::vector<std::vector<std::string>> table;
  std::vector<std::string> header;
  for (const auto& c : columns) {
    std::string h = c;
    std::transform(h.begin(), h.end(), h.begin(),
                   [](unsigned char ch) { return static_cast<char>(std::toupper(ch)); });
    header.push_back(h);
  }
  table.push_back(header);
  for (const auto& cells : flat) {
    std::vector<std::string> line;
    for (const auto& c : columns) {
      auto it =
          std::find_if(cells.begin(), cells.end(), [&](const auto& kv) { return kv.first == c; });
      line.push_back(it == cells.end() ? "-" : format_value(c, it->second));
    }
    table.push_back(std::move(line));
  }
  print_aligned(table, out);
}

}  // namespace

void print_aligned(const std::vector<std::vector<std::string>>& rows, std::ostream& out) {
  std::vector<size_t> width;
  for (const auto& r : rows) {
    width.resize(std::max(width.size(), r.size()), 0);
    for (size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], r[i].size());
  }
  for (const auto& r : rows) {
    std::string line;
    for (size_t i = 0; i < r.size(); ++i) {
      line += r[i];
      if (i + 1 < r.size()) line += std::string(width[i] - r[i].size() + 2, ' ');
    }
    out << line << "\n";
  }
}

std::string format_value(const std::string& key, const Json& v) {
  if (v.is_null()) return "-";
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "yes" : "no";
  if (v.is_number()) {
    const double d = v.get<double>();
    if (ends_with(key, "_bps") || ends_with(key, "_bits_per_second")) {
      static const char* const kUnits[] = {"bit/s", "kbit/s", "Mbit/s", "Gbit/s", "Tbit/s"};
      return scaled(d, kUnits, 5, 1000, "{:.2f} {}");
    }
    if (key == "bytes" || ends_with(key, "_bytes") || key.rfind("bytes_", 0) == 0 ||
        key.find(".bytes") != std::string::npos) {
      if (std::fabs(d) < 1024) return number(d) + " B";
      static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
      return scaled(d, kUnits, 5, 1024, "{:.1f} {}");
    }
    if (ends_with(key, "_s") || ends_with(key, "_seconds")) return seconds(d);
    if (ends_with(key, "_ratio")) return fmt::format("{:.3f}%", d * 100);
    return number(d);
  }
  if (v.is_array()) {
    // Scalars as "a,b"; objects (routes) as their values: "198.18.2.0/24 site-b, ...".
    std::string s;
    for (const Json& e : v) {
      if (e.is_object()) {
        if (!s.empty()) s += ", ";
        std::string item;
        for (auto it = e.begin(); it != e.end(); ++it) {
          if (!item.empty()) item += " ";
          item += it->is_primitive() ? format_value(it.key(), *it) : it->dump();
        }
        s += item;
      } else {
        if (!s.empty()) s += ",";
        s += e.is_primitive() ? format_value(key, e) : e.dump();
      }
    }
    return s.empty() ? "-" : s;
  }
  return v.dump();
}

void print_table(const std::string& cmd, const Json& result, bool wide, std::ostream& out) {
  if (result.is_array()) return print_rows(result, cmd, wide, out);
  if (result.is_object()) {
    // {"peers":[...]} and the like: a table of the list.
    if (auto it = result.find(cmd); it != result.end() && it->is_array()) {
      print_rows(*it, cmd, wide, out);
      return;
    }
    std::vector<std::pair<std::string, Json>> cells;
    flatten("", result, cells);
    size_t w = 0;
    for (const auto& [k, v] : cells) w = std::max(w, k.size());
    for (const auto& [k, v] : cells) {
      out << k << std::string(w - k.size() + 2, ' ') << format_value(k, v) << "\n";
    }
    return;
  }
  out << format_value(cmd, result) << "\n";
}

int fetch(const std::string& socket, const std::string& cmd, int timeout_ms, Json& result,
          std::ostream& err) {
  Json reply;
  try {
    reply = gw::control_request(socket, cmd, Json::object(), timeout_ms);
  } catch (const std::system_error& e) {
    err << "rowanctl: the daemon is unreachable: " << e.what() << "\n";
    return kExitUnavailable;
  } catch (const std::exception& e) {
    err << "rowanctl: " << e.what() << "\n";
    return kExitProtocol;
  }
  if (!reply.value("ok", false)) {
    err << "rowanctl: " << cmd << ": " << reply.value("error", std::string("error")) << "\n";
    return kExitError;
  }
  result = std::move(reply["result"]);
  return 0;
}

namespace {

void print_json(const Json& v, const OutputOptions& opt, std::ostream& out) {
  out << v.dump(opt.pretty ? 2 : -1, ' ', false, Json::error_handler_t::replace) << "\n";
}

// `reload`'s result: {"accepted":true,"applied":...,"restart_needed":[...]} or
// {"accepted":false,"errors":[...]}.
int print_reload(const Json& result, const OutputOptions& opt, std::ostream& out,
                 std::ostream& err) {
  const auto acc = result.find("accepted");
  if (acc == result.end() || !acc->is_boolean()) {
    err << "rowanctl: reload: the daemon's reply says nothing of the result\n";
    return kExitProtocol;
  }
  const bool accepted = acc->get<bool>();
  if (opt.json || opt.pretty) {
    print_json(result, opt, out);
  } else if (accepted) {
    out << "reload accepted: " << result.value("applied", std::string("-")) << "\n";
    if (auto rn = result.find("restart_needed"); rn != result.end() && rn->is_array()) {
      for (const Json& s : *rn) {
        if (s.is_string()) out << "not applied, needs a restart: " << s.get<std::string>() << "\n";
      }
    }
  }
  if (accepted) return 0;
  if (auto es = result.find("errors"); es != result.end() && es->is_array()) {
    for (const Json& e : *es) {
      if (e.is_string()) err << e.get<std::string>() << "\n";
    }
  }
  err << "rowanctl: reload rejected; the daemon runs on with its current configuration\n";
  return kExitError;
}

}  // namespace

int run_command(const std::string& socket, const std::string& cmd, const OutputOptions& opt,
                std::ostream& out, std::ostream& err) {
  Json result;
  if (const int rc = fetch(socket, cmd, opt.timeout_ms, result, err); rc != 0) return rc;
  if (cmd == "reload") return print_reload(result, opt, out, err);
  if (opt.json || opt.pretty) {
    print_json(result, opt, out);
  } else {
    print_table(cmd, result, opt.wide, out);
  }
  return 0;
}

int run_routes(const std::string& socket, const OutputOptions& opt, std::ostream& out,
               std::ostream& err) {
  Json status;
  if (const int rc = fetch(socket, "status", opt.timeout_ms, status, err); rc != 0) return rc;
  auto it = status.find("routes");
  if (!status.is_object() || it == status.end() || !it->is_array()) {
    err << "rowanctl: routes: the daemon's status has no \"routes\" list\n";
    return kExitProtocol;
  }
  if (opt.json || opt.pretty) {
    print_json(*it, opt, out);
  } else {
    print_table("routes", *it, opt.wide, out);
  }
  return 0;
}

int run_peer(const std::string& socket, const std::string& name, const OutputOptions& opt,
             std::ostream& out, std::ostream& err) {
  Json peers, links, status;
  if (const int rc = fetch(socket, "peers", opt.timeout_ms, peers, err); rc != 0) return rc;
  if (peers.is_object() && peers.contains("peers")) peers = Json(peers["peers"]);
  if (!peers.is_array()) {
    err << "rowanctl: peer: the daemon's peers result is not a list\n";
    return kExitProtocol;
  }
  Json found;
  std::string known;
  for (const Json& p : peers) {
    if (!p.is_object()) continue;
    const std::string n = p.value("name", std::string());
    if (n == name) found = p;
    known += (known.empty() ? "" : ", ") + n;
  }
  if (found.is_null()) {
    err << "rowanctl: no peer '" << name << "' (peers: " << (known.empty() ? "none" : known)
        << ")\n";
    return kExitError;
  }
  // Its path(s) and routes, from the same daemon.
  if (fetch(socket, "links", opt.timeout_ms, links, err) == 0 && links.is_array()) {
    Json mine = Json::array();
    for (const Json& l : links) {
      if (l.is_object() && l.value("peer", std::string()) == name) mine.push_back(l);
    }
    found["paths"] = mine;
  }
  if (fetch(socket, "status", opt.timeout_ms, status, err) == 0 && status.is_object() &&
      status.contains("routes") && status["routes"].is_array()) {
    Json mine = Json::array();
    for (const Json& r : status["routes"]) {
      if (r.is_object() && r.value("peer", std::string()) == name) {
        mine.push_back(r.value("prefix", std::string()) + " " + r.value("mode", std::string()));
      }
    }
    found["routes"] = mine;
  }
  if (opt.json || opt.pretty) {
    print_json(found, opt, out);
  } else {
    print_table("peer", found, opt.wide, out);
  }
  return 0;
}

}  // namespace rowan::ctl
