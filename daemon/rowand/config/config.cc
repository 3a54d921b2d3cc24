// rowand's TOML configuration: loading and checking a file. The sections are
// read in config_sections.cc and checked against each other in
// config_check.cc (sharing config_parse.h); config_toml.cc writes a config
// back; net_addr.h holds the address types.
//
// The parser walks the toml++ tree with a reader per table that remembers
// which keys it consumed, so every key it does not know is reported at its own
// position. Semantic checks (duplicates, references, overlaps, CC parameters)
// run after the walk on the parsed values and the positions kept beside them.
// Every problem goes into one list; nothing is applied unless it is empty.
//
// parse_config must survive any input (it is fuzzed): no exception other than
// ConfigError leaves it, and every integer is range-checked before narrowing.
#include "config/config.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include <toml++/toml.h>

#include "config/config_parse.h"
#include "crypto/keys.h"

namespace rowan::gw {

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

namespace config_parse {
namespace {

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
}  // namespace config_parse

GatewayConfig parse_config(std::string_view text, const std::string& path, bool check_files) {
  using config_parse::Errors;
  using config_parse::Pos;
  Errors errors(path);
  GatewayConfig cfg;
  try {
    toml::table doc = toml::parse(text, path);
    cfg = config_parse::parse_tree(doc, path, check_files, errors);
  } catch (const toml::parse_error& e) {
    errors.add(config_parse::pos_of(e.source()), std::string(e.description()));
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
