// The control socket: a server with a fake handler in a temp dir answers
// requests, survives malformed ones, serves several clients, replaces a stale
// socket file but never a live daemon's, checks SO_PEERCRED; the client times
// out and rejects malformed replies; rowanctl prints tables and JSON and exits
// 69 when nobody answers.
#include <grp.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "control/control.h"
#include "ctl.h"
#include "tools/paths.h"
#include "tools/temp_dir.h"
#include "top.h"

namespace rowan::gw {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

class FakeHandler : public ControlHandler {
 public:
  Json handle(const std::string& cmd, const Json& args) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      calls_.push_back(cmd);
      last_args_ = args;
    }
    if (cmd == "status") {
      return Json{{"version", "test-1"},
                  {"uptime_s", 3723.5},
                  {"config", "/etc/rowan/rowand.toml"},
                  {"peers", 1},
                  {"mode", {{"default", "passthrough"}}}};
    }
    if (cmd == "peers") {
      return Json{{"peers", Json::array({Json{{"name", "site-b"},
                                              {"endpoint", "198.19.0.2:47910"},
                                              {"srtt_s", 0.0201},
                                              {"pacing_bps", 1e9},
                                              {"cwnd_bytes", 2621440},
                                              {"up", true}}})}};
    }
    if (cmd == "flows") {
      std::lock_guard<std::mutex> lock(mu_);
      return flows_;  // a bare array, as rowand answers
    }
    if (cmd == "echo") return Json{{"args", args}};
    if (cmd == "boom") throw std::runtime_error("kaboom");
    throw std::invalid_argument("unknown command '" + cmd + "'");
  }
  std::vector<std::string> calls() {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_;
  }
  void set_flows(Json flows) {
    std::lock_guard<std::mutex> lock(mu_);
    flows_ = std::move(flows);
  }

 private:
  std::mutex mu_;
  std::vector<std::string> calls_;
  Json last_args_;
  Json flows_ = Json::array();
};

// A private temp dir (short: sun_path holds 107 bytes).
class TempDir : public test::TempDir {
 public:
  TempDir() : test::TempDir("ctl") {}
};

ControlConfig config_for(const std::string& socket, const std::string& group = "") {
  ControlConfig c;
  c.socket = socket;
  c.group = group;
  return c;
}

// A raw client: connect, send bytes, read reply lines.
class RawClient {
 public:
  explicit RawClient(const std::string& path) {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    std::strncpy(sa.sun_path, path.c_str(), sizeof sa.sun_path - 1);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0;
  }
  ~RawClient() { ::close(fd_); }
  bool connected() const { return connected_; }
  void send(const std::string& s) {
    size_t off = 0;
    while (off < s.size()) {
      const ssize_t n = ::send(fd_, s.data() + off, s.size() - off, MSG_NOSIGNAL);
      ASSERT_GT(n, 0) << std::strerror(errno);
      off += static_cast<size_t>(n);
    }
  }
  // The next reply line, or "" on EOF / after 10 s without one.
  std::string line() {
    while (true) {
      const size_t nl = buf_.find('\n');
      if (nl != std::string::npos) {
        std::string l = buf_.substr(0, nl);
        buf_.erase(0, nl + 1);
        return l;
      }
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 10000) <= 0) return "";
      char tmp[4096];
      const ssize_t n = ::recv(fd_, tmp, sizeof tmp, 0);
      if (n <= 0) return "";
      buf_.append(tmp, static_cast<size_t>(n));
    }
  }
  Json reply() { return Json::parse(line()); }
  int fd() const { return fd_; }

 private:
  int fd_ = -1;
  bool connected_ = false;
  std::string buf_;
};

TEST(ControlServer, AnswersStatusAndPeers) {
  TempDir dir;
  FakeHandler h;
  ControlServer server(config_for(dir / "control.sock"), h);
  server.start();
  EXPECT_EQ(server.path(), dir / "control.sock");

  const Json status = control_request(server.path(), "status");
  EXPECT_EQ(status["ok"], true);
  EXPECT_EQ(status["result"]["version"], "test-1");
  EXPECT_EQ(status["result"]["peers"], 1);

  const Json peers = control_request(server.path(), "peers");
  ASSERT_EQ(peers["ok"], true);
  ASSERT_EQ(peers["result"]["peers"].size(), 1u);
  EXPECT_EQ(peers["result"]["peers"][0]["name"], "site-b");

  const Json echo = control_request(server.path(), "echo", Json{{"peer", "site-b"}, {"n", 3}});
  EXPECT_EQ(echo["result"]["args"], (Json{{"peer", "site-b"}, {"n", 3}}));
  EXPECT_EQ(h.calls(), (std::vector<std::string>{"status", "peers", "echo"}));
}

