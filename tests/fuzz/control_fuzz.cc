// libFuzzer target for the control protocol: each input is written to a real
// rowand ControlServer over its unix socket (newline-delimited JSON, the
// server's line framing, request parser and SO_PEERCRED check all run), and
// every reply line must be a JSON object with a boolean "ok".
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "control/control.h"

namespace {

using Json = nlohmann::ordered_json;

class Handler final : public rowan::gw::ControlHandler {
 public:
  Json handle(const std::string& cmd, const Json& args) override {
    if (cmd == "status") return Json{{"ok_s", 1.5}, {"args", args}};
    if (cmd == "peers") return Json::array({Json{{"name", "b"}}});
    throw std::invalid_argument("unknown command '" + cmd + "'");
  }
};

struct Server {
  Handler handler;
  std::string dir;
  std::unique_ptr<rowan::gw::ControlServer> server;
  Server() {
    char tmpl[] = "/tmp/rowan-control-fuzz-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) std::abort();
    dir = tmpl;
    rowan::gw::ControlConfig cfg;
    cfg.socket = dir + "/control.sock";
    cfg.group = "";
    server = std::make_unique<rowan::gw::ControlServer>(cfg, handler);
    server->start();
  }
  ~Server() {
    server.reset();
    rmdir(dir.c_str());
  }
};

Server& server() {
  static Server s;
  return s;
}

void check_reply(const std::string& line) {
  const Json j = Json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("ok") || !j["ok"].is_boolean()) {
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Server& s = server();
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::strncpy(sa.sun_path, s.server->path().c_str(), sizeof sa.sun_path - 1);
  if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    close(fd);
    return 0;
  }
  size_t off = 0;
  while (off < size) {
    const ssize_t n = write(fd, data + off, size - off);
    if (n <= 0) break;
    off += static_cast<size_t>(n);
  }
  shutdown(fd, SHUT_WR);
  std::string got;
  char buf[65536];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 5000) <= 0) break;  // the server keeps the connection: done
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  size_t start = 0;
  for (size_t nl; (nl = got.find('\n', start)) != std::string::npos; start = nl + 1) {
    check_reply(got.substr(start, nl - start));
  }
  return 0;
}
