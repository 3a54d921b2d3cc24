// The control socket: a unix stream socket served by one thread that sleeps
// in poll(2) on the listening socket, an eventfd (stop) and its clients, so it
// costs nothing while idle. Each client has an input buffer (split at '\n')
// and an output buffer written as the socket accepts it.
#include "control/control.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string_view>
#include <system_error>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace rowan::gw {
namespace {

using Json = nlohmann::ordered_json;

constexpr size_t kMaxClients = 64;
constexpr size_t kMaxPendingOutput = 16 << 20;  // stop reading a client that does not read
constexpr size_t kMaxReply = 64 << 20;          // client side
constexpr int kListenBacklog = 16;

std::string errno_text(int err) { return std::error_code(err, std::generic_category()).message(); }

[[noreturn]] void throw_errno(int err, const std::string& what) {
  throw std::system_error(err, std::generic_category(), what);
}

bool fill_sockaddr(const std::string& path, sockaddr_un& sa) {
  std::memset(&sa, 0, sizeof sa);
  sa.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof sa.sun_path) return false;
  std::memcpy(sa.sun_path, path.data(), path.size());
  return true;
}

int connect_unix(const std::string& path, int timeout_ms) {
  sockaddr_un sa;
  if (!fill_sockaddr(path, sa)) throw_errno(ENAMETOOLONG, "control socket path " + path);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw_errno(errno, "socket");
  // A unix connect blocks only while the listen backlog is full; SO_SNDTIMEO
  // bounds that wait.
  timeval tv{timeout_ms / 1000, static_cast<suseconds_t>(timeout_ms % 1000) * 1000};
  (void)::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&sa), sizeof sa) != 0) {
    const int err = errno;
    ::close(fd);
    throw_errno(err, "cannot connect to " + path);
  }
  return fd;
}

std::string error_reply(const std::string& msg) {
  Json j = Json::object();
  j["ok"] = false;
  j["error"] = msg;
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.back() == '\r' || s.back() == ' ' || s.back() == '\t'))
    s.remove_suffix(1);
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  return s;
}

std::optional<gid_t> lookup_group(const std::string& name) {
  std::vector<char> buf(16384);
  group gr{};
  group* res = nullptr;
  for (int i = 0; i < 4; ++i) {
    const int rc = ::getgrnam_r(name.c_str(), &gr, buf.data(), buf.size(), &res);
    if (rc == ERANGE) {
      buf.resize(buf.size() * 4);
      continue;
    }
    if (rc != 0 || res == nullptr) return std::nullopt;
    return gr.gr_gid;
  }
  return std::nullopt;
}

struct Client {
  int fd = -1;
  std::string in;
  std::string out;
  bool discarding = false;   // inside an over-long line: drop until '\n'
  bool read_closed = false;  // EOF seen: answer what came, then close
  bool close_after_flush = false;
  bool dead = false;
};

}  // namespace

