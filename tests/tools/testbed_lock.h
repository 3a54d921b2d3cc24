// One two-site testbed per machine: every test (and person) that brings one
// up holds an exclusive flock on /run/rowan/testbed.lock for the whole
// up … down sequence (see scripts/two-site).
#pragma once

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <thread>

namespace rowan::test {

class TestbedLock {
 public:
  /// Waits up to `max_wait` for the lock; held() says whether it was taken.
  explicit TestbedLock(std::chrono::seconds max_wait = std::chrono::seconds(300)) {
    mkdir("/run/rowan", 0755);
    fd_ = open("/run/rowan/testbed.lock", O_CREAT | O_RDWR | O_CLOEXEC, 0644);
    if (fd_ < 0) return;
    const auto deadline = std::chrono::steady_clock::now() + max_wait;
    while (flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        close(fd_);
        fd_ = -1;
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  ~TestbedLock() {
    if (fd_ >= 0) close(fd_);
  }
  TestbedLock(const TestbedLock&) = delete;
  TestbedLock& operator=(const TestbedLock&) = delete;
  bool held() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

}  // namespace rowan::test
