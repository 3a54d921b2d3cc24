// One direction of an emulated long-haul link: the impairments and the
// scheduler that decides when each frame leaves. No I/O, no clock reads: the
// caller passes `now` (read once per burst) and opaque packet handles (DPDK
// mbufs in rowan-wanem, plain structs in the unit tests).
//
// Model (per frame, in this order):
//   link down → drop (link_down)
//   Gilbert–Elliott burst loss → drop (burst_loss); Bernoulli loss → drop (loss)
//   backlog = bytes still waiting for serialization at `rate`;
//     backlog + frame > queue_limit → tail drop (queue_full)
//     backlog >= ecn_threshold and the frame is ECT(0)/ECT(1) → mark CE
//   corruption flips one random bit past the Ethernet header; with
//     corrupt_payload it flips one bit of a UDP/TCP payload instead and
//     fixes the L4 checksum (RFC 1624), so the frame passes every check
//     below the application (frames without such a payload stay intact)
//   departure = max(now, previous departure) + (frame + overhead) × 8 / rate
//   release   = departure + delay ± jitter (uniform); with probability
//               `reorder` the frame skips the delay (it overtakes others)
//   without jitter_reorder, jitter never reorders: release is clamped to be
//   no earlier than the previous frame's.
// The backlog is computed from the last departure time, so it is exact to the
// byte at any `now` and needs no per-frame bookkeeping.
//
// Thread: one thread owns a Direction (rowan-wanem's single forwarding loop,
// which also serves the control socket between bursts). No locks.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/units.h"
#include "rng.h"

namespace rowan::wanem {

struct DirSettings {
  BitsPerSec rate = BitsPerSec::zero();  ///< zero: no rate limit
  Duration delay = Duration::zero();     ///< one-way propagation delay
  Duration jitter = Duration::zero();    ///< uniform in [-jitter, +jitter]
  bool jitter_reorder = false;           ///< let jitter reorder frames (netem without rate)
  double loss = 0;                       ///< Bernoulli loss probability
  double ge_p = 0;                       ///< Gilbert–Elliott good→bad per frame; 0 = off
  double ge_r = 1;                       ///< Gilbert–Elliott bad→good per frame
  double ge_bad_loss = 1;                ///< loss probability in the bad state (1-h)
  double ge_good_loss = 0;               ///< loss probability in the good state (1-k)
  double duplicate = 0;                  ///< probability a frame is sent twice
  double corrupt = 0;                    ///< probability one bit of a frame is flipped
  bool corrupt_payload = false;          ///< flip a UDP/TCP payload bit, fix the checksum
  double reorder = 0;                    ///< probability a frame skips the delay
  Bytes queue_limit = 1 << 20;           ///< tail-drop limit of the rate queue
  Bytes ecn_threshold = 0;               ///< CE-mark ECT frames above this backlog; 0 = off
  Bytes overhead = 0;                    ///< bytes added per frame for serialization
  bool up = true;                        ///< link state
};

enum class DropReason : uint8_t {
  kLinkDown,
  kLoss,
  kBurstLoss,
  kQueueFull,
  kSchedulerFull,
  kTxFull,
  kNoMbuf,
  kCount
};
const char* drop_reason_name(DropReason r);

struct DirCounters {
  uint64_t rx_frames = 0;
  uint64_t rx_bytes = 0;
  uint64_t tx_frames = 0;
  uint64_t tx_bytes = 0;
  std::array<uint64_t, static_cast<size_t>(DropReason::kCount)> drops{};
  uint64_t duplicated = 0;
  uint64_t corrupted = 0;
  uint64_t corrupt_skipped = 0;  ///< chosen for payload corruption but had no UDP/TCP payload
  uint64_t reordered = 0;
  uint64_t ecn_marked = 0;
  uint64_t ecn_not_ect = 0;  ///< over the threshold but not ECN-capable (passed unmarked)
  Bytes queue_max_bytes = 0;
  /// Scheduled delay (queueing + serialization + propagation + jitter) per admitted frame.
  uint64_t delay_count = 0;
  int64_t delay_sum_ns = 0;
  int64_t delay_min_ns = 0;
  int64_t delay_max_ns = 0;
  /// Transmission time minus scheduled release time (the emulator's own error).
  uint64_t late_count = 0;
  int64_t late_sum_ns = 0;
  int64_t late_max_ns = 0;
  int64_t late_min_ns = 0;
  /// Histogram of that error in 1 µs buckets from kLateHistMinUs (both ends clamp).
  static constexpr int kLateHistMinUs = -256;
  static constexpr size_t kLateHistBuckets = 2304;  // up to +2047 µs
  std::array<uint64_t, kLateHistBuckets> late_hist{};
  /// The q-quantile (0..1) of the release error in µs, from the histogram.
  double late_quantile_us(double q) const;