ControlServer::ControlServer(const ControlConfig& cfg, ControlHandler& handler)
    : path_(cfg.socket), handler_(handler) {
  sockaddr_un sa;
  if (!fill_sockaddr(path_, sa)) {
    throw std::runtime_error(
        fmt::format("control socket path '{}' is empty or longer than {} bytes", path_,
                    sizeof sa.sun_path - 1));
  }
  namespace fs = std::filesystem;
  const fs::path parent = fs::path(path_).parent_path();
  if (!parent.empty()) {
    std::error_code ec;
    fs::create_directories(parent, ec);
    if (ec) {
      throw std::runtime_error(fmt::format("cannot create the control socket's directory {}: {}",
                                           parent.string(), ec.message()));
    }
  }

  // An existing file: a live daemon (refuse), a stale socket (replace), or
  // something else that is not ours to delete (refuse).
  struct stat st {};
  if (::lstat(path_.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      throw std::runtime_error(
          fmt::format("{} exists and is not a socket; not replacing it", path_));
    }
    const int probe = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (probe < 0) throw_errno(errno, "socket");
    const int rc = ::connect(probe, reinterpret_cast<const sockaddr*>(&sa), sizeof sa);
    const int err = errno;
    ::close(probe);
    if (rc == 0 || err == EAGAIN) {
      throw std::runtime_error(
          fmt::format("another daemon is answering on {}; refusing to start", path_));
    }
    if (err != ECONNREFUSED) {
      throw std::runtime_error(
          fmt::format("cannot check the existing socket {}: {}", path_, errno_text(err)));
    }
    spdlog::info("control: removing stale socket {}", path_);
    if (::unlink(path_.c_str()) != 0 && errno != ENOENT) {
      throw std::runtime_error(
          fmt::format("cannot remove the stale socket {}: {}", path_, errno_text(errno)));
    }
  }

  try {
    listen_fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (listen_fd_ < 0) throw_errno(errno, "socket");
    if (::bind(listen_fd_, reinterpret_cast<const sockaddr*>(&sa), sizeof sa) != 0) {
      throw_errno(errno, "cannot bind the control socket " + path_);
    }
    if (::lstat(path_.c_str(), &st) != 0) throw_errno(errno, "stat " + path_);
    socket_dev_ = st.st_dev;
    socket_ino_ = st.st_ino;
    socket_gid_ = st.st_gid;
    // Permissions before listen(): nobody can connect until then.
    if (::chmod(path_.c_str(), 0660) != 0) throw_errno(errno, "chmod " + path_);
    if (!cfg.group.empty()) {
      if (auto gid = lookup_group(cfg.group)) {
        if (::chown(path_.c_str(), static_cast<uid_t>(-1), *gid) == 0) {
          socket_gid_ = *gid;
        } else {
          spdlog::warn("control: cannot give {} to group '{}': {}; keeping the daemon's group",
                       path_, cfg.group, errno_text(errno));
        }
      } else {
        spdlog::warn("control: group '{}' does not exist; {} keeps the daemon's group", cfg.group,
                     path_);
      }
    }
    if (::listen(listen_fd_, kListenBacklog) != 0) throw_errno(errno, "listen " + path_);
    wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (wake_fd_ < 0) throw_errno(errno, "eventfd");
  } catch (const std::system_error& e) {
    close_fds();
    throw std::runtime_error(e.what());
  }
}

ControlServer::~ControlServer() {
  stop();
  close_fds();
}

void ControlServer::close_fds() {
  if (listen_fd_ >= 0) {
    ::close(listen_fd_);
    listen_fd_ = -1;
    // Only unlink the socket file if it is still the one we bound.
    struct stat st {};
    if (socket_ino_ != 0 && ::lstat(path_.c_str(), &st) == 0 && st.st_dev == socket_dev_ &&
        st.st_ino == socket_ino_) {
      ::unlink(path_.c_str());
    }
  }
  if (wake_fd_ >= 0) {
    ::close(wake_fd_);
    wake_fd_ = -1;
  }
}

void ControlServer::start() {
  if (running_.exchange(true)) return;
  uint64_t pending = 0;  // a stop() before this start() left the eventfd readable
  while (::read(wake_fd_, &pending, sizeof pending) < 0 && errno == EINTR) {
  }
  thread_ = std::thread([this] { run(); });
}

void ControlServer::stop() {
  if (!running_.exchange(false)) return;
  const uint64_t one = 1;
  if (::write(wake_fd_, &one, sizeof one) < 0) {
    spdlog::error("control: cannot wake the control thread: {}", errno_text(errno));
  }
  if (thread_.joinable()) thread_.join();
}