TEST(ControlServer, UnknownCommandAndHandlerFailureGetErrorReplies) {
  TempDir dir;
  FakeHandler h;
  ControlServer server(config_for(dir / "c.sock"), h);
  server.start();
  const Json r = control_request(server.path(), "frobnicate");
  EXPECT_EQ(r["ok"], false);
  EXPECT_EQ(r["error"], "unknown command 'frobnicate'");
  EXPECT_FALSE(r.contains("result"));
  const Json b = control_request(server.path(), "boom");
  EXPECT_EQ(b["ok"], false);
  EXPECT_EQ(b["error"], "internal error: kaboom");
  // Still serving.
  EXPECT_EQ(control_request(server.path(), "status")["ok"], true);
}

TEST(ControlServer, MalformedLinesGetErrorsAndTheConnectionStaysUsable) {
  TempDir dir;
  FakeHandler h;
  ControlServer server(config_for(dir / "c.sock"), h);
  server.start();
  RawClient c(server.path());
  ASSERT_TRUE(c.connected());
  c.send("this is not json\n{\"cmd\":\"status\"}\n[1,2]\n{\"cmd\":5}\n\n  \r\n");
  c.send("{\"cmd\":\"status\",\"args\":[]}\n{\"cmd\":\"peers\"}\r\n");
  const Json r1 = c.reply();
  EXPECT_EQ(r1["ok"], false);
  EXPECT_EQ(r1["error"], "malformed request: not JSON");
  EXPECT_EQ(c.reply()["ok"], true);
  EXPECT_EQ(c.reply()["error"], "malformed request: expected a JSON object");
  EXPECT_EQ(c.reply()["error"], "malformed request: \"cmd\" (a string) is required");
  // Blank lines are ignored, so the next reply is for the "args":[] request.
  EXPECT_EQ(c.reply()["error"], "malformed request: \"args\" must be an object");
  EXPECT_EQ(c.reply()["result"]["peers"][0]["name"], "site-b");

  // Longer than the limit: one error, then the connection carries on.
  c.send(std::string(kMaxControlRequest + 5000, 'x'));
  c.send(std::string(70000, 'y') + "\n{\"cmd\":\"status\"}\n");
  const Json too_long = c.reply();
  EXPECT_EQ(too_long["ok"], false);
  EXPECT_NE(too_long["error"].get<std::string>().find("too long"), std::string::npos);
  EXPECT_EQ(c.reply()["result"]["version"], "test-1");

  // Invalid UTF-8 inside a JSON string and binary garbage: error replies.
  c.send("{\"cmd\":\"\xff\xfe\"}\n\x01\x02\x03\n{\"cmd\":\"status\"}\n");
  const Json bad_utf8 = c.reply();
  EXPECT_EQ(bad_utf8["ok"], false);
  EXPECT_EQ(c.reply()["ok"], false);
  EXPECT_EQ(c.reply()["ok"], true);
}

TEST(ControlServer, ServesSeveralClientsAtOnce) {
  TempDir dir;
  FakeHandler h;
  ControlServer server(config_for(dir / "c.sock"), h);
  server.start();
  std::vector<std::unique_ptr<RawClient>> clients;
  for (int i = 0; i < 5; ++i) {
    clients.push_back(std::make_unique<RawClient>(server.path()));
    ASSERT_TRUE(clients.back()->connected());
  }
  // Interleaved: every client has a request in flight before any reads.
  for (auto& c : clients) c->send("{\"cmd\":\"echo\",\"args\":{\"i\":");
  for (size_t i = 0; i < clients.size(); ++i) clients[i]->send(std::to_string(i) + "}}\n");
  for (size_t i = clients.size(); i-- > 0;) {
    EXPECT_EQ(clients[i]->reply()["result"]["args"]["i"], i);
  }
  // A client that closes its write side still gets its answer.
  RawClient half(server.path());
  half.send("{\"cmd\":\"status\"}");
  ::shutdown(half.fd(), SHUT_WR);
  EXPECT_EQ(half.reply()["ok"], true);
  EXPECT_EQ(half.line(), "");  // then the server closes
}

TEST(ControlServer, SocketFileModeDirectoryAndCleanup) {
  TempDir dir;
  FakeHandler h;
  const std::string path = dir / "run/rowan/a/control.sock";  // parents created
  {
    ControlServer server(config_for(path, "no-such-group-rowan-test"), h);
    server.start();
    struct stat st {};
    ASSERT_EQ(::lstat(path.c_str(), &st), 0);
    EXPECT_TRUE(S_ISSOCK(st.st_mode));
    EXPECT_EQ(st.st_mode & 0777, 0660u);
    EXPECT_EQ(st.st_gid, ::getegid());  // the group does not exist: the daemon's
    EXPECT_EQ(control_request(path, "status")["ok"], true);
  }
  EXPECT_FALSE(fs::exists(path));  // removed on destruction
}

