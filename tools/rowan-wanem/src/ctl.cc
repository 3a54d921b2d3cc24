#include "ctl.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ostream.h>
#include <CLI/CLI.hpp>

namespace rowan::wanem {
namespace {

using nlohmann::json;

constexpr int kExitUsage = 64;
constexpr int kExitUnavailable = 69;

const std::vector<std::string> kDirections = {"a2b", "b2a", "both"};

}  // namespace

std::optional<CtlRequest> parse_ctl(int argc, char** argv, std::ostream& out, std::ostream& err,
                                    int* exit_status) {
  CLI::App app{"rowan-wanem ctl: talk to a running emulator's control socket", "rowan-wanem ctl"};
  app.require_subcommand(1);
  CtlRequest r;
  app.add_option("socket", r.socket, "the emulator's --control socket")->required();

  app.add_subcommand("get", "settings and counters");
  app.add_subcommand("stats", "counters");
  app.add_subcommand("reset", "zero the counters");
  app.add_subcommand("quit", "stop the emulator");
  std::vector<std::string> settings;
  CLI::App* set = app.add_subcommand("set", "change settings, e.g. rate=100mbit a2b.loss=1%");
  set->add_option("settings", settings, "KEY=VALUE ...")->required();
  std::vector<std::string> flap_args;
  CLI::App* flap = app.add_subcommand(
      "flap", "link down for FOR, starting IN from now: [a2b|b2a|both] FOR [IN]");
  flap->add_option("args", flap_args, "[DIRECTION] FOR [IN]")->required()->expected(1, 3);
  std::string state, dir = "both";
  CLI::App* link = app.add_subcommand("link", "link up|down [a2b|b2a|both]");
  link->add_option("state", state, "up or down")->required()->check(CLI::IsMember({"up", "down"}));
  link->add_option("direction", dir, "a2b, b2a or both")
      ->check(CLI::IsMember(kDirections))
      ->capture_default_str();
  std::string raw;
  CLI::App* raw_cmd = app.add_subcommand("raw", "send a JSON request as it is");
  raw_cmd->add_option("json", raw, "the request object")->required();

  std::string problem;
  try {
    app.parse(argc, argv);
    const std::string cmd = app.get_subcommands().front()->get_name();
    if (cmd == "get" || cmd == "stats" || cmd == "quit") {
      r.request = json{{"cmd", cmd}};
    } else if (cmd == "reset") {
      r.request = json{{"cmd", "reset_stats"}};
    } else if (cmd == "set") {
      json s = json::object();
      for (const std::string& kv : settings) {
        const auto eq = kv.find('=');
        if (eq == std::string::npos || eq == 0)
          throw CLI::ValidationError("set", "expected KEY=VALUE, got '" + kv + "'");
        s[kv.substr(0, eq)] = kv.substr(eq + 1);
      }
      r.request = json{{"cmd", "set"}, {"settings", s}};
    } else if (cmd == "flap") {
      size_t i = 0;
      std::string d = "both";
      for (const auto& k : kDirections) {
        if (flap_args[0] == k) d = flap_args[i++];
      }
      if (i >= flap_args.size() || flap_args.size() - i > 2) {
        throw CLI::ValidationError("flap", "expected [a2b|b2a|both] FOR [IN]");
      }
      r.request = json{{"cmd", "flap"}, {"dir", d}, {"for", flap_args[i]}};
      if (i + 1 < flap_args.size()) r.request["in"] = flap_args[i + 1];
    } else if (cmd == "link") {
      r.request = json{{"cmd", "link"}, {"state", state}, {"dir", dir}};
    } else {
      r.request = json::parse(raw, nullptr, /*allow_exceptions=*/false);
      if (r.request.is_discarded() || !r.request.is_object()) {
        throw CLI::ValidationError("raw", "not a JSON object: " + raw);
      }
    }
  } catch (const CLI::ParseError& e) {
    *exit_status = app.exit(e, out, err) == 0 ? 0 : kExitUsage;
    return std::nullopt;
  }
  return r;
}

int run_ctl(int argc, char** argv) {
  int status = 0;
  // CLI11 wants the program name first.
  std::vector<char*> args{const_cast<char*>("rowan-wanem ctl")};
  args.insert(args.end(), argv, argv + argc);
  const auto req =
      parse_ctl(static_cast<int>(args.size()), args.data(), std::cout, std::cerr, &status);
  if (!req) return status;
  const std::string& path = req->socket;

  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) {
    fmt::print(stderr, "rowan-wanem ctl: socket path too long: '{}'\n", path);
    return kExitUsage;
  }
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    fmt::print(stderr, "rowan-wanem ctl: socket: {}\n", std::strerror(errno));
    return kExitUnavailable;
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    fmt::print(stderr, "rowan-wanem ctl: cannot reach {}: {}\n", path, std::strerror(errno));
    close(fd);
    return kExitUnavailable;
  }
  const std::string line = req->request.dump() + "\n";
  size_t off = 0;
  while (off < line.size()) {
    const ssize_t n = write(fd, line.data() + off, line.size() - off);
    if (n <= 0) {
      fmt::print(stderr, "rowan-wanem ctl: write failed: {}\n", std::strerror(errno));
      close(fd);
      return kExitUnavailable;
    }
    off += static_cast<size_t>(n);
  }
  std::string reply;
  char buf[4096];
  while (reply.find('\n') == std::string::npos) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) break;
    reply.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  if (reply.empty()) {
    fmt::print(stderr, "rowan-wanem ctl: no reply from {}\n", path);
    return kExitUnavailable;
  }
  const json r = json::parse(reply.substr(0, reply.find('\n')), nullptr, false);
  if (r.is_discarded()) {
    fmt::print(stderr, "rowan-wanem ctl: bad reply (not JSON) from {}\n", path);
    return 1;
  }
  fmt::print("{}\n", r.dump(2));
  return r.is_object() && r.value("ok", false) ? 0 : 1;
}

}  // namespace rowan::wanem
