// rowand's TOML configuration: parsing, validation and the reverse (to_toml).
//
// The parser walks the toml++ tree with a reader per table that remembers
// which keys it consumed, so every key it does not know is reported at its own
// position. Semantic checks (duplicates, references, overlaps, CC parameters)
// run after the walk on the parsed values and the positions kept beside them.
// Every problem goes into one list; nothing is applied unless it is empty.
//
// parse_config must survive any input (it is fuzzed): no exception other than
// ConfigError leaves it, and every integer is range-checked before narrowing.
#include "config.h"

#include <sched.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include <fmt/format.h>

#include <toml++/toml.h>

#include "base/clock.h"
#include "crypto/keys.h"
#include "registry.h"

namespace rowan::gw {

// ---------------------------------------------------------------------------
// Plain types

namespace {

bool same_bits(const roce::IpAddr& a, const roce::IpAddr& b, unsigned bits) {
  const unsigned full = bits / 8;
  if (std::memcmp(a.bytes.data(), b.bytes.data(), full) != 0) return false;
  const unsigned rest = bits % 8;
  if (rest == 0) return true;
  const auto mask = static_cast<uint8_t>(0xFFu << (8 - rest));
  return (a.bytes[full] & mask) == (b.bytes[full] & mask);
}

unsigned max_len(const roce::IpAddr& a) { return a.version == 4 ? 32 : 128; }

std::string ip_to_string(const roce::IpAddr& a) {
  char buf[64];
  const size_t n = roce::format_ip_addr(a, buf, sizeof buf);
  return n == 0 ? std::string("?") : std::string(buf, n);
}

bool ip_equal(const roce::IpAddr& a, const roce::IpAddr& b) {
  return a.version == b.version && a.bytes == b.bytes;
}

bool has_nul(std::string_view s) { return s.find('\0') != std::string_view::npos; }

std::optional<roce::IpAddr> parse_ip(std::string_view text) {
  if (text.empty() || has_nul(text)) return std::nullopt;
  roce::IpAddr a = roce::parse_ip_addr(text);
  if (a.version != 4 && a.version != 6) return std::nullopt;
  return a;
}

std::optional<unsigned> parse_uint(std::string_view s, unsigned max) {
  if (s.empty() || s.size() > 6) return std::nullopt;
  unsigned v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<unsigned>(c - '0');
  }
  if (v > max) return std::nullopt;
  return v;
}

}  // namespace

Prefix network_of(const Prefix& p) {
  Prefix out = p;
  if (p.addr.version != 4 && p.addr.version != 6) return out;
  for (unsigned bit = p.len; bit < max_len(p.addr); ++bit) {
    out.addr.bytes[bit / 8] = static_cast<uint8_t>(out.addr.bytes[bit / 8] & ~(0x80u >> (bit % 8)));
  }
  return out;
}

bool Prefix::contains(const roce::IpAddr& a) const {
  return a.version == addr.version && same_bits(addr, a, len);
}

bool Prefix::overlaps(const Prefix& o) const {
  return o.addr.version == addr.version && same_bits(addr, o.addr, std::min(len, o.len));
}

// fmt rather than std::string's operator+: GCC 12 at -O3 reports a false
// -Wrestrict inside the inlined operator+ (GCC bug 105329).
std::string Prefix::to_string() const { return fmt::format("{}/{}", ip_to_string(addr), len); }

std::string SockAddr::to_string() const {
  if (addr.version == 6) return fmt::format("[{}]:{}", ip_to_string(addr), port);
  return fmt::format("{}:{}", ip_to_string(addr), port);
}

const char* to_string(RouteMode m) {
  switch (m) {
    case RouteMode::kPassthrough:
      return "passthrough";
    case RouteMode::kSplit:
      return "split";
  }
  return "?";
}

const PeerConfig* GatewayConfig::find_peer(const std::string& name) const {
  for (const auto& p : peers) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

const WanLinkConfig* GatewayConfig::find_link(const std::string& name) const {
  for (const auto& l : wan.links) {
    if (l.name == name) return &l;
  }
  return nullptr;
}

namespace {
std::string join_lines(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& e : v) {
    if (!s.empty()) s += '\n';
    s += e;
  }
  return s;
}
}  // namespace

ConfigError::ConfigError(std::vector<std::string> errors)
    : std::runtime_error(join_lines(errors)), errors_(std::move(errors)) {}

std::optional<Prefix> parse_prefix(std::string_view text) {
  const size_t slash = text.find('/');
  if (slash == std::string_view::npos) return std::nullopt;
  auto addr = parse_ip(text.substr(0, slash));
  if (!addr) return std::nullopt;
  auto len = parse_uint(text.substr(slash + 1), max_len(*addr));
  if (!len) return std::nullopt;
  Prefix p{*addr, static_cast<uint8_t>(*len)};
  // Host bits must be zero: "198.18.1.5/24" is almost always a typo.
  if (!ip_equal(network_of(p).addr, p.addr)) return std::nullopt;
  return p;
}

std::optional<SockAddr> parse_sockaddr(std::string_view text, uint16_t default_port) {
  std::string_view host = text;
  std::optional<std::string_view> port;
  if (!text.empty() && text.front() == '[') {
    const size_t close = text.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    host = text.substr(1, close - 1);
    const std::string_view rest = text.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return std::nullopt;
      port = rest.substr(1);
    }
    auto a = parse_ip(host);
    if (!a || a->version != 6) return std::nullopt;
  } else if (std::count(text.begin(), text.end(), ':') == 1) {
    const size_t colon = text.find(':');
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  auto a = parse_ip(host);
  if (!a) return std::nullopt;
  SockAddr s{*a, default_port};
  if (port) {
    auto p = parse_uint(*port, 65535);
    if (!p) return std::nullopt;
    s.port = static_cast<uint16_t>(*p);
  }
  if (s.port == 0) return std::nullopt;
  return s;
}

// ---------------------------------------------------------------------------
// Error collection