TEST(ControlServer, StaleSocketIsReplacedLiveDaemonIsNot) {
  TempDir dir;
  FakeHandler h;
  const std::string path = dir / "c.sock";
  {
    // A socket file nobody listens on: what a crashed daemon leaves behind.
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    std::strncpy(sa.sun_path, path.c_str(), sizeof sa.sun_path - 1);
    ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
    ::close(fd);
    ASSERT_TRUE(fs::exists(path));
  }
  ControlServer first(config_for(path), h);
  first.start();
  EXPECT_EQ(control_request(path, "status")["ok"], true);

  // A second daemon on the same path refuses to start and leaves the first alone.
  FakeHandler h2;
  try {
    ControlServer second(config_for(path), h2);
    FAIL() << "second server started";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("another daemon"), std::string::npos) << e.what();
  }
  EXPECT_EQ(control_request(path, "status")["ok"], true);
  EXPECT_TRUE(h2.calls().empty());

  // Not a socket: never deleted.
  const std::string file = dir / "file.sock";
  std::ofstream(file) << "precious";
  EXPECT_THROW(ControlServer(config_for(file), h), std::runtime_error);
  EXPECT_TRUE(fs::exists(file));

  // Too long for sun_path.
  EXPECT_THROW(ControlServer(config_for("/tmp/" + std::string(120, 'a')), h), std::runtime_error);
}

TEST(ControlServer, StopIsPromptAndRestartable) {
  TempDir dir;
  FakeHandler h;
  ControlServer server(config_for(dir / "c.sock"), h);
  server.start();
  RawClient idle(server.path());  // a client that never sends anything
  ASSERT_TRUE(idle.connected());
  EXPECT_EQ(control_request(server.path(), "status")["ok"], true);
  server.stop();
  server.stop();               // idempotent
  EXPECT_EQ(idle.line(), "");  // its connection was closed
  server.start();
  EXPECT_EQ(control_request(server.path(), "status")["ok"], true);
}

// Connects as another user (fork, setgroups/setgid/setuid) and returns the
// first reply line to a status request, or "exit:N" when the child failed
// (3: connect refused by the file mode). Needs root.
std::string request_as(const std::string& path, uid_t uid, gid_t gid, std::vector<gid_t> groups) {
  int pipefd[2];
  if (::pipe(pipefd) != 0) return "pipe";
  const pid_t pid = ::fork();
  if (pid < 0) return "fork";
  if (pid == 0) {
    // Child: only async-signal-safe calls until _exit.
    ::close(pipefd[0]);
    if (::setgroups(groups.size(), groups.data()) != 0 || ::setgid(gid) != 0 ||
        ::setuid(uid) != 0) {
      _exit(2);
    }
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    std::strncpy(sa.sun_path, path.c_str(), sizeof sa.sun_path - 1);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) _exit(3);
    const char req[] = "{\"cmd\":\"status\"}\n";
    (void)::send(fd, req, sizeof req - 1, MSG_NOSIGNAL);
    char buf[512];
    ssize_t n;
    while ((n = ::read(fd, buf, sizeof buf)) > 0) {
      if (::write(pipefd[1], buf, static_cast<size_t>(n)) != n) _exit(4);
      if (std::memchr(buf, '\n', static_cast<size_t>(n)) != nullptr) break;
    }
    _exit(0);
  }
  ::close(pipefd[1]);
  std::string got;
  char buf[512];
  ssize_t n;
  while ((n = ::read(pipefd[0], buf, sizeof buf)) > 0) got.append(buf, static_cast<size_t>(n));
  ::close(pipefd[0]);
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return "wait";
  if (WEXITSTATUS(status) != 0) return "exit:" + std::to_string(WEXITSTATUS(status));
  return got.substr(0, got.find('\n'));
}

