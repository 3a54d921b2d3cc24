// rowanctl: the operator's command-line tool for rowan.
//   rowanctl decode FILE.pcap [--json]
#include <iostream>
#include <string>

#include <CLI/CLI.hpp>

#include "decode.h"

namespace {
constexpr int kExitUsage = 64;  // EX_USAGE
}

int main(int argc, char** argv) {
  CLI::App app{"rowanctl — control and inspect rowan (RDMA over WAN) gateways"};
  app.require_subcommand(1);

  std::string pcap_path;
  bool json = false;
  CLI::App* decode = app.add_subcommand(
      "decode", "Decode a capture (pcap or pcapng) as RoCEv2, one frame per line");
  decode->add_option("file", pcap_path, "capture file")->required();
  decode->add_flag("-j,--json", json, "one JSON object per frame");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : kExitUsage;
  }
  if (decode->parsed()) return rowan::ctl::run_decode(pcap_path, json, std::cout, std::cerr);
  return kExitUsage;
}
