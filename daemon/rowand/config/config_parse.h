// The pieces of rowand's config parser that its files share (config.cc,
// config_sections.cc, config_check.cc): positions, the error list, the table
// reader that reports unknown keys, and the section readers and checks.
// Internal to the parser: nothing outside config*.cc includes this.
#pragma once

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include <toml++/toml.h>

#include "config/config.h"

namespace rowan::gw::config_parse {

inline bool has_nul(std::string_view s) { return s.find('\0') != std::string_view::npos; }

struct Pos {
  uint32_t line = 1;
  uint32_t col = 1;
};

inline Pos pos_of(const toml::source_region& r) {
  Pos p;
  if (r.begin.line > 0) p.line = r.begin.line;
  if (r.begin.column > 0) p.col = r.begin.column;
  return p;
}
inline Pos pos_of(const toml::node& n) { return pos_of(n.source()); }

class Errors {
 public:
  explicit Errors(const std::string& path) : path_(path) {}
  void add(Pos p, std::string msg) {
    items_.push_back({p.line, p.col, items_.size(), std::move(msg)});
  }
  bool empty() const { return items_.empty(); }
  std::vector<std::string> lines() {
    std::sort(items_.begin(), items_.end(), [](const Item& a, const Item& b) {
      return std::tie(a.line, a.col, a.seq) < std::tie(b.line, b.col, b.seq);
    });
    std::vector<std::string> out;
    for (const auto& i : items_)
      out.push_back(fmt::format("{}:{}:{}: {}", path_, i.line, i.col, i.msg));
    return out;
  }

 private:
  struct Item {
    uint32_t line;
    uint32_t col;
    size_t seq;
    std::string msg;
  };
  std::string path_;
  std::vector<Item> items_;
};

inline const char* type_name(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::table:
      return "a table";
    case toml::node_type::array:
      return "an array";
    case toml::node_type::string:
      return "a string";
    case toml::node_type::integer:
      return "an integer";
    case toml::node_type::floating_point:
      return "a float";
    case toml::node_type::boolean:
      return "a boolean";
    case toml::node_type::date:
      return "a date";
    case toml::node_type::time:
      return "a time";
    case toml::node_type::date_time:
      return "a date-time";
    case toml::node_type::none:
      break;
  }
  return "nothing";
}

inline std::string quote_text(std::string_view s) {
  std::string out = "'";
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7F) {
      out += fmt::format("\\x{:02x}", u);
    } else {
      out += c;
    }
    if (out.size() > 80) {
      out += "...";
      break;
    }
  }
  return out + "'";
}

inline bool valid_name(std::string_view s) {
  if (s.empty() || s.size() > 32) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-' || c == '.';
  });
}

// Reads one TOML table: typed getters mark keys as consumed; finish() reports
// every key nobody asked for.
class TableReader {
 public:
  TableReader(const toml::table* t, std::string prefix, Errors& errors)
      : table_(t), prefix_(std::move(prefix)), errors_(errors) {}
  TableReader(const TableReader&) = delete;
  TableReader& operator=(const TableReader&) = delete;

  Pos pos() const { return table_ != nullptr ? pos_of(*table_) : Pos{}; }
  std::string name(std::string_view key) const { return prefix_ + std::string(key); }

  const toml::node* get(std::string_view key) {
    used_.insert(std::string(key));
    if (table_ == nullptr) return nullptr;
    return table_->get(key);
  }

  void error(const toml::node* n, std::string_view key, const std::string& msg) {
    errors_.add(n != nullptr ? pos_of(*n) : pos(), name(key) + ": " + msg);
  }
  void wrong_type(const toml::node& n, std::string_view key, std::string_view want) {
    error(&n, key, fmt::format("expected {}, got {}", want, type_name(n)));
  }
  void require(std::string_view key) {
    if (get(key) == nullptr) errors_.add(pos(), name(key) + " is required");
  }

  const std::string* string_node(std::string_view key, const toml::node** where = nullptr) {
    const toml::node* n = get(key);
    if (where != nullptr) *where = n;
    if (n == nullptr) return nullptr;
    if (!n->is_string()) {
      wrong_type(*n, key, "a string");
      return nullptr;
    }
    return &n->as_string()->get();
  }

  void str(std::string_view key, std::string& out) {
    if (const std::string* s = string_node(key)) {
      if (has_nul(*s)) {
        error(get(key), key, "contains a NUL character");
        return;
      }
      out = *s;
    }
  }

  void boolean(std::string_view key, bool& out) {
    const toml::node* n = get(key);
    if (n == nullptr) return;
    if (!n->is_boolean()) return wrong_type(*n, key, "a boolean (true or false)");
    out = n->as_boolean()->get();
  }

  template <class T>
  void integer(std::string_view key, T& out, int64_t lo, int64_t hi) {
    const toml::node* n = get(key);
    if (n == nullptr) return;
    if (!n->is_integer()) return wrong_type(*n, key, "an integer");
    const int64_t v = n->as_integer()->get();
    if (v < lo || v > hi) return error(n, key, fmt::format("{} is outside [{}, {}]", v, lo, hi));
    out = static_cast<T>(v);
  }

  void real(std::string_view key, double& out, double lo, double hi) {
    const toml::node* n = get(key);
    if (n == nullptr) return;
    double v = 0;
    if (n->is_floating_point()) {
      v = n->as_floating_point()->get();
    } else if (n->is_integer()) {
      v = static_cast<double>(n->as_integer()->get());
    } else {
      return wrong_type(*n, key, "a number");
    }
    if (!std::isfinite(v) || v < lo || v > hi) {
      return error(n, key, fmt::format("{} is outside [{}, {}]", v, lo, hi));
    }
    out = v;
  }