// SO_PEERCRED: an unprivileged user outside the socket's group is refused
// even when the file mode would let it connect; members of the group (primary
// or supplementary) are served. Needs root to switch users.
TEST(ControlServer, PeerCredentialsAreChecked) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to connect as another user";
  constexpr uid_t kNobody = 65534;
  constexpr gid_t kOtherGid = 54321;  // nobody's group on this machine
  TempDir dir;
  ASSERT_EQ(::chmod(dir.path().c_str(), 0755), 0);
  FakeHandler h;
  ControlServer server(config_for(dir / "c.sock"), h);  // the daemon's group: root's
  server.start();
  ASSERT_EQ(::chmod(server.path().c_str(), 0666), 0);
  const std::string denied = request_as(server.path(), kNobody, kOtherGid, {});
  ASSERT_EQ(denied.rfind('{', 0), 0u) << denied;
  const Json reply = Json::parse(denied);
  EXPECT_EQ(reply["ok"], false);
  EXPECT_NE(reply["error"].get<std::string>().find("permission denied"), std::string::npos);
  EXPECT_TRUE(h.calls().empty());  // the handler never saw the request
  EXPECT_EQ(control_request(server.path(), "status")["ok"], true);  // root still gets in

  // A socket group that exists: its members get in, others not even through the file mode.
  group* gr = ::getgrnam("nogroup");
  if (gr == nullptr) GTEST_SKIP() << "no 'nogroup' group to test group membership with";
  const gid_t group_gid = gr->gr_gid;
  ControlServer grouped(config_for(dir / "g.sock", "nogroup"), h);
  grouped.start();
  struct stat st {};
  ASSERT_EQ(::lstat(grouped.path().c_str(), &st), 0);
  EXPECT_EQ(st.st_gid, group_gid);
  EXPECT_EQ(st.st_mode & 0777, 0660u);
  EXPECT_EQ(Json::parse(request_as(grouped.path(), kNobody, group_gid, {}))["ok"], true);
  EXPECT_EQ(Json::parse(request_as(grouped.path(), kNobody, kOtherGid, {group_gid}))["ok"], true);
  EXPECT_EQ(request_as(grouped.path(), kNobody, kOtherGid, {}), "exit:3");
  // With the file mode opened up, SO_PEERCRED alone still refuses a non-member.
  ASSERT_EQ(::chmod(grouped.path().c_str(), 0666), 0);
  const Json other = Json::parse(request_as(grouped.path(), kNobody, kOtherGid, {}));
  EXPECT_EQ(other["ok"], false);
  EXPECT_NE(other["error"].get<std::string>().find("permission denied"), std::string::npos);
}

TEST(ControlClient, MissingSocketThrowsSystemError) {
  TempDir dir;
  try {
    (void)control_request(dir / "nobody.sock", "status");
    FAIL() << "no exception";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code().value(), ENOENT);
  }
}

// A fake daemon that accepts, reads the request and answers `reply` (or never).
class FakeDaemon {
 public:
  FakeDaemon(const std::string& path, std::string reply, bool answer)
      : reply_(std::move(reply)), answer_(answer) {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    std::strncpy(sa.sun_path, path.c_str(), sizeof sa.sun_path - 1);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
    EXPECT_EQ(::listen(fd_, 4), 0);
    if (answer_) {
      thread_ = std::thread([this] {
        const int c = ::accept(fd_, nullptr, nullptr);
        if (c < 0) return;
        char buf[1024];
        (void)::recv(c, buf, sizeof buf, 0);
        (void)::send(c, reply_.data(), reply_.size(), MSG_NOSIGNAL);
        ::close(c);
      });
    }
  }
  ~FakeDaemon() {
    if (thread_.joinable()) thread_.join();
    ::close(fd_);
  }

 private:
  int fd_ = -1;
  std::string reply_;
  bool answer_;
  std::thread thread_;
};

TEST(ControlClient, MalformedRepliesAreRejected) {
  TempDir dir;
  for (const std::string& bad :
       {std::string("garbage\n"), std::string("[1]\n"), std::string("{\"ok\":1}\n"),
        std::string("{\"ok\":true}\n"), std::string("{\"ok\":false}\n"), std::string("")}) {
    const std::string path = dir / "fake.sock";
    fs::remove(path);
    FakeDaemon d(path, bad, true);
    EXPECT_THROW((void)control_request(path, "status"), std::runtime_error) << bad;
  }
}

TEST(ControlClient, TimesOutWhenTheDaemonDoesNotAnswer) {
  TempDir dir;
  const std::string path = dir / "mute.sock";
  FakeDaemon mute(path, "", false);  // listens, never accepts
  try {
    (void)control_request(path, "status", Json::object(), 100);
    FAIL() << "no timeout";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code().value(), ETIMEDOUT);
  }
}

// --- rowanctl, the binary --------------------------------------------------

std::string run(const std::string& cmd, int* status) {
  std::string out;
  FILE* f = popen(cmd.c_str(), "r");
  if (f == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  const int rc = pclose(f);
  *status = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  return out;
}

std::string rowanctl() { return test::binary_dir() + "/daemon/rowanctl/rowanctl"; }

class RowanctlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = std::make_unique<ControlServer>(config_for(dir_ / "control.sock"), handler_);
    server_->start();
  }
  TempDir dir_;
  FakeHandler handler_;
  std::unique_ptr<ControlServer> server_;
};

