// rowanctl: the operator's command-line tool for rowan.
//   rowanctl decode FILE.pcap [--json]
//   rowanctl genkey | pubkey               X25519 keys for [local]/[[peer]]
//   rowanctl [-s SOCKET] status|peers|links|flows|reload [--json|--wide]
//   rowanctl [-s SOCKET] qp-attrs PEER|ADDRESS [--message-bytes N] [--read] [--json]
//
// Exit status: 0; 1 when the daemon answers with an error; 64 on a usage
// error; 66 when a capture cannot be read; 69 when no daemon answers on the
// control socket; 76 when its reply is malformed.
#include <cstdlib>
#include <iostream>
#include <string>

#include <CLI/CLI.hpp>

#include "ctl.h"
#include "decode.h"
#include "keys.h"
#include "qp_attrs.h"

namespace {
constexpr int kExitUsage = 64;  // EX_USAGE
}

int main(int argc, char** argv) {
  CLI::App app{"rowanctl — control and inspect rowan (RDMA over WAN) gateways"};
  app.require_subcommand(1);

  std::string socket = rowan::ctl::kDefaultControlSocket;
  app.add_option("-s,--socket", socket, "the daemon's control socket")
      ->envname("ROWAN_CONTROL_SOCKET")
      ->capture_default_str();
  double timeout_s = 5;
  app.add_option("--timeout", timeout_s, "seconds to wait for the daemon's reply")
      ->check(CLI::Range(0.001, 3600.0))
      ->capture_default_str();

  std::string pcap_path;
  bool json = false;
  CLI::App* decode = app.add_subcommand(
      "decode", "Decode a capture (pcap or pcapng) as RoCEv2, one frame per line");
  decode->add_option("file", pcap_path, "capture file")->required();
  decode->add_flag("-j,--json", json, "one JSON object per frame");

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
      {"reload", "Reload routes and CC parameters from the config file (as SIGHUP)"},
  };
  std::string command;
  bool wide = false;
  for (const Query& q : kQueries) {
    CLI::App* sub = app.add_subcommand(q.name, q.help);
    sub->add_flag("-j,--json", json, "print the result as one JSON object");
    sub->add_flag("-w,--wide", wide, "tables: show every field, not just the usual columns");
    sub->fallthrough();  // -s/--socket and --timeout also after the subcommand
    sub->callback([&command, &q] { command = q.name; });
  }

  rowan::ctl::QpAttrsOptions qp;
  CLI::App* qp_attrs = app.add_subcommand(
      "qp-attrs", "RC QP attributes (timeout, retries, READ depth, MTU, queue depth) for a peer");
  qp_attrs->add_option("target", qp.target, "peer name or remote host address")->required();
  qp_attrs->add_option("-m,--message-bytes", qp.message_bytes, "typical message size (65536)");
  qp_attrs->add_flag("-r,--read", qp.uses_read, "the QP issues RDMA READ or atomics");
  qp_attrs->add_flag("-j,--json", qp.json, "one JSON object");
  qp_attrs->fallthrough();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : kExitUsage;
  }
  if (genkey->parsed()) return rowan::ctl::run_genkey(std::cout, std::cerr);
  if (pubkey->parsed()) return rowan::ctl::run_pubkey(std::cin, std::cout, std::cerr);
  if (decode->parsed()) return rowan::ctl::run_decode(pcap_path, json, std::cout, std::cerr);
  if (qp_attrs->parsed()) {
    qp.timeout_ms = static_cast<int>(timeout_s * 1000);
    return rowan::ctl::run_qp_attrs(socket, qp, std::cout, std::cerr);
  }
  if (!command.empty()) {
    const rowan::ctl::OutputOptions opt{json, wide, static_cast<int>(timeout_s * 1000)};
    return rowan::ctl::run_command(socket, command, opt, std::cout, std::cerr);
  }
  return kExitUsage;
}