namespace {

struct Pos {
  uint32_t line = 1;
  uint32_t col = 1;
};

Pos pos_of(const toml::source_region& r) {
  Pos p;
  if (r.begin.line > 0) p.line = r.begin.line;
  if (r.begin.column > 0) p.col = r.begin.column;
  return p;
}
Pos pos_of(const toml::node& n) { return pos_of(n.source()); }

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

const char* type_name(const toml::node& n) {
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

std::string quote_text(std::string_view s) {
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

bool valid_name(std::string_view s) {
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

std::string at(Pos p) { return fmt::format("{}:{}", p.line, p.col); }

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
// Sections

// DPDK's --lcores syntax: "lcores[@cpus]" groups separated by ',', where a
// set is a number, a range "a-b", or a parenthesised list of those
// ("1,2@(5-7),(3-5)@(0,2)"). Returns the problem, or "" when it is valid:
// well-formed, lcore ids below DPDK's RTE_MAX_LCORE (128), no lcore twice, and
// every CPU one this process may run on.
std::string check_lcores(const std::string& text) {
  constexpr unsigned kMaxLcore = 128;
  static const char* const kSyntax =
      "is not an EAL core list (e.g. \"0\", \"0-2\", \"1@0\", \"(0,1)@2\")";
  size_t i = 0;
  auto number = [&](unsigned& v) {
    const size_t start = i;
    v = 0;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9' && i - start < 5) {
      v = v * 10 + static_cast<unsigned>(text[i++] - '0');
    }
    return i > start && !(i < text.size() && text[i] >= '0' && text[i] <= '9');
  };
  auto item = [&](std::set<unsigned>& out) {
    unsigned lo = 0, hi = 0;
    if (!number(lo)) return false;
    hi = lo;
    if (i < text.size() && text[i] == '-') {
      ++i;
      if (!number(hi) || hi < lo) return false;
    }
    for (unsigned v = lo; v <= hi; ++v) out.insert(v);
    return true;
  };
  auto group = [&](std::set<unsigned>& out) {
    if (i < text.size() && text[i] == '(') {
      ++i;
      while (true) {
        if (!item(out)) return false;
        if (i < text.size() && text[i] == ',') {
          ++i;
          continue;
        }
        break;
      }
      if (i >= text.size() || text[i] != ')') return false;
      ++i;
      return true;
    }
    return item(out);
  };
  std::set<unsigned> lcores_seen;
  std::set<unsigned> cpus_used;
  while (true) {
    std::set<unsigned> lcores;
    if (!group(lcores)) return kSyntax;
    std::set<unsigned> cpus = lcores;
    if (i < text.size() && text[i] == '@') {
      ++i;
      cpus.clear();
      if (!group(cpus)) return kSyntax;
    }
    for (unsigned l : lcores) {
      if (l >= kMaxLcore)
        return fmt::format("lcore {} is not below DPDK's limit of {}", l, kMaxLcore);
      if (!lcores_seen.insert(l).second) return fmt::format("lcore {} is given twice", l);
    }
    cpus_used.insert(cpus.begin(), cpus.end());
    if (i == text.size()) break;
    if (text[i] != ',') return kSyntax;
    ++i;
  }
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (::sched_getaffinity(0, sizeof allowed, &allowed) != 0) return {};
  std::string avail;
  for (unsigned c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &allowed))
      fmt::format_to(std::back_inserter(avail), "{}{}", avail.empty() ? "" : ",", c);
  }
  for (unsigned c : cpus_used) {
    if (c >= CPU_SETSIZE || !CPU_ISSET(c, &allowed)) {
      return fmt::format("CPU {} is not available to this process (available: {})", c, avail);
    }
  }
  return {};
}

void read_eal(TableReader& root, EalConfig& eal, Errors& errors) {
  const toml::table* t = root.table("eal");
  if (t == nullptr) return;
  TableReader r(t, "eal.", errors);
  const toml::node* n = nullptr;
  if (const std::string* s = r.string_node("lcores", &n)) {
    if (std::string problem = check_lcores(*s); problem.empty()) {
      eal.lcores = *s;
    } else {
      r.error(n, "lcores", fmt::format("{}: {}", quote_text(*s), problem));
    }
  }
  if (const std::string* s = r.string_node("file_prefix", &n)) {
    if (!s->empty() && !valid_name(*s)) {
      r.error(n, "file_prefix",
              fmt::format("{} must be 1-32 letters, digits, '_', '-' or '.'", quote_text(*s)));
    } else {
      eal.file_prefix = *s;
    }
  }
  if (const std::string* s = r.string_node("huge_dir", &n)) {
    if (!s->empty() && (s->front() != '/' || has_nul(*s))) {
      r.error(n, "huge_dir", fmt::format("{} must be an absolute path", quote_text(*s)));
    } else {
      eal.huge_dir = *s;
    }
  }
  r.boolean("no_huge", eal.no_huge);
  r.boolean("in_memory", eal.in_memory);
  r.integer("memory_mb", eal.memory_mb, 0, 1 << 22);
  if (eal.no_huge && eal.in_memory) {
    errors.add(r.pos(), "eal: no_huge and in_memory cannot both be set (DPDK rejects the pair)");
  }
  if (const toml::node* x = r.get("extra_args")) {
    if (!x->is_array()) {
      r.wrong_type(*x, "extra_args", "an array of strings");
    } else {
      static const std::map<std::string, std::string> kManaged = {{"-l", "lcores"},
                                                                  {"--lcores", "lcores"},
                                                                  {"-c", "lcores"},
                                                                  {"--file-prefix", "file_prefix"},
                                                                  {"--huge-dir", "huge_dir"},
                                                                  {"--no-huge", "no_huge"},
                                                                  {"--in-memory", "in_memory"},
                                                                  {"-m", "memory_mb"}};
      for (const toml::node& e : *x->as_array()) {
        if (!e.is_string()) {
          r.wrong_type(e, "extra_args", "a string in the array");
          continue;
        }
        const std::string& a = e.as_string()->get();
        const std::string opt = a.substr(0, a.find('='));
        if (auto it = kManaged.find(opt); it != kManaged.end()) {
          r.error(&e, "extra_args",
                  fmt::format("{} is set with eal.{} instead", quote_text(opt), it->second));
          continue;
        }
        if (has_nul(a)) {
          r.error(&e, "extra_args", "contains a NUL character");
          continue;
        }
        eal.extra_args.push_back(a);
      }
    }
  }
  r.finish();
}

void read_local(TableReader& root, LocalConfig& local, Errors& errors) {
  const toml::table* t = root.table("local");
  if (t == nullptr) {
    if (root.get("local") == nullptr) {
      errors.add(Pos{}, "missing [local] table (device and address are required)");
    }
    return;
  }
  TableReader r(t, "local.", errors);
  r.require("device");
  r.require("address");
  const toml::node* n = nullptr;
  if (const std::string* s = r.string_node("device", &n)) {
    if (s->empty() || has_nul(*s)) {
      r.error(n, "device",
              "must be a PCI address or a vdev spec (e.g. \"net_af_packet0,iface=lan0\")");
    } else {
      local.device = *s;
    }
  }
  r.ip("address", local.address);
  const unsigned max = local.address.version == 6 ? 128 : 32;
  r.integer("prefix_len", local.prefix_len, 1, max);
  r.ip("address6", local.address6);
  if (local.address6.version == 4 || (local.address6.version == 6 && max == 128)) {
    r.error(r.get("address6"), "address6",
            "must be an IPv6 address next to an IPv4 local.address (a dual-stack site)");
    local.address6 = {};
  }
  r.integer("prefix_len6", local.prefix_len6, 1, 128);
  if (const std::string* s = r.string_node("mac", &n)) {
    std::array<uint8_t, 6> mac{};
    unsigned parsed = 0;
    bool ok = s->size() == 17;
    for (size_t i = 0; ok && i < 6; ++i) {
      auto hex = [](char c) -> int {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        return -1;
      };
      const int hi = hex((*s)[i * 3]);
      const int lo = hex((*s)[i * 3 + 1]);
      if (hi < 0 || lo < 0 || (i < 5 && (*s)[i * 3 + 2] != ':')) {
        ok = false;
      } else {
        mac[i] = static_cast<uint8_t>(hi * 16 + lo);
        ++parsed;
      }
    }
    if (!ok || parsed != 6) {
      r.error(n, "mac", fmt::format("{} is not a MAC address (xx:xx:xx:xx:xx:xx)", quote_text(*s)));
    } else if ((mac[0] & 1) != 0 || mac == std::array<uint8_t, 6>{}) {
      r.error(n, "mac", fmt::format("{} is not a unicast MAC address", quote_text(*s)));
    } else {
      local.mac = mac;
    }
  }
  r.integer("mtu", local.mtu, local.address.version == 6 ? 1280 : 576, 9600);
  r.integer("roce_mtu", local.roce_mtu, 0, 4096);
  if (local.roce_mtu != 0 &&
      (local.roce_mtu < 256 || (local.roce_mtu & (local.roce_mtu - 1)) != 0)) {
    r.error(
        r.get("roce_mtu"), "roce_mtu",
        fmt::format("{} is not a RoCE path MTU (256, 512, 1024, 2048 or 4096; 0: as negotiated)",
                    local.roce_mtu));
    local.roce_mtu = 0;
  }
  auto ring = [&](std::string_view key, uint16_t& out) {
    uint16_t v = out;
    r.integer(key, v, 64, 32768);
    const toml::node* rn = r.get(key);
    if ((v & (v - 1)) != 0) {
      r.error(rn, key, fmt::format("{} is not a power of two", v));
      return;
    }
    out = v;
  };
  ring("rx_ring", local.rx_ring);
  ring("tx_ring", local.tx_ring);
  r.duration("wake_coalesce", local.wake_coalesce, Duration::zero(), Duration::from_ms(10));
  r.boolean("insecure", local.insecure);
  r.str("private_key_file", local.private_key_file);
  if (!local.insecure && local.private_key_file.empty()) {
    const toml::node* kn = r.get("private_key_file");
    if (kn == nullptr || kn->is_string()) {
      errors.add(kn != nullptr ? pos_of(*kn) : r.pos(),
                 "local.private_key_file is required unless local.insecure = true (create one "
                 "with `rowanctl genkey`)");
    }
  }
  r.finish();
}

WanBackend read_backend(TableReader& r) {
  const toml::node* n = nullptr;
  const std::string* s = r.string_node("backend", &n);
  if (s == nullptr || *s == "udp") return WanBackend::kUdp;
  if (*s == "dpdk") return WanBackend::kDpdk;
  r.error(n, "backend", fmt::format("{} is not \"udp\" or \"dpdk\"", quote_text(*s)));
  return WanBackend::kUdp;
}

void read_wan(TableReader& root, WanConfig& wan, std::vector<LinkPos>& link_pos, Errors& errors) {
  const toml::table* t = root.table("wan");
  if (t == nullptr) return;
  TableReader r(t, "wan.", errors);
  r.real("send_buffer_bdp", wan.send_buffer_bdp, 0.1, 1000);
  r.real("recv_window_bdp", wan.recv_window_bdp, 0.1, 1000);
  r.integer("max_flows", wan.max_flows, 1, 1 << 20);
  r.duration("flow_idle_timeout", wan.flow_idle_timeout, Duration::from_ms(100),
             Duration::from_s(86400));
  each_table(r, "link", [&](const toml::table& lt) {
    TableReader l(&lt, "wan.link.", errors);
    WanLinkConfig link;
    LinkPos lp;
    lp.name = lp.device = lp.bind = l.pos();
    l.require("name");
    l.require("bind");
    const toml::node* n = nullptr;
    if (const std::string* s = l.string_node("name", &n)) {
      lp.name = pos_of(*n);
      if (valid_name(*s)) {
        link.name = *s;
      } else {
        l.error(n, "name",
                fmt::format("{} must be 1-32 letters, digits, '_', '-' or '.'", quote_text(*s)));
      }
    }
    link.backend = read_backend(l);
    if (const toml::node* b = l.get("bind")) lp.bind = pos_of(*b);
    l.sockaddr("bind", link.bind, kDefaultWanPort);
    const toml::node* dev = nullptr;
    if (const std::string* s = l.string_node("device", &dev)) {
      lp.device = pos_of(*dev);
      if (link.backend != WanBackend::kDpdk) {
        l.error(dev, "device", "is only used by the dpdk backend");
      } else if (s->empty() || has_nul(*s)) {
        l.error(dev, "device", "must be a PCI address or a vdev spec");
      } else {
        link.device = *s;
      }
    } else if (link.backend == WanBackend::kDpdk && dev == nullptr) {
      errors.add(l.pos(), "wan.link.device is required with backend = \"dpdk\"");
    }
    const unsigned max = link.bind.addr.version == 6 ? 128 : 32;
    if (const toml::node* pl = l.get("prefix_len")) {
      if (link.backend != WanBackend::kDpdk)
        l.error(pl, "prefix_len", "is only used by the dpdk backend");
    }
    l.integer("prefix_len", link.prefix_len, 1, max);
    if (const toml::node* nh = l.get("next_hop")) {
      roce::IpAddr a;
      l.ip("next_hop", a);
      if (a.version != 0) {
        const Prefix subnet{link.bind.addr, link.prefix_len};
        if (link.backend != WanBackend::kDpdk) {
          l.error(nh, "next_hop", "is only used by the dpdk backend");
        } else if (link.bind.addr.version != 0 && !subnet.contains(a)) {
          l.error(nh, "next_hop",
                  fmt::format("{} is not on the link's subnet {}/{}", ip_to_string(a),
                              ip_to_string(link.bind.addr), link.prefix_len));
        } else {
          link.next_hop = a;
        }
      }
    }
    l.rate("rate", link.rate, BitsPerSec::from_bps(1000));
    l.duration("rtt", link.rtt, Duration::from_us(1), Duration::from_s(10));
    l.integer("mtu", link.mtu, link.bind.addr.version == 6 ? 1280 : 576, 9600);
    l.finish();
    wan.links.push_back(std::move(link));
    link_pos.push_back(lp);
  });
  r.finish();
}

// peer.endpoints: the peer's address on each of its links, in the order of
// `links`, the first being `endpoint`; each unique across the peers (a shared
// socket tells its peers apart by them, wan_link_mux.h).
void read_peer_endpoints(TableReader& r, PeerConfig& peer, const WanConfig& wan,
                         std::vector<std::pair<SockAddr, Pos>>& seen) {
  const toml::node* en = r.get("endpoints");
  if (en == nullptr) return;
  if (!en->is_array()) return r.wrong_type(*en, "endpoints", "an array of ADDRESS[:PORT]");
  const toml::array& arr = *en->as_array();
  if (arr.size() != peer.links.size()) {
    return r.error(en, "endpoints",
                   fmt::format("has {} entries but the peer has {} links ({}); give one per link, "
                               "in the order of links",
                               arr.size(), peer.links.size(), fmt::join(peer.links, ", ")));
  }
  std::vector<SockAddr> out;
  for (size_t i = 0; i < arr.size(); ++i) {
    const toml::node& e = *arr.get(i);
    const auto a = e.is_string() ? parse_sockaddr(e.as_string()->get(), kDefaultWanPort)
                                 : std::optional<SockAddr>{};
    if (!a) {
      r.error(&e, "endpoints", "an entry is not ADDRESS[:PORT] (e.g. \"198.19.1.2:47910\")");
      return;
    }
    const WanLinkConfig* link = nullptr;
    for (const auto& l : wan.links) {
      if (l.name == peer.links[i]) link = &l;
    }
    if (i == 0 && !(*a == peer.endpoint)) {
      r.error(&e, "endpoints",
              fmt::format("the first entry ({}) must be the endpoint, {}", a->to_string(),
                          peer.endpoint.to_string()));
      return;
    }
    if (link != nullptr && link->bind.addr.version != a->addr.version) {
      r.error(&e, "endpoints",
              fmt::format("{} is IPv{} but link {} binds IPv{}", a->to_string(), a->addr.version,
                          quote_text(link->name), link->bind.addr.version));
      return;
    }
    if (i > 0) {
      for (const auto& [other, where] : seen) {
        if (other == *a) {
          r.error(&e, "endpoints",
                  fmt::format("{} is already the endpoint of the peer at {}", a->to_string(),
                              at(where)));
          return;
        }
      }
      seen.emplace_back(*a, pos_of(e));
    }
    out.push_back(*a);
  }
  peer.endpoints = std::move(out);
}

void read_peers(TableReader& root, std::vector<PeerConfig>& peers, std::vector<PeerPos>& peer_pos,
                const WanConfig& wan, bool insecure, Errors& errors) {
  std::map<std::string, Pos> seen;
  std::vector<std::pair<SockAddr, Pos>> endpoints;
  each_table(root, "peer", [&](const toml::table& pt) {
    TableReader r(&pt, "peer.", errors);
    PeerConfig peer;
    PeerPos pp;
    pp.table = pp.name = pp.endpoint = r.pos();
    r.require("name");
    r.require("endpoint");
    const toml::node* n = nullptr;
    if (const std::string* s = r.string_node("name", &n)) {
      pp.name = pos_of(*n);
      if (!valid_name(*s)) {
        r.error(n, "name",
                fmt::format("{} must be 1-32 letters, digits, '_', '-' or '.'", quote_text(*s)));
      } else if (auto it = seen.find(*s); it != seen.end()) {
        r.error(
            n, "name",
            fmt::format("duplicate peer name {} (first at {})", quote_text(*s), at(it->second)));
      } else {
        seen.emplace(*s, pp.name);
        peer.name = *s;
      }
    }
    if (const toml::node* e = r.get("endpoint")) pp.endpoint = pos_of(*e);
    r.sockaddr("endpoint", peer.endpoint, kDefaultWanPort);
    if (peer.endpoint.addr.version != 0) {
      for (const auto& [other, where] : endpoints) {
        if (ip_equal(other.addr, peer.endpoint.addr) && other.port == peer.endpoint.port) {
          errors.add(pp.endpoint, fmt::format("peer.endpoint: {} is already the endpoint of the "
                                              "peer at {}",
                                              peer.endpoint.to_string(), at(where)));
        }
      }
      endpoints.emplace_back(peer.endpoint, pp.endpoint);
    }
    if (const toml::node* ln = r.get("links")) {
      if (!ln->is_array()) {
        r.wrong_type(*ln, "links", "an array of link names");
      } else if (ln->as_array()->empty()) {
        r.error(ln, "links", "is empty (leave it out to use every link)");
      } else {
        for (const toml::node& e : *ln->as_array()) {
          if (!e.is_string()) {
            r.wrong_type(e, "links", "a link name (string)");
            continue;
          }
          const std::string& name = e.as_string()->get();
          const WanLinkConfig* link = nullptr;
          for (const auto& l : wan.links) {
            if (l.name == name) link = &l;
          }
          if (link == nullptr) {
            r.error(
                &e, "links",
                fmt::format("unknown link {} (no [[wan.link]] has that name)", quote_text(name)));
          } else if (std::find(peer.links.begin(), peer.links.end(), name) != peer.links.end()) {
            r.error(&e, "links", fmt::format("link {} is listed twice", quote_text(name)));
          } else if (peer.endpoint.addr.version != 0 &&
                     link->bind.addr.version != peer.endpoint.addr.version) {
            r.error(&e, "links",
                    fmt::format("link {} binds IPv{} but the endpoint is IPv{}", quote_text(name),
                                link->bind.addr.version, peer.endpoint.addr.version));
          } else {
            peer.links.push_back(name);
          }
        }
      }
    } else {
      for (const auto& l : wan.links) {
        if (l.name.empty()) continue;
        if (peer.endpoint.addr.version != 0 && l.bind.addr.version != 0 &&
            l.bind.addr.version != peer.endpoint.addr.version) {
          continue;  // only the links of the endpoint's address family
        }
        peer.links.push_back(l.name);
      }
      if (peer.links.empty() && !wan.links.empty() && peer.endpoint.addr.version != 0) {
        errors.add(pp.endpoint,
                   fmt::format("peer.endpoint: no [[wan.link]] binds an IPv{} address to reach {}",
                               peer.endpoint.addr.version, peer.endpoint.to_string()));
      }
    }
    read_peer_endpoints(r, peer, wan, endpoints);
    if (const std::string* s = r.string_node("public_key", &n); s == nullptr) {
      if (!insecure && r.get("public_key") == nullptr) {
        errors.add(pp.table,
                   "peer.public_key is required unless local.insecure = true (the peer's "
                   "`rowanctl pubkey`)");
      }
    } else {
      if (!crypto::key_from_base64(*s)) {
        r.error(n, "public_key",
                fmt::format("{} is not an X25519 public key (44 base64 characters, as printed by "
                            "`rowanctl pubkey`)",
                            quote_text(*s)));
      } else {
        peer.public_key = *s;
      }
    }
    r.finish();
    peers.push_back(std::move(peer));
    peer_pos.push_back(pp);
  });
}

void read_routes(TableReader& root, std::vector<RouteConfig>& routes,
                 std::vector<RoutePos>& route_pos, Errors& errors) {
  each_table(root, "route", [&](const toml::table& rt) {
    TableReader r(&rt, "route.", errors);
    RouteConfig route;
    RoutePos rp;
    rp.prefix = rp.peer = r.pos();
    r.require("prefix");
    r.require("peer");
    const toml::node* n = nullptr;
    if (const std::string* s = r.string_node("prefix", &n)) {
      rp.prefix = pos_of(*n);
      if (auto p = parse_prefix(*s)) {
        route.prefix = *p;
      } else {
        r.error(n, "prefix",
                fmt::format("{} is not a prefix ADDRESS/LEN with the host bits zero (e.g. "
                            "\"198.18.2.0/24\")",
                            quote_text(*s)));
      }
    }
    if (const toml::node* p = r.get("peer")) rp.peer = pos_of(*p);
    r.str("peer", route.peer);
    if (const std::string* s = r.string_node("mode", &n)) {
      if (*s == "passthrough") {
        route.mode = RouteMode::kPassthrough;
      } else if (*s == "split") {
        route.mode = RouteMode::kSplit;
      } else if (*s == "direct") {
        r.error(n, "mode",
                "'direct' is not a rowand mode: a prefix without a gateway function is routed "
                "by the kernel (leave it out of rowand's routes); use \"passthrough\" or "
                "\"split\"");
      } else {
        r.error(n, "mode", fmt::format("{} is not \"passthrough\" or \"split\"", quote_text(*s)));
      }
    }
    r.finish();
    routes.push_back(std::move(route));
    route_pos.push_back(rp);
  });
}

std::string param_text(const toml::node& n) {
  if (n.is_string()) return n.as_string()->get();
  if (n.is_integer()) return std::to_string(n.as_integer()->get());
  if (n.is_floating_point()) return fmt::format("{}", n.as_floating_point()->get());
  return n.as_boolean()->get() ? "true" : "false";
}

void read_cc(TableReader& root, CcConfig& cc, Errors& errors) {
  const toml::table* t = root.table("cc");
  if (t == nullptr) {
    if (cc::Registry::find(cc.algorithm) == nullptr) {
      errors.add(Pos{}, fmt::format("the default congestion control {} is not built in",
                                    quote_text(cc.algorithm)));
    }
    return;
  }
  TableReader r(t, "cc.", errors);
  const toml::node* alg_node = nullptr;
  const std::string* alg = r.string_node("algorithm", &alg_node);
  if (alg != nullptr) cc.algorithm = *alg;
  const bool known = cc::Registry::find(cc.algorithm) != nullptr;
  if (!known) {
    std::string names;
    for (const auto& name : cc::Registry::names()) names += (names.empty() ? "" : ", ") + name;
    errors.add(alg_node != nullptr ? pos_of(*alg_node) : r.pos(),
               fmt::format("cc.algorithm: unknown congestion control {} (known: {})",
                           quote_text(cc.algorithm), names.empty() ? "none" : names));
  }
  std::map<std::string, Pos> param_pos;
  Pos params_at = r.pos();
  if (const toml::table* pt = r.table("params")) {
    params_at = pos_of(*pt);
    for (auto&& [k, v] : *pt) {
      const std::string key(k.str());
      const Pos p = k.source().begin.line > 0 ? pos_of(k.source()) : pos_of(v);
      if (!(v.is_string() || v.is_integer() || v.is_floating_point() || v.is_boolean())) {
        errors.add(pos_of(v), fmt::format("cc.params.{}: expected a string, number or boolean, "
                                          "got {}",
                                          key, type_name(v)));
        continue;
      }
      cc.params.set(key, param_text(v));
      param_pos.emplace(key, p);
    }
  }
  r.finish();
  if (!known) return;
  // Let the algorithm check its own parameters, as rowand will build it (on a
  // fresh copy: CcParams remembers which keys were read).
  try {
    MonotonicClock clock;
    const cc::CcParams probe(cc.params.values());
    (void)cc::Registry::create(cc.algorithm, clock, cc::PathHints{}, probe);
  } catch (const std::exception& e) {
    const std::string msg = e.what();
    Pos p = params_at;
    size_t best = std::string::npos;
    for (const auto& [key, kp] : param_pos) {
      // The algorithm names the key it rejects ("beta: ..." or "unknown parameter(s): a, b").
      const size_t i = msg.find(key);
      if (i == std::string::npos) continue;
      const bool word_start =
          i == 0 || !(std::isalnum(static_cast<unsigned char>(msg[i - 1])) || msg[i - 1] == '_');
      const size_t end = i + key.size();
      const bool word_end =
          end == msg.size() ||
          !(std::isalnum(static_cast<unsigned char>(msg[end])) || msg[end] == '_');
      if (word_start && word_end && i < best) {
        best = i;
        p = kp;
      }
    }
    errors.add(p, fmt::format("cc.params ({}): {}", cc.algorithm, msg));
  }
}

void read_control(TableReader& root, ControlConfig& control, Errors& errors) {
  const toml::table* t = root.table("control");
  if (t == nullptr) return;
  TableReader r(t, "control.", errors);
  const toml::node* n = nullptr;
  if (const std::string* s = r.string_node("socket", &n)) {
    // sockaddr_un.sun_path holds 108 bytes including the terminating NUL.
    if (s->empty() || s->front() != '/' || s->back() == '/' || has_nul(*s) || s->size() > 107) {
      r.error(n, "socket",
              fmt::format("{} must be an absolute file path of at most 107 bytes", quote_text(*s)));
    } else {
      control.socket = *s;
    }
  }
  if (const std::string* s = r.string_node("group", &n)) {
    if (!s->empty() && !valid_name(*s)) {
      r.error(n, "group", fmt::format("{} is not a group name", quote_text(*s)));
    } else {
      control.group = *s;
    }
  }
  r.finish();
}

void read_metrics(TableReader& root, MetricsConfig& metrics, Errors& errors) {
  const toml::table* t = root.table("metrics");
  if (t == nullptr) return;
  TableReader r(t, "metrics.", errors);
  r.boolean("enabled", metrics.enabled);
  r.sockaddr("listen", metrics.listen, 9464);
  r.finish();
}

void read_log(TableReader& root, LogConfig& log, Errors& errors) {
  const toml::table* t = root.table("log");
  if (t == nullptr) return;
  TableReader r(t, "log.", errors);
  const toml::node* n = nullptr;
  if (const std::string* s = r.string_node("level", &n)) {
    static const std::set<std::string> kLevels = {"trace", "debug", "info", "warn", "error"};
    if (kLevels.count(*s) == 0) {
      r.error(n, "level",
              fmt::format("{} is not trace, debug, info, warn or error", quote_text(*s)));
    } else {
      log.level = *s;
    }
  }
  r.finish();
}

// What rowand opens for each peer (gateway.cc): the socket or DPDK port of the
// peer's first link. Peers on one UDP link share its socket
// (wan_link_mux.h), so they must differ in endpoint (checked in read_peers);
// a dpdk link's port answers one peer, so two peers on it are an error. A
// dpdk link carries IPv4 only, an MTU up to 9000, and reaches its peer on
// its subnet or through next_hop (dpdk_wan_io.cc).
void check_peer_links(const GatewayConfig& cfg, const std::vector<PeerPos>& peer_pos,
                      Errors& errors) {
  std::map<std::string, size_t> first_user;  // link name -> index of the first peer on it
  for (size_t i = 0; i < cfg.peers.size(); ++i) {
    const PeerConfig& p = cfg.peers[i];
    if (p.links.empty() || p.name.empty()) continue;
    const WanLinkConfig* link = cfg.find_link(p.links.front());
    if (link == nullptr) continue;
    auto [it, fresh] = first_user.emplace(link->name, i);
    if (!fresh && link->backend == WanBackend::kDpdk) {
      const PeerConfig& other = cfg.peers[it->second];
      errors.add(peer_pos[i].table,
                 fmt::format("peer {}: would share the DPDK port of link {} ({}) with peer {} (at "
                             "{}); a dpdk link carries one peer, so give each its own "
                             "[[wan.link]] or use backend = \"udp\", whose socket peers share",
                             quote_text(p.name), quote_text(link->name), link->device,
                             quote_text(other.name), at(peer_pos[it->second].table)));
    }
    if (link->backend != WanBackend::kDpdk || p.endpoint.addr.version == 0) continue;
    if (p.endpoint.addr.version != 4) {
      errors.add(peer_pos[i].endpoint,
                 fmt::format("peer.endpoint: {} is IPv6, but the dpdk link {} carries IPv4 only",
                             p.endpoint.to_string(), quote_text(link->name)));
    } else if (!link->next_hop && link->bind.addr.version == 4 &&
               !Prefix{link->bind.addr, link->prefix_len}.contains(p.endpoint.addr)) {
      errors.add(peer_pos[i].endpoint,
                 fmt::format("peer.endpoint: {} is not on the dpdk link {}'s subnet {} and the "
                             "link has no next_hop",
                             p.endpoint.to_string(), quote_text(link->name),
                             network_of({link->bind.addr, link->prefix_len}).to_string()));
    }
  }
}

// Checks across sections, on the parsed values.
void cross_check(const GatewayConfig& cfg, const std::vector<LinkPos>& link_pos,
                 const std::vector<PeerPos>& peer_pos, const std::vector<RoutePos>& route_pos,
                 bool have_wan_table, Errors& errors) {
  check_peer_links(cfg, peer_pos, errors);
  // Links: names, binds and devices unique.
  for (size_t i = 0; i < cfg.wan.links.size(); ++i) {
    const WanLinkConfig& a = cfg.wan.links[i];
    for (size_t j = 0; j < i; ++j) {
      const WanLinkConfig& b = cfg.wan.links[j];
      if (!a.name.empty() && a.name == b.name) {
        errors.add(link_pos[i].name, fmt::format("wan.link.name: duplicate link name {} (first "
                                                 "at {})",
                                                 quote_text(a.name), at(link_pos[j].name)));
      }
      if (a.bind.addr.version != 0 && ip_equal(a.bind.addr, b.bind.addr) &&
          a.bind.port == b.bind.port) {
        errors.add(link_pos[i].bind,
                   fmt::format("wan.link.bind: {} is already bound by the link at {}",
                               a.bind.to_string(), at(link_pos[j].bind)));
      }
      if (!a.device.empty() && a.device == b.device) {
        errors.add(link_pos[i].device,
                   fmt::format("wan.link.device: {} is already used by the link at {}",
                               quote_text(a.device), at(link_pos[j].device)));
      }
    }
    if (a.backend == WanBackend::kDpdk && a.bind.addr.version == 6) {
      errors.add(link_pos[i].bind,
                 fmt::format("wan.link.bind: {} is IPv6, but the dpdk backend carries IPv4 only",
                             a.bind.to_string()));
    }
    if (a.backend == WanBackend::kDpdk && a.mtu > 9000) {
      errors.add(link_pos[i].name,
                 fmt::format("wan.link.mtu: {} is above the dpdk backend's 9000", a.mtu));
    }
    if (!a.device.empty() && a.device == cfg.local.device) {
      errors.add(link_pos[i].device, fmt::format("wan.link.device: {} is the local port's device",
                                                 quote_text(a.device)));
    }
  }
  if (cfg.wan.links.empty()) {
    errors.add(Pos{}, have_wan_table ? "no [[wan.link]]: at least one long-haul link is required"
                                     : "missing [[wan.link]]: at least one long-haul link is "
                                       "required");
  }

  // Routes: known peer, no overlaps, never the local subnet or the WAN.
  const bool have_local = cfg.local.address.version != 0;
  const Prefix local_subnet{cfg.local.address, cfg.local.prefix_len};
  for (size_t i = 0; i < cfg.routes.size(); ++i) {
    const RouteConfig& r = cfg.routes[i];
    if (!r.peer.empty() && cfg.find_peer(r.peer) == nullptr) {
      errors.add(route_pos[i].peer,
                 fmt::format("route.peer: unknown peer {} (no [[peer]] has that name)",
                             quote_text(r.peer)));
    }
    if (r.prefix.addr.version == 0) continue;
    for (size_t j = 0; j < i; ++j) {
      const RouteConfig& o = cfg.routes[j];
      if (o.prefix.addr.version != 0 && r.prefix.overlaps(o.prefix)) {
        errors.add(
            route_pos[i].prefix,
            fmt::format("route.prefix: {} overlaps {} of the route at {}", r.prefix.to_string(),
                        o.prefix.to_string(), at(route_pos[j].prefix)));
      }
    }
    if (have_local && r.prefix.overlaps(local_subnet)) {
      errors.add(route_pos[i].prefix,
                 fmt::format("route.prefix: {} overlaps the local subnet {} (local.address {}/{})",
                             r.prefix.to_string(), network_of(local_subnet).to_string(),
                             ip_to_string(cfg.local.address), cfg.local.prefix_len));
    }
    for (size_t k = 0; k < cfg.peers.size(); ++k) {
      const PeerConfig& p = cfg.peers[k];
      if (p.endpoint.addr.version != 0 && r.prefix.contains(p.endpoint.addr)) {
        errors.add(route_pos[i].prefix,
                   fmt::format("route.prefix: {} covers the endpoint {} of peer {}: the WAN "
                               "itself cannot be carried over the WAN",
                               r.prefix.to_string(), p.endpoint.to_string(), quote_text(p.name)));
      }
    }
  }
}

GatewayConfig parse_tree(const toml::table& doc, const std::string& path, bool check_files,
                         Errors& errors) {
  GatewayConfig cfg;
  cfg.path = path;
  TableReader root(&doc, "", errors);
  std::vector<LinkPos> link_pos;
  std::vector<PeerPos> peer_pos;
  std::vector<RoutePos> route_pos;
  read_eal(root, cfg.eal, errors);
  read_local(root, cfg.local, errors);
  read_wan(root, cfg.wan, link_pos, errors);
  read_peers(root, cfg.peers, peer_pos, cfg.wan, cfg.local.insecure, errors);
  read_routes(root, cfg.routes, route_pos, errors);
  read_cc(root, cfg.cc, errors);
  read_control(root, cfg.control, errors);
  read_metrics(root, cfg.metrics, errors);
  read_log(root, cfg.log, errors);
  root.finish();
  if (!cfg.local.private_key_file.empty() && cfg.local.private_key_file.front() != '/') {
    const size_t slash = path.rfind('/');
    if (slash != std::string::npos) {
      cfg.local.private_key_file = path.substr(0, slash + 1) + cfg.local.private_key_file;
    }
  }
  cross_check(cfg, link_pos, peer_pos, route_pos, doc.get("wan") != nullptr, errors);
  if (check_files && !cfg.local.insecure && !cfg.local.private_key_file.empty()) {
    // What start-up does with the key file (crypto/keys.h): readable by the
    // owner only, and a key.
    try {
      (void)crypto::load_private_key_file(cfg.local.private_key_file);
    } catch (const std::exception& e) {
      const toml::node* kn = doc["local"]["private_key_file"].node();
      errors.add(kn != nullptr ? pos_of(*kn) : Pos{},
                 fmt::format("local.private_key_file: {}", e.what()));
    }
  }
  return cfg;
}

}  // namespace