TEST_F(RowanctlTest, StatusJsonIsTheResultObjectOnOneLine) {
  int status = -1;
  const std::string out = run(rowanctl() + " -s " + server_->path() + " status --json", &status);
  EXPECT_EQ(status, 0);
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(out.back(), '\n');
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1);
  const Json j = Json::parse(out);
  EXPECT_EQ(j, handler_.handle("status", Json::object()));
  EXPECT_EQ(out, j.dump() + "\n");
  // The option also works after the subcommand, and -j is --json.
  EXPECT_EQ(run(rowanctl() + " status -j --socket " + server_->path(), &status), out);
  EXPECT_EQ(status, 0);
  // And from the environment.
  EXPECT_EQ(
      run("ROWAN_CONTROL_SOCKET=" + server_->path() + " " + rowanctl() + " status --json", &status),
      out);
  EXPECT_EQ(status, 0);
}

TEST_F(RowanctlTest, TablesByDefault) {
  int status = -1;
  const std::string st = run(rowanctl() + " -s " + server_->path() + " status", &status);
  EXPECT_EQ(status, 0);
  EXPECT_NE(st.find("version       test-1\n"), std::string::npos) << st;
  EXPECT_NE(st.find("uptime_s      1h02m03s\n"), std::string::npos) << st;
  EXPECT_NE(st.find("mode.default  passthrough\n"), std::string::npos) << st;

  // The usual columns in their usual order; --wide shows every field as sent.
  const std::string peers = run(rowanctl() + " peers -s " + server_->path(), &status);
  EXPECT_EQ(status, 0);
  EXPECT_EQ(peers,
            "NAME    ENDPOINT          SRTT_S    CWND_BYTES  PACING_BPS\n"
            "site-b  198.19.0.2:47910  20.10 ms  2.5 MiB     1.00 Gbit/s\n")
      << peers;
  const std::string wide = run(rowanctl() + " peers --wide -s " + server_->path(), &status);
  EXPECT_EQ(status, 0);
  EXPECT_EQ(wide,
            "NAME    ENDPOINT          SRTT_S    PACING_BPS   CWND_BYTES  UP\n"
            "site-b  198.19.0.2:47910  20.10 ms  1.00 Gbit/s  2.5 MiB     yes\n")
      << wide;

  EXPECT_EQ(run(rowanctl() + " flows -s " + server_->path(), &status), "no flows\n");
  EXPECT_EQ(status, 0);
  handler_.set_flows(Json::array({Json{{"kind", "roce"},
                                       {"src", "198.18.1.10"},
                                       {"dst", "198.18.2.10"},
                                       {"dest_qp", 17},
                                       {"packets", 10},
                                       {"bytes", 40960},
                                       {"idle_s", 0.5},
                                       {"internal", "x"}},
                                  Json{{"kind", "tcp"},
                                       {"src", "198.18.1.10"},
                                       {"dst", "198.18.2.10"},
                                       {"sport", 5201},
                                       {"dport", 40000},
                                       {"packets", 3},
                                       {"bytes", 180},
                                       {"idle_s", 0.0125}}}));
  const std::string flows = run(rowanctl() + " flows -s " + server_->path(), &status);
  EXPECT_EQ(status, 0);
  EXPECT_EQ(flows,
            "KIND  SRC          DST          SPORT  DPORT  DEST_QP  PACKETS  BYTES     IDLE_S\n"
            "roce  198.18.1.10  198.18.2.10  -      -      17       10       40.0 KiB  500.00 ms\n"
            "tcp   198.18.1.10  198.18.2.10  5201   40000  -        3        180 B     12.50 ms\n")
      << flows;
}

TEST_F(RowanctlTest, ExitStatuses) {
  int status = -1;
  // The daemon answers with an error (this fake does not know "links"): 1.
  (void)run(rowanctl() + " -s " + server_->path() + " links 2>/dev/null", &status);
  EXPECT_EQ(status, ctl::kExitError);
  // Nobody on the socket: 69, with the reason on stderr.
  const std::string err =
      run(rowanctl() + " -s " + (dir_ / "nobody.sock") + " status 2>&1 >/dev/null", &status);
  EXPECT_EQ(status, 69);
  EXPECT_NE(err.find("unreachable"), std::string::npos) << err;
  // Usage errors: 64.
  (void)run(rowanctl() + " 2>/dev/null", &status);
  EXPECT_EQ(status, 64);
  (void)run(rowanctl() + " frobnicate 2>/dev/null", &status);
  EXPECT_EQ(status, 64);
  (void)run(rowanctl() + " status --bogus 2>/dev/null", &status);
  EXPECT_EQ(status, 64);
  (void)run(rowanctl() + " --help >/dev/null", &status);
  EXPECT_EQ(status, 0);
}

