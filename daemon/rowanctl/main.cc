// rowanctl: the operator's command-line tool for rowan.
//   rowanctl decode FILE.pcap [--json]
//   rowanctl genkey | pubkey               X25519 keys for [local]/[[peer]]
//   rowanctl [-s SOCKET] [-j|--json] [-p|--pretty] status|peers|links|flows|routes|reload
//   rowanctl [-s SOCKET] peer NAME
//   rowanctl [-s SOCKET] top [--once|--count N] [--interval SECONDS]
//   rowanctl [-s SOCKET] qp-attrs PEER|ADDRESS [--message-bytes N] [--read] [--json]
//   rowanctl --version
// Global options (-s, --timeout, -j, -p, -w) go before or after the subcommand.
//
// Exit status: 0; 1 when the daemon answers with an error (a rejected reload,
// an unknown peer); 64 on a usage error; 66 when a capture cannot be read; 69
// when no daemon answers on the control socket; 76 when its reply is malformed.
#include <cstdlib>
#include <iostream>
#include <string>

#include <CLI/CLI.hpp>

#include "ctl.h"
#include "decode.h"
#include "keys.h"
#include "qp_attrs.h"
#include "rowan/build_version.h"
#include "top.h"

namespace {
constexpr int kExitUsage = 64;  // EX_USAGE
}

int main(int argc, char** argv) {
  CLI::App app{"rowanctl — control and inspect rowan (RDMA over WAN) gateways"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("rowanctl ") + ROWAN_BUILD_VERSION);

  std::string socket = rowan::ctl::kDefaultControlSocket;
  app.add_option("-s,--socket", socket, "the daemon's control socket")
      ->envname("ROWAN_CONTROL_SOCKET")
      ->capture_default_str();
  double timeout_s = 5;
  app.add_option("--timeout", timeout_s, "seconds to wait for the daemon's reply")
      ->check(CLI::Range(0.001, 3600.0))
      ->capture_default_str();
  // Output flags belong to the whole tool: before or after the subcommand
  // (each subcommand falls through to these).
  bool json = false;
  bool pretty = false;
  bool wide = false;
  app.add_flag("-j,--json", json, "print the result as JSON (one line)");
  app.add_flag("-p,--pretty", pretty, "print the result as indented JSON");
  app.add_flag("-w,--wide", wide, "tables: show every field, not just the usual columns");

  std::string pcap_path;
  CLI::App* decode = app.add_subcommand(
      "decode", "Decode a capture (pcap or pcapng) as RoCEv2, one frame per line");
  decode->add_option("file", pcap_path, "capture file")->required();
  decode->fallthrough();

  CLI::App* genkey =
      app.add_subcommand("genkey", "Print a new private key (base64), like wg genkey");
  CLI::App* pubkey =
      app.add_subcommand("pubkey", "Read a private key on stdin, print its public key");

  struct Query {
    const char* name;
    const char* help;
  };
  static const Query kQueries[] = {
      {"status", "The daemon's state: version, uptime, config, counts"},
      {"peers", "Peer gateways: endpoint, state, RTT, rate, retransmissions"},
      {"links", "Long-haul links: backend, address, rate, counters"},
      {"flows", "Flows (transport streams) per peer"},
      {"reload",
       "Reload routes, [cc] and [log] from the config file (as SIGHUP); prints whether the "
       "daemon accepted it, exits 1 with the errors when it did not"},
  };
  std::string command;
  for (const Query& q : kQueries) {
    CLI::App* sub = app.add_subcommand(q.name, q.help);
    sub->fallthrough();  // -s/--socket, --timeout, -j, -p, -w also after the subcommand
    sub->callback([&command, &q] { command = q.name; });
  }
  CLI::App* routes = app.add_subcommand("routes", "Routes: prefix, peer, mode");
  routes->fallthrough();
  std::string peer_name;
  CLI::App* peer = app.add_subcommand("peer", "One peer: its state, counters, paths and routes");
  peer->add_option("name", peer_name, "the peer's name ([[peer]] name)")->required();
  peer->fallthrough();

  rowan::ctl::TopOptions top_opt;
  bool once = false;
  CLI::App* top = app.add_subcommand(
      "top", "Live view per peer and path: goodput, RTT, cwnd, loss, drops (every second)");
  top->add_flag("--once", once, "print one frame (after one interval) and exit");
  top->add_option("-n,--count", top_opt.count, "print N frames and exit (0: until interrupted)")
      ->check(CLI::NonNegativeNumber);
  top->add_option("-i,--interval", top_opt.interval_s, "seconds between frames")
      ->check(CLI::Range(0.05, 3600.0))
      ->capture_default_str();
  top->fallthrough();

  rowan::ctl::QpAttrsOptions qp;
  CLI::App* qp_attrs = app.add_subcommand(
      "qp-attrs", "RC QP attributes (timeout, retries, READ depth, MTU, queue depth) for a peer");
  qp_attrs->add_option("target", qp.target, "peer name or remote host address")->required();
  qp_attrs->add_option("-m,--message-bytes", qp.message_bytes, "typical message size (65536)");
  qp_attrs->add_flag("-r,--read", qp.uses_read, "the QP issues RDMA READ or atomics");
  qp_attrs->fallthrough();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : kExitUsage;
  }
  const int timeout_ms = static_cast<int>(timeout_s * 1000);
  const rowan::ctl::OutputOptions opt{json || pretty, pretty, wide, timeout_ms};
  if (genkey->parsed()) return rowan::ctl::run_genkey(std::cout, std::cerr);
  if (pubkey->parsed()) return rowan::ctl::run_pubkey(std::cin, std::cout, std::cerr);
  if (decode->parsed()) return rowan::ctl::run_decode(pcap_path, opt.json, std::cout, std::cerr);
  if (qp_attrs->parsed()) {
    qp.json = opt.json;
    qp.timeout_ms = timeout_ms;
    return rowan::ctl::run_qp_attrs(socket, qp, std::cout, std::cerr);
  }
  if (routes->parsed()) return rowan::ctl::run_routes(socket, opt, std::cout, std::cerr);
  if (peer->parsed()) return rowan::ctl::run_peer(socket, peer_name, opt, std::cout, std::cerr);
  if (top->parsed()) {
    if (once) top_opt.count = 1;
    top_opt.json = opt.json;
    top_opt.timeout_ms = timeout_ms;
    return rowan::ctl::run_top(socket, top_opt, std::cout, std::cerr);
  }
  if (!command.empty()) return rowan::ctl::run_command(socket, command, opt, std::cout, std::cerr);
  return kExitUsage;
}