namespace {

// Answers one request line. Never throws.
std::string answer(ControlHandler& handler, std::string_view line) {
  try {
    const Json req = Json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (req.is_discarded()) return error_reply("malformed request: not JSON");
    if (!req.is_object()) return error_reply("malformed request: expected a JSON object");
    auto cmd = req.find("cmd");
    if (cmd == req.end() || !cmd->is_string()) {
      return error_reply("malformed request: \"cmd\" (a string) is required");
    }
    Json args = Json::object();
    if (auto a = req.find("args"); a != req.end()) {
      if (!a->is_object()) return error_reply("malformed request: \"args\" must be an object");
      args = *a;
    }
    Json reply = Json::object();
    try {
      Json result = handler.handle(cmd->get<std::string>(), args);
      reply["ok"] = true;
      reply["result"] = std::move(result);
    } catch (const std::invalid_argument& e) {
      return error_reply(e.what());
    }
    return reply.dump(-1, ' ', false, Json::error_handler_t::replace);
  } catch (const std::exception& e) {
    return error_reply(fmt::format("internal error: {}", e.what()));
  } catch (...) {
    return error_reply("internal error");
  }
}

void read_client(Client& c, ControlHandler& handler) {
  char buf[16384];
  while (c.out.size() < kMaxPendingOutput) {
    const ssize_t n = ::recv(c.fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) c.dead = true;
      break;
    }
    if (n == 0) {
      c.read_closed = true;
      break;
    }
    std::string_view data(buf, static_cast<size_t>(n));
    while (!data.empty()) {
      const size_t nl = data.find('\n');
      if (c.discarding) {
        if (nl == std::string_view::npos) {
          data = {};
        } else {
          c.discarding = false;
          data.remove_prefix(nl + 1);
        }
        continue;
      }
      if (nl == std::string_view::npos) {
        c.in.append(data);
        data = {};
        if (c.in.size() > kMaxControlRequest) {
          c.in.clear();
          c.discarding = true;
          c.out +=
              error_reply(fmt::format("request too long (limit {} bytes)", kMaxControlRequest));
          c.out += '\n';
        }
        continue;
      }
      c.in.append(data.substr(0, nl));
      data.remove_prefix(nl + 1);
      std::string line = std::move(c.in);
      c.in.clear();
      if (line.size() > kMaxControlRequest) {
        c.out += error_reply(fmt::format("request too long (limit {} bytes)", kMaxControlRequest));
        c.out += '\n';
        continue;
      }
      const std::string_view req = trim(line);
      if (req.empty()) continue;
      c.out += answer(handler, req);
      c.out += '\n';
    }
  }
  if (c.read_closed) {
    // A last request without its newline still gets an answer.
    const std::string_view req = trim(c.in);
    if (!c.discarding && !req.empty()) {
      c.out += answer(handler, req);
      c.out += '\n';
    }
    c.in.clear();
    c.close_after_flush = true;
  }
}

void write_client(Client& c) {
  while (!c.out.empty()) {
    const ssize_t n = ::send(c.fd, c.out.data(), c.out.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) c.dead = true;
      return;
    }
    c.out.erase(0, static_cast<size_t>(n));
  }
}

// SO_PEERCRED: root, the daemon's own user, or a member of the socket's group.
std::string check_peer(int fd, uint32_t socket_gid) {
  ucred cred{};
  socklen_t len = sizeof cred;
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    return fmt::format("cannot read the peer's credentials: {}", errno_text(errno));
  }
  if (cred.uid == 0 || cred.uid == ::geteuid() || cred.gid == socket_gid) return {};
  std::vector<gid_t> groups(64);
  for (int i = 0; i < 3; ++i) {
    socklen_t glen = static_cast<socklen_t>(groups.size() * sizeof(gid_t));
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &glen) == 0) {
      groups.resize(glen / sizeof(gid_t));
      for (gid_t g : groups) {
        if (g == socket_gid) return {};
      }
      break;
    }
    if (errno != ERANGE) break;
    groups.resize(glen / sizeof(gid_t) + 16);
  }
  return fmt::format("permission denied: uid {} is not root, the daemon's user or in group {}",
                     cred.uid, socket_gid);
}

}  // namespace