// A fake daemon that answers every command rowanctl sends, with counters
// that advance on each `peers`/`links` request (as traffic would).
class DaemonHandler : public ControlHandler {
 public:
  Json handle(const std::string& cmd, const Json& args) override {
    (void)args;
    std::lock_guard<std::mutex> lock(mu_);
    if (cmd == "status") {
      return Json{
          {"version", "0.1.0+gtest"},
          {"uptime_s", 61.0},
          {"config", "/etc/rowan/rowand.toml"},
          {"routes",
           Json::array(
               {Json{{"prefix", "198.18.2.0/24"}, {"peer", "site-b"}, {"mode", "passthrough"}},
                Json{{"prefix", "198.18.3.0/24"}, {"peer", "site-c"}, {"mode", "split"}}})}};
    }
    if (cmd == "peers") {
      ++peer_calls_;
      const double n = peer_calls_;
      Json rows = Json::array();
      for (const char* name : {"site-b", "site-c"}) {
        rows.push_back(Json{{"name", name},
                            {"link", std::string(name) == "site-b" ? "wan0" : "wan1"},
                            {"state", "up"},
                            {"srtt_s", 0.0205},
                            {"min_rtt_s", 0.02},
                            {"cwnd_bytes", 1048576},
                            {"pacing_rate_bps", 2e8},
                            {"delivered_bytes", n * 1e6},
                            {"delivered_ip_bytes", n * 5e5},
                            {"packets_sent", n * 100},
                            {"lost_packets", n},
                            {"retransmitted_packets", n * 2},
                            {"transport_drops", {{"malformed", n}, {"duplicate", n}}},
                            {"security_drops", {{"bad_tag", n}}}});
      }
      return rows;
    }
    if (cmd == "links") {
      ++link_calls_;
      const double n = link_calls_;
      return Json::array({Json{{"name", "wan0"},
                               {"backend", "udp"},
                               {"peer", "site-b"},
                               {"tx_bytes", n * 125000},
                               {"rx_bytes", n * 12500},
                               {"tx_full", n},
                               {"tx_errors", 0}},
                          Json{{"name", "wan1"},
                               {"backend", "udp"},
                               {"peer", "site-c"},
                               {"tx_bytes", 0},
                               {"rx_bytes", 0},
                               {"tx_full", 0},
                               {"tx_errors", 0}}});
    }
    if (cmd == "reload") {
      if (reject_) {
        return Json{{"accepted", false},
                    {"errors", Json::array({"/etc/rowan/rowand.toml:3:9: log.level: expected a "
                                            "string, got an integer",
                                            "/etc/rowan/rowand.toml:4:1: unknown key 'log.foo'"})}};
      }
      return Json{{"accepted", true},
                  {"applied", "2 routes (was 2); log level debug"},
                  {"restart_needed", Json::array({"[metrics]"})}};
    }
    throw std::invalid_argument("unknown command '" + cmd + "'");
  }
  void reject(bool r) {
    std::lock_guard<std::mutex> lock(mu_);
    reject_ = r;
  }

 private:
  std::mutex mu_;
  int peer_calls_ = 0;
  int link_calls_ = 0;
  bool reject_ = false;
};

class RowanctlDaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = std::make_unique<ControlServer>(config_for(dir_ / "control.sock"), handler_);
    server_->start();
    ctl_ = rowanctl() + " -s " + server_->path();
  }
  TempDir dir_;
  DaemonHandler handler_;
  std::unique_ptr<ControlServer> server_;
  std::string ctl_;
};

TEST_F(RowanctlDaemonTest, JsonAndPrettyBeforeOrAfterTheSubcommand) {
  int status = -1;
  const std::string after = run(ctl_ + " status -j", &status);
  EXPECT_EQ(status, 0);
  EXPECT_EQ(run(rowanctl() + " -j -s " + server_->path() + " status", &status), after);
  EXPECT_EQ(run(rowanctl() + " --json status -s " + server_->path(), &status), after);
  EXPECT_EQ(status, 0);
  const Json j = Json::parse(after);
  EXPECT_EQ(j["version"], "0.1.0+gtest");
  // -p: the same JSON, indented over several lines.
  for (const std::string& cmd :
       {ctl_ + " -p status", ctl_ + " status -p", ctl_ + " status -j -p"}) {
    const std::string pretty = run(cmd, &status);
    EXPECT_EQ(status, 0) << cmd;
    EXPECT_GT(std::count(pretty.begin(), pretty.end(), '\n'), 5) << cmd;
    EXPECT_EQ(pretty, j.dump(2) + "\n") << cmd;
  }
}

