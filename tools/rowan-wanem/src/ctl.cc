#include "ctl.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

#include <nlohmann/json.hpp>

namespace rowan::wanem {
namespace {

using nlohmann::json;

constexpr int kExitUsage = 64;
constexpr int kExitUnavailable = 69;

void usage() {
  std::fputs(
      "usage: rowan-wanem ctl SOCKET COMMAND\n"
      "  get                          settings and counters\n"
      "  stats                        counters\n"
      "  set KEY=VALUE...             e.g. rate=100mbit a2b.loss=1% b2a.delay=10ms\n"
      "  flap [a2b|b2a|both] FOR [IN] link down for FOR, starting IN from now\n"
      "  link up|down [a2b|b2a|both]\n"
      "  reset                        zero the counters\n"
      "  quit                         stop the emulator\n"
      "  raw JSON                     send a request as is\n",
      stderr);
}

bool is_dir(const std::string& s) { return s == "a2b" || s == "b2a" || s == "both"; }

}  // namespace

int run_ctl(int argc, char** argv) {
  if (argc < 2) {
    usage();
    return kExitUsage;
  }
  const std::string path = argv[0];
  const std::string cmd = argv[1];
  json req;
  if (cmd == "get" || cmd == "stats" || cmd == "quit") {
    req = json{{"cmd", cmd}};
  } else if (cmd == "reset") {
    req = json{{"cmd", "reset_stats"}};
  } else if (cmd == "set") {
    json settings = json::object();
    for (int i = 2; i < argc; ++i) {
      const std::string kv = argv[i];
      const auto eq = kv.find('=');
      if (eq == std::string::npos || eq == 0) {
        std::fprintf(stderr, "rowan-wanem ctl: expected KEY=VALUE, got '%s'\n", kv.c_str());
        return kExitUsage;
      }
      settings[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
    if (settings.empty()) {
      usage();
      return kExitUsage;
    }
    req = json{{"cmd", "set"}, {"settings", settings}};
  } else if (cmd == "flap") {
    int i = 2;
    std::string dir = "both";
    if (i < argc && is_dir(argv[i])) dir = argv[i++];
    if (i >= argc) {
      usage();
      return kExitUsage;
    }
    req = json{{"cmd", "flap"}, {"dir", dir}, {"for", argv[i++]}};
    if (i < argc) req["in"] = argv[i];
  } else if (cmd == "link") {
    if (argc < 3) {
      usage();
      return kExitUsage;
    }
    req = json{{"cmd", "link"}, {"state", argv[2]}, {"dir", argc > 3 ? argv[3] : "both"}};
  } else if (cmd == "raw") {
    if (argc < 3) {
      usage();
      return kExitUsage;
    }
    try {
      req = json::parse(argv[2]);
    } catch (const json::exception& e) {
      std::fprintf(stderr, "rowan-wanem ctl: bad JSON: %s\n", e.what());
      return kExitUsage;
    }
  } else {
    usage();
    return kExitUsage;
  }

  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (fd < 0 || path.size() >= sizeof addr.sun_path) {
    std::fprintf(stderr, "rowan-wanem ctl: bad socket path '%s'\n", path.c_str());
    return kExitUsage;
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    std::fprintf(stderr, "rowan-wanem ctl: cannot reach %s: %s\n", path.c_str(),
                 std::strerror(errno));
    close(fd);
    return kExitUnavailable;
  }
  const std::string line = req.dump() + "\n";
  size_t off = 0;
  while (off < line.size()) {
    const ssize_t n = write(fd, line.data() + off, line.size() - off);
    if (n <= 0) {
      std::fprintf(stderr, "rowan-wanem ctl: write failed: %s\n", std::strerror(errno));
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
    std::fprintf(stderr, "rowan-wanem ctl: no reply from %s\n", path.c_str());
    return kExitUnavailable;
  }
  try {
    const json r = json::parse(reply.substr(0, reply.find('\n')));
    std::printf("%s\n", r.dump(2).c_str());
    return r.value("ok", false) ? 0 : 1;
  } catch (const json::exception& e) {
    std::fprintf(stderr, "rowan-wanem ctl: bad reply: %s\n", e.what());
    return 1;
  }
}

}  // namespace rowan::wanem