GatewayConfig parse_config(std::string_view text, const std::string& path, bool check_files) {
  Errors errors(path);
  GatewayConfig cfg;
  try {
    toml::table doc = toml::parse(text, path);
    cfg = parse_tree(doc, path, check_files, errors);
  } catch (const toml::parse_error& e) {
    errors.add(pos_of(e.source()), std::string(e.description()));
  } catch (const std::exception& e) {
    errors.add(Pos{}, fmt::format("internal error while reading the config: {}", e.what()));
  }
  if (!errors.empty()) throw ConfigError(errors.lines());
  return cfg;
}

GatewayConfig load_config(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw ConfigError({fmt::format("{}:1:1: cannot read the file: it is a directory", path)});
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw ConfigError(
        {fmt::format("{}:1:1: cannot open the file: {}", path, std::strerror(errno))});
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) {
    throw ConfigError(
        {fmt::format("{}:1:1: cannot read the file: {}", path, std::strerror(errno))});
  }
  return parse_config(text.str(), path, /*check_files=*/true);
}

// ---------------------------------------------------------------------------
// Writing TOML back

namespace {

std::string rate_text(BitsPerSec r) {
  const uint64_t b = r.bps();
  if (b != 0 && b % 1000000000000ULL == 0) return fmt::format("{}tbit", b / 1000000000000ULL);
  if (b != 0 && b % 1000000000ULL == 0) return fmt::format("{}gbit", b / 1000000000ULL);
  if (b != 0 && b % 1000000ULL == 0) return fmt::format("{}mbit", b / 1000000ULL);
  if (b != 0 && b % 1000ULL == 0) return fmt::format("{}kbit", b / 1000ULL);
  return fmt::format("{}bit", b);
}

std::string duration_text(Duration d) {
  const int64_t ns = d.ns();
  if (ns != 0 && ns % 1000000000 == 0) return fmt::format("{}s", ns / 1000000000);
  if (ns != 0 && ns % 1000000 == 0) return fmt::format("{}ms", ns / 1000000);
  if (ns != 0 && ns % 1000 == 0) return fmt::format("{}us", ns / 1000);
  return fmt::format("{}ns", ns);
}

template <class T>
toml::array string_array(const std::vector<T>& v) {
  toml::array a;
  for (const auto& e : v) a.push_back(e);
  return a;
}

toml::table eal_table(const EalConfig& e) {
  return toml::table{{"lcores", e.lcores},
                     {"file_prefix", e.file_prefix},
                     {"huge_dir", e.huge_dir},
                     {"no_huge", e.no_huge},
                     {"in_memory", e.in_memory},
                     {"memory_mb", int64_t{e.memory_mb}},
                     {"extra_args", string_array(e.extra_args)}};
}

toml::table local_table(const LocalConfig& l) {
  toml::table t{{"device", l.device},
                {"address", ip_to_string(l.address)},
                {"prefix_len", int64_t{l.prefix_len}},
                {"mtu", int64_t{l.mtu}},
                {"roce_mtu", int64_t{l.roce_mtu}},
                {"rx_ring", int64_t{l.rx_ring}},
                {"tx_ring", int64_t{l.tx_ring}},
                {"wake_coalesce", duration_text(l.wake_coalesce)},
                {"insecure", l.insecure}};
  if (l.address6.version == 6) {
    t.insert("address6", ip_to_string(l.address6));
    t.insert("prefix_len6", int64_t{l.prefix_len6});
  }
  if (l.mac) {
    const auto& m = *l.mac;
    t.insert("mac", fmt::format("{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", m[0], m[1], m[2], m[3],
                                m[4], m[5]));
  }
  if (!l.private_key_file.empty()) t.insert("private_key_file", l.private_key_file);
  return t;
}

toml::table wan_table(const WanConfig& w) {
  toml::array links;
  for (const auto& l : w.links) {
    toml::table lt{{"name", l.name},
                   {"backend", l.backend == WanBackend::kDpdk ? "dpdk" : "udp"},
                   {"bind", l.bind.to_string()},
                   {"rate", rate_text(l.rate)},
                   {"rtt", duration_text(l.rtt)},
                   {"mtu", int64_t{l.mtu}}};
    if (l.backend == WanBackend::kDpdk) {
      lt.insert("device", l.device);
      lt.insert("prefix_len", int64_t{l.prefix_len});
      if (l.next_hop) lt.insert("next_hop", ip_to_string(*l.next_hop));
    }
    links.push_back(std::move(lt));
  }
  toml::table t{{"send_buffer_bdp", w.send_buffer_bdp},
                {"recv_window_bdp", w.recv_window_bdp},
                {"max_flows", int64_t{w.max_flows}},
                {"flow_idle_timeout", duration_text(w.flow_idle_timeout)}};
  if (!links.empty()) t.insert("link", std::move(links));
  return t;
}

toml::array peers_array(const std::vector<PeerConfig>& peers) {
  toml::array a;
  for (const auto& p : peers) {
    toml::table t{
        {"name", p.name}, {"endpoint", p.endpoint.to_string()}, {"links", string_array(p.links)}};
    if (!p.endpoints.empty()) {
      toml::array e;
      for (const auto& x : p.endpoints) e.push_back(x.to_string());
      t.insert("endpoints", std::move(e));
    }
    if (!p.public_key.empty()) t.insert("public_key", p.public_key);
    a.push_back(std::move(t));
  }
  return a;
}

toml::array routes_array(const std::vector<RouteConfig>& routes) {
  toml::array a;
  for (const auto& r : routes) {
    a.push_back(toml::table{
        {"prefix", r.prefix.to_string()}, {"peer", r.peer}, {"mode", to_string(r.mode)}});
  }
  return a;
}

toml::table cc_table(const CcConfig& c) {
  toml::table t{{"algorithm", c.algorithm}};
  if (!c.params.empty()) {
    // Values as the text the algorithm parses (it reads every kind as text).
    toml::table params;
    for (const auto& [k, v] : c.params.values()) params.insert(k, v);
    t.insert("params", std::move(params));
  }
  return t;
}

}  // namespace