  uint64_t dropped() const {
    uint64_t n = 0;
    for (uint64_t d : drops) n += d;
    return n;
  }
};

/// A scheduled frame.
struct Scheduled {
  int64_t release_ns;
  uint64_t seq;
  void* pkt;
};

class Direction {
 public:
  enum class Verdict : uint8_t { kQueued, kDropped };

  /// `capacity`: the most frames in flight (queued or delayed) at once.
  Direction(size_t capacity, uint64_t seed);

  /// Control path: replaces the settings. A rate change keeps the backlog (in
  /// bytes) that is waiting; frames already scheduled keep their times.
  void configure(const DirSettings& s, TimePoint now);
  const DirSettings& settings() const { return settings_; }

  /// Data path: decides the fate of one frame that arrived at `now`. `data`
  /// and `len` are the frame (it may be modified: ECN CE mark, corruption).
  /// On kDropped the caller frees the frame; `drop_reason` says why. Sets
  /// *duplicate when the caller should admit a copy (with allow_duplicate false).
  Verdict admit(TimePoint now, void* pkt, uint8_t* data, uint32_t len, bool allow_duplicate,
                bool* duplicate, DropReason* drop_reason) noexcept;

  /// Data path: pops up to `max` frames whose release time is <= deadline, in
  /// release order (ties: arrival order). Returns how many.
  size_t release(TimePoint deadline, Scheduled* out, size_t max) noexcept;

  /// Pops every scheduled frame (link going down, shutdown).
  size_t drain(Scheduled* out, size_t max) noexcept;

  /// The earliest scheduled release, or TimePoint::infinite().
  TimePoint next_release() const noexcept;
  size_t in_flight() const noexcept { return fifo_count_ + heap_.size(); }
  /// Bytes waiting for serialization at `now`.
  Bytes backlog(TimePoint now) const noexcept;

  /// Accounting the caller does at transmission time.
  void note_tx(TimePoint now, int64_t release_ns, uint32_t len) noexcept;
  void note_drop(DropReason r) noexcept { ++counters_.drops[static_cast<size_t>(r)]; }

  DirCounters& counters() { return counters_; }
  const DirCounters& counters() const { return counters_; }
  void reset_counters() { counters_ = DirCounters{}; }
  bool ge_bad() const { return ge_bad_; }

 private:
  bool lose(DropReason* reason) noexcept;
  void mark_ce(uint8_t* data, uint32_t len) noexcept;
  bool corrupt_l4_payload(uint8_t* data, uint32_t len) noexcept;
  bool push(const Scheduled& s) noexcept;

  DirSettings settings_;
  Rng rng_;
  DirCounters counters_;
  TimePoint last_depart_ = TimePoint::zero();
  int64_t last_fifo_release_ns_ = 0;
  uint64_t seq_ = 0;
  bool ge_bad_ = false;
  size_t capacity_;
  // In-order frames: a ring (release times are non-decreasing).
  std::vector<Scheduled> fifo_;
  size_t fifo_head_ = 0;
  size_t fifo_count_ = 0;
  // Frames released earlier than the FIFO tail (reordering): a binary min-heap
  // with fixed capacity (reserved up front; never reallocates).
  std::vector<Scheduled> heap_;
};

/// True when a's release precedes b's (release time, then arrival order).
inline bool sched_before(const Scheduled& a, const Scheduled& b) {
  return a.release_ns != b.release_ns ? a.release_ns < b.release_ns : a.seq < b.seq;
}

}  // namespace rowan::wanem
