// A reload asked for over the control socket, answered with its result.
//
// The packet loop owns the gateway, so it performs every reload (SIGHUP or
// `{"cmd":"reload"}`); the control thread that asked waits here until the
// loop has tried and then answers the client with what happened: accepted
// (and what was applied, and what needs a restart) or rejected with the same
// `FILE:LINE:COL: message` lines `rowand --check-config` prints.
//
// Threading: request() on the control thread (it blocks), take_pending() and
// finish() on the packet-loop thread. A mutex guards the state: neither side
// is on a per-packet path (the loop checks once per pass, through an atomic).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace rowan::gw {

/// The outcome of one reload attempt.
struct ReloadResult {
  bool accepted = false;
  std::vector<std::string> errors;          ///< rejected: FILE:LINE:COL: message, as the check
  std::vector<std::string> restart_needed;  ///< accepted: sections kept as they run ("[eal]")
  std::string applied;                      ///< accepted: what changed ("2 routes (was 1); ...")

  /// The control socket's reply: {"accepted":..., "applied":..., "restart_needed":[...],
  /// "errors":[...]}.
  nlohmann::ordered_json to_json() const {
    nlohmann::ordered_json j{{"accepted", accepted}};
    if (accepted) {
      j["applied"] = applied;
      j["restart_needed"] = restart_needed;
    } else {
      j["errors"] = errors;
    }
    return j;
  }
};

class ReloadRequests {
 public:
  /// Control thread: asks for a reload and waits up to `timeout` for its
  /// result. A reload that starts after this call (SIGHUP or another client's)
  /// answers it too. nullopt on timeout (the loop is stuck or stopping).
  std::optional<ReloadResult> request(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    const uint64_t want = ++requested_;
    pending_.store(true, std::memory_order_release);
    if (!cv_.wait_for(lock, timeout, [&] { return done_ >= want; })) return std::nullopt;
    return last_;
  }

  /// Packet loop: true (once) when a client asked for a reload since the last
  /// take. One atomic exchange per loop pass; the counters stay under the mutex.
  bool take_pending() { return pending_.exchange(false, std::memory_order_acq_rel); }

  /// Packet loop: the result of the reload it just made (for whatever reason).
  /// Every request made before the reload started is answered with it.
  void finish(ReloadResult result) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      last_ = std::move(result);
      done_ = started_;
    }
    cv_.notify_all();
  }

  /// Packet loop: call just before reading the file, so requests made from
  /// here on wait for the next reload (their caller may have edited the file
  /// since).
  void start() {
    std::lock_guard<std::mutex> lock(mu_);
    started_ = requested_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<bool> pending_{false};
  uint64_t requested_ = 0;  ///< requests made so far
  uint64_t started_ = 0;    ///< requests the reload in progress answers
  uint64_t done_ = 0;       ///< requests answered
  ReloadResult last_;
};

}  // namespace rowan::gw
