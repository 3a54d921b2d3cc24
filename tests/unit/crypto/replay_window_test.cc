// RFC 6479 anti-replay window.
#include "crypto/replay_window.h"

#include <gtest/gtest.h>

namespace rowan::crypto {
namespace {

using R = ReplayWindow::Result;

TEST(ReplayWindow, AcceptsOnceRejectsReplayAndStale) {
  ReplayWindow w;
  EXPECT_EQ(w.update(0), R::kOk);
  EXPECT_EQ(w.update(0), R::kReplay);
  EXPECT_EQ(w.update(5), R::kOk);
  EXPECT_EQ(w.update(3), R::kOk);  // reordered, inside the window
  EXPECT_EQ(w.update(3), R::kReplay);
  EXPECT_EQ(w.check(4), R::kOk);
  EXPECT_EQ(w.update(10000), R::kOk);
  EXPECT_EQ(w.check(4), R::kStale);
  EXPECT_EQ(w.check(10000 - ReplayWindow::kWindow), R::kStale);
  EXPECT_EQ(w.update(10000 - ReplayWindow::kWindow + 1), R::kOk);
  EXPECT_EQ(w.update(10000 - ReplayWindow::kWindow + 1), R::kReplay);
  EXPECT_EQ(w.update(9999), R::kOk);
}

TEST(ReplayWindow, SlidingClearsRecycledWords) {
  ReplayWindow w;
  for (uint64_t c = 0; c < 5000; c += 2) ASSERT_EQ(w.update(c), R::kOk) << c;
  // Every odd counter still inside the window is new; every even one a replay.
  for (uint64_t c = 4998 - ReplayWindow::kWindow + 1; c < 4998; ++c) {
    EXPECT_EQ(w.check(c), c % 2 == 0 ? R::kReplay : R::kOk) << c;
  }
  // A jump larger than the ring clears everything.
  EXPECT_EQ(w.update(1000000), R::kOk);
  EXPECT_EQ(w.check(999999), R::kOk);
  EXPECT_EQ(w.check(1000000), R::kReplay);
}

}  // namespace
}  // namespace rowan::crypto