// Written by toml++'s formatter (quoting, escapes, [[arrays of tables]]);
// the tables come out in toml++'s key order.
std::string to_toml(const GatewayConfig& cfg) {
  toml::table doc{
      {"eal", eal_table(cfg.eal)},
      {"local", local_table(cfg.local)},
      {"wan", wan_table(cfg.wan)},
      {"cc", cc_table(cfg.cc)},
      {"control", toml::table{{"socket", cfg.control.socket}, {"group", cfg.control.group}}},
      {"metrics",
       toml::table{{"enabled", cfg.metrics.enabled}, {"listen", cfg.metrics.listen.to_string()}}},
      {"log", toml::table{{"level", cfg.log.level}}}};
  if (!cfg.peers.empty()) doc.insert("peer", peers_array(cfg.peers));
  if (!cfg.routes.empty()) doc.insert("route", routes_array(cfg.routes));
  std::ostringstream out;
  out << "# rowand configuration";
  // A comment ends at the line's end: a path with a newline is not echoed.
  if (!cfg.path.empty() && cfg.path.find_first_of("\r\n") == std::string::npos) {
    out << " (from " << cfg.path << ")";
  }
  out << "\n\n" << toml::toml_formatter(doc) << "\n";
  return out.str();
}

std::vector<std::string> reload_blockers(const GatewayConfig& running, const GatewayConfig& next) {
  std::vector<std::string> out;
  if (!(running.eal == next.eal)) out.emplace_back("[eal]");
  if (!(running.local == next.local)) out.emplace_back("[local]");
  // wan.flow_idle_timeout applies on reload (Gateway::reload); the rest of [wan] does not.
  WanConfig wan = next.wan;
  wan.flow_idle_timeout = running.wan.flow_idle_timeout;
  if (!(running.wan == wan)) out.emplace_back("[wan]");
  if (running.peers != next.peers) out.emplace_back("[[peer]]");
  if (!(running.control == next.control)) out.emplace_back("[control]");
  if (!(running.metrics == next.metrics)) out.emplace_back("[metrics]");
  return out;
}

int check_config_main(const std::string& path, std::ostream& out, std::ostream& err) {
  try {
    (void)load_config(path);
  } catch (const ConfigError& e) {
    for (const auto& line : e.errors()) err << line << '\n';
    return kExitConfig;
  }
  out << path << ": configuration ok\n";
  return 0;
}

}  // namespace rowan::gw