TEST_F(RowanctlDaemonTest, VersionOnEveryBinary) {
  int status = -1;
  const std::string v = run(rowanctl() + " --version", &status);
  EXPECT_EQ(status, 0);
  EXPECT_EQ(v.rfind("rowanctl 0.", 0), 0u) << v;
  for (const char* bin : {"/daemon/rowand/rowand", "/tools/rowan-wanem/rowan-wanem",
                          "/tools/rowan-perf/rowan-perf"}) {
    const std::string path = test::binary_dir() + bin;
    if (!fs::exists(path)) continue;  // not built in this configuration (ROWAN_BUILD_DPDK=OFF)
    const std::string out = run(path + " --version", &status);
    EXPECT_EQ(status, 0) << bin;
    const std::string name = fs::path(bin).filename().string();
    EXPECT_EQ(out.rfind(name + " 0.", 0), 0u) << bin << ": " << out;
  }
}

TEST_F(RowanctlDaemonTest, RoutesAndOnePeer) {
  int status = -1;
  EXPECT_EQ(run(ctl_ + " routes", &status),
            "PREFIX         PEER    MODE\n"
            "198.18.2.0/24  site-b  passthrough\n"
            "198.18.3.0/24  site-c  split\n");
  EXPECT_EQ(status, 0);
  const Json routes = Json::parse(run(ctl_ + " routes --json", &status));
  EXPECT_EQ(status, 0);
  ASSERT_EQ(routes.size(), 2u);
  EXPECT_EQ(routes[1]["mode"], "split");

  const Json peer = Json::parse(run(ctl_ + " peer site-c -j", &status));
  EXPECT_EQ(status, 0);
  EXPECT_EQ(peer["name"], "site-c");
  EXPECT_EQ(peer["link"], "wan1");
  ASSERT_EQ(peer["paths"].size(), 1u);
  EXPECT_EQ(peer["paths"][0]["name"], "wan1");
  EXPECT_EQ(peer["routes"], Json::array({"198.18.3.0/24 split"}));
  const std::string table = run(ctl_ + " peer site-b", &status);
  EXPECT_EQ(status, 0);
  EXPECT_NE(table.find("name "), std::string::npos) << table;
  EXPECT_NE(table.find("srtt_s"), std::string::npos) << table;
  EXPECT_NE(table.find("198.18.2.0/24 passthrough"), std::string::npos) << table;

  const std::string err = run(ctl_ + " peer nobody 2>&1 >/dev/null", &status);
  EXPECT_EQ(status, ctl::kExitError);
  EXPECT_NE(err.find("no peer 'nobody' (peers: site-b, site-c)"), std::string::npos) << err;
  (void)run(ctl_ + " peer 2>/dev/null", &status);
  EXPECT_EQ(status, 64);
}

TEST_F(RowanctlDaemonTest, ReloadReportsAcceptedOrRejected) {
  int status = -1;
  const std::string ok = run(ctl_ + " reload", &status);
  EXPECT_EQ(status, 0);
  EXPECT_EQ(ok,
            "reload accepted: 2 routes (was 2); log level debug\n"
            "not applied, needs a restart: [metrics]\n");
  handler_.reject(true);
  const std::string err = run(ctl_ + " reload 2>&1 >/dev/null", &status);
  EXPECT_EQ(status, ctl::kExitError);
  EXPECT_EQ(err,
            "/etc/rowan/rowand.toml:3:9: log.level: expected a string, got an integer\n"
            "/etc/rowan/rowand.toml:4:1: unknown key 'log.foo'\n"
            "rowanctl: reload rejected; the daemon runs on with its current configuration\n");
  // --json: the result on stdout, and still the exit status of a rejection.
  const Json j = Json::parse(run(ctl_ + " reload --json 2>/dev/null", &status));
  EXPECT_EQ(status, ctl::kExitError);
  EXPECT_EQ(j["accepted"], false);
  EXPECT_EQ(j["errors"].size(), 2u);
}

