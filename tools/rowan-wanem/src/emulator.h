// The two directions of the emulated link plus everything the control socket
// can change: settings by key, link state, flap schedules, counters. JSON in,
// JSON out (nlohmann-json); no I/O and no clock reads (`now` is passed in).
//
// Setting keys (a value applies to both directions unless the key carries a
// direction prefix, "a2b." or "b2a."):
//   rate delay jitter jitter_reorder loss ge_p ge_r ge_bad_loss ge_good_loss
//   duplicate corrupt reorder queue ecn_threshold overhead link
//
// Thread: owned by the forwarding loop; control requests are handled between
// bursts on the same thread, so nothing here needs a lock.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/units.h"
#include "link.h"

namespace rowan::wanem {

enum Dir : uint8_t { kA2B = 0, kB2A = 1 };
inline constexpr uint8_t kDirMaskBoth = 0x3;
const char* dir_name(int d);

/// Parses "a2b", "b2a" or "both" into a mask (bit 0: a2b, bit 1: b2a).
uint8_t parse_dir_mask(const std::string& s);

/// Applies one `key=value` (key without a direction prefix) to `s`. Throws
/// ParseError for an unknown key or a bad value.
void apply_setting(DirSettings& s, const std::string& key, const std::string& value);
nlohmann::json settings_to_json(const DirSettings& s);

/// A link state change at a given time.
struct LinkEvent {
  int64_t at_ns;
  uint8_t dirs;
  bool up;
};

/// What the forwarding loop reports about its own sleeping and timing.
struct LoopStats {
  uint64_t sleeps = 0;
  uint64_t timeouts = 0;
  uint64_t forced_sleeps = 0;  ///< SCHED_FIFO run-budget pauses (sustained load)  ///< sleeps ended
                               ///< by the timer (not by a frame or a request)
  int64_t slept_ns = 0;
  int64_t overshoot_sum_ns = 0;  ///< timer wake-ups: how late after the asked time
  int64_t overshoot_max_ns = 0;
  int64_t margin_ns = 0;  ///< current spin margin (adapted to the overshoot)
  uint64_t stamped = 0;   ///< frames timestamped by the kernel while the loop slept
  int64_t stamp_correction_sum_ns = 0;
  int64_t stamp_correction_max_ns = 0;
};

class Emulator {
 public:
  Emulator(size_t capacity_per_dir, uint64_t seed);

  Direction& dir(int d) { return dirs_[static_cast<size_t>(d)]; }
  const Direction& dir(int d) const { return dirs_[static_cast<size_t>(d)]; }

  /// Applies "key=value" pairs (optionally prefixed by a2b./b2a.) atomically:
  /// either every pair is valid and applied, or none is and ParseError is thrown.
  void set(const std::vector<std::pair<std::string, std::string>>& kv, TimePoint now);

  /// Schedules a flap: the links in `dirs` go down at now+in and up `length` later.
  void flap(uint8_t dirs, Duration in, Duration length, TimePoint now);
  /// A periodic flap: down for `length` every `period`, first at now+period.
  void flap_every(Duration period, Duration length, uint8_t dirs, TimePoint now);
  /// Applies every scheduled link event due at `now`.
  void run_schedule(TimePoint now);
  /// The time of the next scheduled link event, or infinite.
  TimePoint next_event() const;

  /// Handles one control request (a parsed JSON object) and returns the reply.
  /// Sets *quit when the request asks the emulator to exit.
  nlohmann::json handle(const nlohmann::json& req, TimePoint now, bool* quit);

  nlohmann::json stats_json(TimePoint now) const;
  nlohmann::json settings_json() const;
  std::string stats_text(TimePoint now) const;

  void set_start(TimePoint t) { start_ = t; }
  LoopStats& loop_stats() { return loop_; }
  /// Control path: a source of per-port counters (the DPDK ports' own), shown
  /// under "ports" in the stats.
  void set_port_stats(std::function<nlohmann::json()> f) { port_stats_ = std::move(f); }

 private:
  void set_link(uint8_t dirs, bool up, TimePoint now);
  void add_flap(uint8_t dirs, TimePoint down_at, Duration length);

  std::array<Direction, 2> dirs_;
  std::vector<LinkEvent> events_;  // sorted by time (control path only)
  Duration period_ = Duration::zero();
  Duration period_down_ = Duration::zero();
  uint8_t period_dirs_ = kDirMaskBoth;
  TimePoint next_period_ = TimePoint::infinite();
  TimePoint start_ = TimePoint::zero();
  uint64_t flaps_ = 0;
  LoopStats loop_;
  std::function<nlohmann::json()> port_stats_;
};

}  // namespace rowan::wanem
