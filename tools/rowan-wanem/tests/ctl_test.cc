// `rowan-wanem ctl`'s command line: each subcommand becomes its request, and
// bad command lines are usage errors (64) with a message, never a request.
#include <gtest/gtest.h>

#include <initializer_list>
#include <sstream>
#include <string>
#include <vector>

#include "ctl.h"

namespace rowan::wanem {
namespace {

using nlohmann::json;

struct Parsed {
  std::optional<CtlRequest> req;
  int status = -1;
  std::string err;
};

Parsed parse(std::initializer_list<const char*> words) {
  std::vector<std::string> store{"rowan-wanem ctl"};
  store.insert(store.end(), words.begin(), words.end());
  std::vector<char*> argv;
  for (auto& s : store) argv.push_back(s.data());
  std::ostringstream out, err;
  Parsed p;
  p.req = parse_ctl(static_cast<int>(argv.size()), argv.data(), out, err, &p.status);
  p.err = err.str() + out.str();
  return p;
}

TEST(WanemCtl, SubcommandsBuildTheirRequests) {
  auto p = parse({"/tmp/w.sock", "get"});
  ASSERT_TRUE(p.req) << p.err;
  EXPECT_EQ(p.req->socket, "/tmp/w.sock");
  EXPECT_EQ(p.req->request, (json{{"cmd", "get"}}));
  EXPECT_EQ(parse({"s", "reset"}).req->request, (json{{"cmd", "reset_stats"}}));
  EXPECT_EQ(parse({"s", "quit"}).req->request, (json{{"cmd", "quit"}}));
  p = parse({"s", "set", "rate=100mbit", "a2b.loss=1%"});
  ASSERT_TRUE(p.req) << p.err;
  EXPECT_EQ(p.req->request,
            (json{{"cmd", "set"}, {"settings", {{"rate", "100mbit"}, {"a2b.loss", "1%"}}}}));
  p = parse({"s", "flap", "2s"});
  ASSERT_TRUE(p.req) << p.err;
  EXPECT_EQ(p.req->request, (json{{"cmd", "flap"}, {"dir", "both"}, {"for", "2s"}}));
  p = parse({"s", "flap", "a2b", "2s", "500ms"});
  ASSERT_TRUE(p.req) << p.err;
  EXPECT_EQ(p.req->request,
            (json{{"cmd", "flap"}, {"dir", "a2b"}, {"for", "2s"}, {"in", "500ms"}}));
  p = parse({"s", "link", "down", "b2a"});
  ASSERT_TRUE(p.req) << p.err;
  EXPECT_EQ(p.req->request, (json{{"cmd", "link"}, {"state", "down"}, {"dir", "b2a"}}));
  EXPECT_EQ(parse({"s", "link", "up"}).req->request,
            (json{{"cmd", "link"}, {"state", "up"}, {"dir", "both"}}));
  p = parse({"s", "raw", R"({"cmd":"get","x":1})"});
  ASSERT_TRUE(p.req) << p.err;
  EXPECT_EQ(p.req->request, (json{{"cmd", "get"}, {"x", 1}}));
}

TEST(WanemCtl, BadCommandLinesAreUsageErrors) {
  for (auto words : std::vector<std::vector<const char*>>{
           {},
           {"s"},
           {"s", "frobnicate"},
           {"s", "set"},
           {"s", "set", "=1"},
           {"s", "set", "rate"},
           {"s", "flap"},
           {"s", "flap", "a2b"},
           {"s", "flap", "a2b", "1s", "2s", "3s"},
           {"s", "link"},
           {"s", "link", "sideways"},
           {"s", "link", "up", "north"},
           {"s", "raw"},
           {"s", "raw", "{not json"},
           {"s", "raw", "[1]"},
       }) {
    std::vector<std::string> store{"rowan-wanem ctl"};
    store.insert(store.end(), words.begin(), words.end());
    std::vector<char*> argv;
    for (auto& s : store) argv.push_back(s.data());
    std::ostringstream out, err;
    int status = -1;
    const auto req = parse_ctl(static_cast<int>(argv.size()), argv.data(), out, err, &status);
    std::string line;
    for (auto* w : words) line += std::string(w) + " ";
    EXPECT_FALSE(req) << line;
    EXPECT_EQ(status, 64) << line;
    EXPECT_FALSE(err.str().empty()) << line;
  }
  EXPECT_FALSE(parse({"--help"}).req);
  EXPECT_EQ(parse({"--help"}).status, 0);
}

}  // namespace
}  // namespace rowan::wanem