  void rate(std::string_view key, BitsPerSec& out, BitsPerSec lo) {
    const toml::node* n = nullptr;
    const std::string* s = string_node(key, &n);
    if (s == nullptr) return;
    try {
      const BitsPerSec r = cc::parse_rate(*s);
      if (r < lo) {
        return error(n, key,
                     fmt::format("{} is below the minimum of {} bit/s", quote_text(*s), lo.bps()));
      }
      out = r;
    } catch (const std::exception& e) {
      error(
          n, key,
          fmt::format("bad rate {} (e.g. \"10gbit\", \"400mbit\"): {}", quote_text(*s), e.what()));
    }
  }

  void duration(std::string_view key, Duration& out, Duration lo, Duration hi) {
    const toml::node* n = nullptr;
    const std::string* s = string_node(key, &n);
    if (s == nullptr) return;
    try {
      const Duration d = cc::parse_duration(*s);
      if (d < lo || d > hi) {
        return error(n, key,
                     fmt::format("{} is outside [{} ns, {} ns]", quote_text(*s), lo.ns(), hi.ns()));
      }
      out = d;
    } catch (const std::exception& e) {
      error(n, key,
            fmt::format("bad duration {} (e.g. \"20ms\", \"1.5s\"): {}", quote_text(*s), e.what()));
    }
  }

  void ip(std::string_view key, roce::IpAddr& out) {
    const toml::node* n = nullptr;
    const std::string* s = string_node(key, &n);
    if (s == nullptr) return;
    auto a = parse_ip(*s);
    if (!a) return error(n, key, fmt::format("{} is not an IPv4 or IPv6 address", quote_text(*s)));
    out = *a;
  }

  void sockaddr(std::string_view key, SockAddr& out, uint16_t default_port) {
    const toml::node* n = nullptr;
    const std::string* s = string_node(key, &n);
    if (s == nullptr) return;
    auto a = parse_sockaddr(*s, default_port);
    if (!a) {
      return error(n, key,
                   fmt::format("{} is not ADDRESS[:PORT] (e.g. \"198.19.0.2:47910\" or "
                               "\"[2001:2::2]:47910\", port 1-65535)",
                               quote_text(*s)));
    }
    out = *a;
  }

  // Consumes a sub-table key; nullptr (after an error) when it has another type.
  const toml::table* table(std::string_view key) {
    const toml::node* n = get(key);
    if (n == nullptr) return nullptr;
    if (!n->is_table()) {
      wrong_type(*n, key, "a table");
      return nullptr;
    }
    return n->as_table();
  }

  void finish() {
    if (table_ == nullptr) return;
    for (auto&& [k, v] : *table_) {
      if (used_.count(std::string(k.str())) != 0) continue;
      Pos p = pos_of(k.source());
      if (k.source().begin.line == 0) p = pos_of(v);
      errors_.add(p, fmt::format("unknown key {}", quote_text(prefix_ + std::string(k.str()))));
    }
  }

 private:
  const toml::table* table_;
  std::string prefix_;
  Errors& errors_;
  std::set<std::string> used_;
};

// Where things were, for the checks that run after the walk.
struct LinkPos {
  Pos name, device, bind;
};
struct PeerPos {
  Pos table, name, endpoint;
};
struct RoutePos {
  Pos prefix, peer;
};

inline std::string at(Pos p) { return fmt::format("{}:{}", p.line, p.col); }

// Visits the tables of an array-of-tables key (`[[peer]]`).
template <class F>
void each_table(TableReader& parent, std::string_view key, F&& f) {
  const toml::node* n = parent.get(key);
  if (n == nullptr) return;
  if (!n->is_array()) {
    return parent.wrong_type(*n, key, fmt::format("an array of tables ([[{}]])", parent.name(key)));
  }
  for (const toml::node& e : *n->as_array()) {
    if (!e.is_table()) {
      parent.wrong_type(e, key, "a table in the array");
      continue;
    }
    f(*e.as_table());
  }
}

// ---------------------------------------------------------------------------
// Sections (config_sections.cc) and the checks across them (config_check.cc)

std::string check_lcores(const std::string& text);
void read_eal(TableReader& root, EalConfig& eal, Errors& errors);
void read_local(TableReader& root, LocalConfig& local, Errors& errors);
void read_wan(TableReader& root, WanConfig& wan, std::vector<LinkPos>& link_pos, Errors& errors);
void read_peers(TableReader& root, std::vector<PeerConfig>& peers, std::vector<PeerPos>& peer_pos,
                const WanConfig& wan, bool insecure, Errors& errors);
void read_routes(TableReader& root, std::vector<RouteConfig>& routes,
                 std::vector<RoutePos>& route_pos, Errors& errors);
void read_cc(TableReader& root, CcConfig& cc, Errors& errors);
void read_control(TableReader& root, ControlConfig& control, Errors& errors);
void read_metrics(TableReader& root, MetricsConfig& metrics, Errors& errors);
void read_log(TableReader& root, LogConfig& log, Errors& errors);
void cross_check(const GatewayConfig& cfg, const std::vector<LinkPos>& link_pos,
                 const std::vector<PeerPos>& peer_pos, const std::vector<RoutePos>& route_pos,
                 bool have_wan_table, Errors& errors);

}  // namespace rowan::gw::config_parse
