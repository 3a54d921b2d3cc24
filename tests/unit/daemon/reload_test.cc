// ReloadRequests: a control-socket reload waits for the packet loop's attempt
// and gets its result; a request made while a reload runs waits for the next
// one (its file may have changed since); nobody waits forever.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <thread>

#include "control/reload.h"

namespace rowan::gw {
namespace {

using namespace std::chrono_literals;

// Waits (bounded) until the loop side sees a request.
bool wait_pending(ReloadRequests& r) {
  for (int i = 0; i < 2000; ++i) {
    if (r.take_pending()) return true;
    std::this_thread::sleep_for(1ms);
  }
  return false;
}

TEST(ReloadRequests, TheRequesterGetsTheLoopsResult) {
  ReloadRequests r;
  EXPECT_FALSE(r.take_pending());
  auto client = std::async(std::launch::async, [&] { return r.request(5s); });
  ASSERT_TRUE(wait_pending(r));
  r.start();
  ReloadResult rejected;
  rejected.errors = {"f.toml:3:9: log.level: 'x' is not trace, debug, info, warn or error"};
  r.finish(rejected);
  const auto got = client.get();
  ASSERT_TRUE(got.has_value());
  EXPECT_FALSE(got->accepted);
  EXPECT_EQ(got->errors, rejected.errors);
  EXPECT_EQ(got->to_json()["accepted"], false);
  EXPECT_EQ(got->to_json()["errors"][0], rejected.errors[0]);
  EXPECT_FALSE(r.take_pending());
}

TEST(ReloadRequests, ARequestDuringAReloadWaitsForTheNextOne) {
  ReloadRequests r;
  auto first = std::async(std::launch::async, [&] { return r.request(5s); });
  ASSERT_TRUE(wait_pending(r));
  r.start();  // the loop reads the file now; a request from here on needs another read
  auto second = std::async(std::launch::async, [&] { return r.request(5s); });
  ASSERT_TRUE(wait_pending(r));
  ReloadResult old;
  old.errors = {"old"};
  r.finish(old);
  const auto a = first.get();
  ASSERT_TRUE(a);
  EXPECT_EQ(a->errors, old.errors);
  EXPECT_EQ(second.wait_for(50ms), std::future_status::timeout) << "answered by the old reload";
  r.start();
  ReloadResult ok;
  ok.accepted = true;
  ok.applied = "1 routes (was 1)";
  ok.restart_needed = {"[eal]"};
  r.finish(ok);
  const auto b = second.get();
  ASSERT_TRUE(b);
  EXPECT_TRUE(b->accepted);
  EXPECT_EQ(b->to_json()["restart_needed"][0], "[eal]");
  EXPECT_EQ(b->to_json()["applied"], "1 routes (was 1)");
}

TEST(ReloadRequests, TimesOutWhenTheLoopNeverAnswers) {
  ReloadRequests r;
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(r.request(100ms).has_value());
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 100ms);
  EXPECT_TRUE(r.take_pending());
}

}  // namespace
}  // namespace rowan::gw
