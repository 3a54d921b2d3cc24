#include "control_server.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace rowan::wanem {

namespace {
constexpr size_t kMaxRequest = size_t{64} * 1024;
constexpr size_t kMaxClients = 16;
}  // namespace

ControlServer::ControlServer(std::string path) : path_(std::move(path)) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path_.size() >= sizeof addr.sun_path) {
    throw std::runtime_error("control socket path too long: " + path_);
  }
  std::memcpy(addr.sun_path, path_.c_str(), path_.size() + 1);
  listen_fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
  unlink(path_.c_str());
  if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      listen(listen_fd_, 8) != 0) {
    const std::string err = std::strerror(errno);
    close(listen_fd_);
    throw std::runtime_error("control socket " + path_ + ": " + err);
  }
  chmod(path_.c_str(), 0660);
}

ControlServer::~ControlServer() {
  for (const Client& c : clients_) close(c.fd);
  if (listen_fd_ >= 0) {
    close(listen_fd_);
    unlink(path_.c_str());
  }
}

void ControlServer::add_fds(std::vector<pollfd>& out) const {
  out.push_back(pollfd{listen_fd_, POLLIN, 0});
  for (const Client& c : clients_) out.push_back(pollfd{c.fd, POLLIN, 0});
}

bool ControlServer::poll_once(Emulator& emu, TimePoint now) {
  bool quit = false;
  for (;;) {
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) break;
    if (clients_.size() >= kMaxClients) {
      close(fd);
      continue;
    }
    clients_.push_back(Client{fd, {}});
  }
  for (size_t i = 0; i < clients_.size();) {
    Client& c = clients_[i];
    bool closed = false;
    char buf[4096];
    for (;;) {
      const ssize_t n = read(c.fd, buf, sizeof buf);
      if (n > 0) {
        c.in.append(buf, static_cast<size_t>(n));
        if (c.in.size() > kMaxRequest) closed = true;
        if (closed) break;
        continue;
      }
      if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) closed = true;
      break;
    }
    size_t nl;
    while (!closed && (nl = c.in.find('\n')) != std::string::npos) {
      const std::string line = c.in.substr(0, nl);
      c.in.erase(0, nl + 1);
      nlohmann::json reply;
      try {
        bool q = false;
        reply = emu.handle(nlohmann::json::parse(line), now, &q);
        quit = quit || q;
      } catch (const nlohmann::json::exception& e) {
        reply = nlohmann::json{{"ok", false}, {"error", std::string("bad JSON: ") + e.what()}};
      }
      const std::string out = reply.dump() + "\n";
      // Replies are small; a client that does not read them is dropped.
      size_t off = 0;
      int spins = 0;
      while (off < out.size() && spins < 1000) {
        const ssize_t n = send(c.fd, out.data() + off, out.size() - off, MSG_NOSIGNAL);
        if (n > 0) {
          off += static_cast<size_t>(n);
        } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
          ++spins;
          usleep(100);
        } else {
          break;
        }
      }
      if (off < out.size()) closed = true;
    }
    if (closed) {
      close(c.fd);
      clients_.erase(clients_.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      ++i;
    }
  }
  return quit;
}

}  // namespace rowan::wanem