void ControlServer::run() {
  std::vector<Client> clients;
  std::vector<pollfd> fds;
  while (true) {
    fds.clear();
    fds.push_back({wake_fd_, POLLIN, 0});
    fds.push_back({listen_fd_, static_cast<short>(clients.size() < kMaxClients ? POLLIN : 0), 0});
    for (const Client& c : clients) {
      short ev = 0;
      if (!c.read_closed && !c.close_after_flush && c.out.size() < kMaxPendingOutput) ev |= POLLIN;
      if (!c.out.empty()) ev |= POLLOUT;
      fds.push_back({c.fd, ev, 0});
    }
    const int n = ::poll(fds.data(), fds.size(), -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      spdlog::error("control: poll failed: {}; control socket stops", errno_text(errno));
      break;
    }
    if ((fds[0].revents & POLLIN) != 0) break;

    for (size_t i = 0; i < clients.size(); ++i) {
      Client& c = clients[i];
      const short rev = fds[i + 2].revents;
      if ((rev & (POLLIN | POLLHUP | POLLERR)) != 0 && !c.read_closed && !c.close_after_flush) {
        read_client(c, handler_);
      }
      if (!c.out.empty() && !c.dead) write_client(c);
      if ((rev & POLLERR) != 0 && c.out.empty()) c.dead = true;
      if (c.close_after_flush && c.out.empty()) c.dead = true;
    }
    std::erase_if(clients, [](const Client& c) {
      if (c.dead) ::close(c.fd);
      return c.dead;
    });

    if ((fds[1].revents & POLLIN) != 0) {
      while (clients.size() < kMaxClients) {
        const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) {
          if (errno == EINTR) continue;
          if (errno != EAGAIN && errno != EWOULDBLOCK && errno != ECONNABORTED) {
            spdlog::warn("control: accept failed: {}", errno_text(errno));
          }
          break;
        }
        Client c;
        c.fd = fd;
        if (std::string denied = check_peer(fd, socket_gid_); !denied.empty()) {
          spdlog::warn("control: {}", denied);
          c.out = error_reply(denied) + "\n";
          c.close_after_flush = true;
          write_client(c);
          if (c.out.empty() || c.dead) {
            ::close(fd);
            continue;
          }
        }
        clients.push_back(std::move(c));
      }
    }
  }
  for (const Client& c : clients) ::close(c.fd);
}

Json control_request(const std::string& socket_path, const std::string& cmd, const Json& args,
                     int timeout_ms) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  auto remaining_ms = [&]() -> int {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    return left > 0 ? static_cast<int>(left) : 0;
  };

  const int fd = connect_unix(socket_path, timeout_ms);
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};

  Json req = Json::object();
  req["cmd"] = cmd;
  if (!args.empty()) req["args"] = args;
  std::string out = req.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n";

  auto wait_for = [&](short events, const char* what) {
    while (true) {
      pollfd p{fd, events, 0};
      const int rc = ::poll(&p, 1, remaining_ms());
      if (rc > 0) return;
      if (rc < 0 && errno == EINTR) continue;
      if (rc < 0) throw_errno(errno, "poll");
      throw_errno(ETIMEDOUT,
                  fmt::format("no {} from {} within {} ms", what, socket_path, timeout_ms));
    }
  };

  size_t sent = 0;
  while (sent < out.size()) {
    const ssize_t n = ::send(fd, out.data() + sent, out.size() - sent, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n >= 0) {
      sent += static_cast<size_t>(n);
      continue;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      wait_for(POLLOUT, "room to send the request");
      continue;
    }
    throw_errno(errno, "cannot send to " + socket_path);
  }

  std::string in;
  char buf[65536];
  while (in.find('\n') == std::string::npos) {
    wait_for(POLLIN, "reply");
    const ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      throw_errno(errno, "cannot read from " + socket_path);
    }
    if (n == 0) {
      if (in.empty()) {
        throw std::runtime_error(socket_path + " closed the connection without a reply");
      }
      break;
    }
    in.append(buf, static_cast<size_t>(n));
    if (in.size() > kMaxReply) throw std::runtime_error("reply from " + socket_path + " too long");
  }
  const std::string_view line = std::string_view(in).substr(0, in.find('\n'));
  Json reply = Json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (reply.is_discarded() || !reply.is_object()) {
    throw std::runtime_error("malformed reply from " + socket_path + ": not a JSON object");
  }
  auto ok = reply.find("ok");
  if (ok == reply.end() || !ok->is_boolean()) {
    throw std::runtime_error("malformed reply from " + socket_path + ": no \"ok\" boolean");
  }
  if (ok->get<bool>()) {
    if (reply.find("result") == reply.end()) {
      throw std::runtime_error("malformed reply from " + socket_path + ": no \"result\"");
    }
  } else {
    auto err = reply.find("error");
    if (err == reply.end() || !err->is_string()) {
      throw std::runtime_error("malformed reply from " + socket_path + ": no \"error\" string");
    }
  }
  return reply;
}

}  // namespace rowan::gw