TEST_F(RowanctlDaemonTest, TopPrintsRatesPerPeerAndPath) {
  int status = -1;
  const std::string out = run(ctl_ + " top --once --interval 0.2 -j", &status);
  EXPECT_EQ(status, 0);
  ASSERT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  const Json f = Json::parse(out);
  const double dt = f["interval_s"].get<double>();
  EXPECT_GE(dt, 0.19);
  EXPECT_LT(dt, 2.0);
  ASSERT_EQ(f["peers"].size(), 2u);
  const Json& b = f["peers"][0];
  EXPECT_EQ(b["name"], "site-b");
  EXPECT_EQ(b["path"], "wan0");
  // One request apart: 1e6 acknowledged bytes, 100 packets sent with 1 lost,
  // 2 retransmitted, 3 datagrams dropped.
  EXPECT_NEAR(b["goodput_bps"].get<double>(), 8e6 / dt, 1);
  EXPECT_NEAR(b["delivered_bps"].get<double>(), 4e6 / dt, 1);
  EXPECT_DOUBLE_EQ(b["loss_ratio"].get<double>(), 0.01);
  EXPECT_EQ(b["retransmitted_packets"], 2);
  EXPECT_EQ(b["drops"], 3);
  EXPECT_DOUBLE_EQ(b["srtt_s"].get<double>(), 0.0205);
  EXPECT_EQ(b["cwnd_bytes"], 1048576);
  ASSERT_EQ(f["paths"].size(), 2u);
  EXPECT_NEAR(f["paths"][0]["tx_bps"].get<double>(), 1e6 / dt, 1);
  EXPECT_EQ(f["paths"][0]["tx_full"], 1);
  EXPECT_EQ(f["paths"][1]["tx_bps"], 0);

  // The table, --count frames of it.
  const std::string text = run(ctl_ + " top --count 2 -i 0.1", &status);
  EXPECT_EQ(status, 0);
  size_t frames = 0;
  for (size_t at = text.find("PEER    PATH"); at != std::string::npos;
       at = text.find("PEER    PATH", at + 1)) {
    ++frames;
  }
  EXPECT_EQ(frames, 2u) << text;
  EXPECT_NE(text.find("site-b  wan0  up"), std::string::npos) << text;
  EXPECT_NE(text.find("1.000%"), std::string::npos) << text;
  EXPECT_NE(text.find("PATH  PEER    BACKEND"), std::string::npos) << text;
  // Nobody there: 69 at once.
  (void)run(rowanctl() + " -s " + (dir_ / "nobody.sock") + " top --once 2>/dev/null", &status);
  EXPECT_EQ(status, 69);
}

TEST(RowanctlTop, CountersThatGoBackwardsCountAsZero) {
  const Json prev{
      {"peers",
       Json::array({Json{
           {"name", "b"}, {"delivered_bytes", 5000}, {"packets_sent", 10}, {"lost_packets", 5}}})},
      {"links", Json::array({Json{{"name", "w"}, {"tx_bytes", 100}}})}};
  const Json cur{{"peers", Json::array({Json{{"name", "b"},
                                             {"delivered_bytes", 1000},
                                             {"packets_sent", 2},
                                             {"lost_packets", 0}},
                                        Json{{"name", "new"}, {"delivered_bytes", 250}}})},
                 {"links", Json::array({Json{{"name", "w"}, {"tx_bytes", 50}}, "junk"})}};
  const ctl::TopFrame f = ctl::compute_top(prev, cur, 0.5);
  ASSERT_EQ(f.peers.size(), 2u);
  EXPECT_EQ(f.peers[0].goodput_bps, 0);
  EXPECT_EQ(f.peers[0].loss_ratio, 0);
  EXPECT_EQ(f.peers[1].goodput_bps, 250 * 8 / 0.5);  // new: counted from zero
  ASSERT_EQ(f.paths.size(), 1u);
  EXPECT_EQ(f.paths[0].tx_bps, 0);
  // Nothing at all: empty, no crash.
  EXPECT_TRUE(ctl::compute_top(Json(), Json(), 0).peers.empty());
  EXPECT_TRUE(ctl::compute_top(Json::array(), Json{{"peers", 3}}, 1).peers.empty());
}

TEST(RowanctlFormat, ValuesByUnitSuffix) {
  EXPECT_EQ(ctl::format_value("rate_bps", 9.5e9), "9.50 Gbit/s");
  EXPECT_EQ(ctl::format_value("rate_bps", 120), "120.00 bit/s");
  EXPECT_EQ(ctl::format_value("queue_bytes", 512), "512 B");
  EXPECT_EQ(ctl::format_value("bytes_in_flight", 2048), "2.0 KiB");
  EXPECT_EQ(ctl::format_value("queue_bytes", 3 * 1048576), "3.0 MiB");
  EXPECT_EQ(ctl::format_value("rtt_s", 0.00025), "250.0 us");
  EXPECT_EQ(ctl::format_value("rtt_s", 1.5), "1.50 s");
  EXPECT_EQ(ctl::format_value("retransmit_ratio", 0.0123), "1.230%");
  EXPECT_EQ(ctl::format_value("packets_total", 12345), "12345");
  EXPECT_EQ(ctl::format_value("x", nullptr), "-");
  EXPECT_EQ(ctl::format_value("links", Json::array({"a", "b"})), "a,b");
  EXPECT_EQ(
      ctl::format_value("routes", Json::array({Json{{"prefix", "198.18.2.0/24"}, {"peer", "b"}},
                                               Json{{"prefix", "198.18.3.0/24"}, {"peer", "c"}}})),
      "198.18.2.0/24 b, 198.18.3.0/24 c");
}

}  // namespace
}  // namespace rowan::gw
