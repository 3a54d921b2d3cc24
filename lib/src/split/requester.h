// The egress side of split mode: an RC requester toward the remote responder
// (IBA vol. 1 ch. 9.7.1-9.7.3 and 9.9 "requester side behaviour"; Linux
// rxe_req.c / rxe_comp.c).
//
// The peer gateway has already acknowledged these packets to the original
// requester, so this side owns them: it keeps a copy of every request packet
// (with its original PSN) until the remote host acknowledges it, transmits
// in PSN order, and retransmits go-back-N from the NAKed PSN on a
// NAK-sequence-error, when its own timer runs out (RFC 6298 estimator over
// the local round trips of packets sent once, at least `rto`; exponential
// back-off, at most `max_retries` times without progress), and after the RNR
// NAK's timer (IBA table 45) on an RNR NAK. A timeout first resends only the
// oldest unacknowledged packet, as TCP does on an RTO (RFC 5681 3.1): a
// responder that was merely slow answers the duplicate with an ACK of how far
// it got, and a lost packet before others would have drawn a NAK; only a
// second timeout without progress goes back N from the oldest. (A slow soft-RoCE
// responder under load made the timer fire on 77 of 120 64 KiB SENDs, and
// every whole-window resend added to its backlog: 3202 packets resent for
// 7609.) A
// fatal NAK (invalid request, remote access or operational error) or
// exhausted retries is reported to the caller, which fails the flow toward
// the original requester.
//
// ACKs are cumulative: an ACK for PSN p frees every packet whose last PSN is
// ≤ p. READ responses and atomic ACKs acknowledge what came before them. A
// READ request consumes one PSN per response packet (its span).
//
// Memory: the packets held are in a SlotPool (fixed-size slots, allocated
// once). A split engine gives all its requesters one pool sized at start-up,
// so memory follows the packets held, not the flows; a Requester built
// without one owns a pool of `slots` slots. Its own window is a ring of
// `slots` slot numbers (4 bytes each), allocated at construction; start(),
// configure() and clear() reuse it. Nothing is allocated per packet or per
// flow start. Times are passed in. Single-threaded: the packet lcore only.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "base/units.h"
#include "split/opcodes.h"

namespace rowan::split {

struct RequesterConfig {
  uint32_t slots = 1024;                ///< packets held (the window toward the remote host)
  uint32_t slot_bytes = 4200;           ///< largest packet stored (IP packet, local MTU)
  uint32_t pmtu = 1024;                 ///< path MTU toward the remote host (READ spans)
  Duration rto = Duration::from_ms(4);  ///< the smallest retransmission timeout
  /// The timeout before the first round-trip sample (zero: `rto`). A
  /// responder that takes longer than `rto` for its first messages (a soft
  /// RNIC on a busy host) would otherwise see its first window resent whole
  /// (RFC 6298 starts at 1 s for the same reason).
  Duration initial_rto = Duration::zero();
  Duration max_rto = Duration::from_ms(500);
  /// A timeout goes back N (resends everything in flight) only after this
  /// long without progress; sooner ones probe with the oldest packet alone.
  /// A responder that is only slow (a soft RNIC whose vCPU was off the CPU
  /// for tens of ms) answers a probe with its progress, where going back N
  /// would queue a window of duplicates behind its backlog. A lost packet
  /// is NAKed by the responder at the next one, and the probe resends the
  /// oldest: only a lost tail waits this long. Zero: after kProbes probes.
  /// The default is about the ACK timeout RoCE requesters run with (IBA
  /// local ACK timeout 14: 67 ms): never more eager than the requester.
  Duration go_back_after = Duration::from_ms(64);
  uint32_t max_retries = 7;     ///< timeouts / repeated NAKs without progress
  uint32_t max_inflight = 128;  ///< packets sent and not yet acknowledged (go-back-N bursts
                                ///< too): rxe's own window (RXE_MAX_UNACKED_PSNS), so the
                                ///< responder sees what the original requester would send,
                                ///< and asks for an ACK as rarely (every 64 packets and at a
                                ///< message's end). At 64, gateway B waited on the
                                ///< responder's ACK for half of a soft-RoCE run and made it
                                ///< send 2-3 times as many ACKs.
};

/// Packet slots for requesters: `slots` of `slot_bytes`, each with its
/// packet's record, all allocated at construction. Single-threaded.
class SlotPool {
 public:
  SlotPool(uint32_t slots, uint32_t slot_bytes);
  uint32_t capacity() const { return static_cast<uint32_t>(entries_.size()); }
  uint32_t available() const { return static_cast<uint32_t>(free_.size()); }
  uint32_t slot_bytes() const { return slot_bytes_; }
  /// Pushes that found no free slot (their requester's window had room).
  uint64_t exhausted() const { return exhausted_; }
  /// Bytes allocated (records, packet bytes, free list).
  uint64_t memory_bytes() const {
    return uint64_t{capacity()} * (sizeof(Entry) + slot_bytes_ + sizeof(uint32_t));
  }

 private:
  friend class Requester;
  struct Entry {
    uint32_t psn = 0;
    uint32_t span = 1;
    uint32_t len = 0;
    uint8_t opcode = 0;
    bool sent = false;  ///< transmitted at least once
    bool retransmitted = false;
    TimePoint sent_at;  ///< last transmission
  };
  static constexpr uint32_t kNone = UINT32_MAX;
  uint32_t take() noexcept;
  void give(uint32_t slot) noexcept { free_.push_back(slot); }  // never past capacity
  uint8_t* bytes(uint32_t slot) noexcept {
    return storage_.get() + static_cast<size_t>(slot) * slot_bytes_;
  }
  uint32_t slot_bytes_;
  std::vector<Entry> entries_;
  /// Left uninitialized: the kernel backs its pages once packets use them,
  /// so a large pool costs address space at start-up, memory as it fills.
  std::unique_ptr<uint8_t[]> storage_;
  std::vector<uint32_t> free_;  ///< a stack; reserved for every slot
  uint64_t exhausted_ = 0;
};

enum class PushResult : uint8_t {
  kStored,     ///< held; next_transmit() hands it out
  kDuplicate,  ///< PSN before the window: deliver it as it is, do not hold it
  kFull,       ///< no slot (its window, or the shared pool): try again after ACKs
  kTooLarge,   ///< larger than a slot
};

enum class Event : uint8_t {
  kNone,
  kFatal,          ///< a fatal NAK: fatal_syndrome() says which
  kRetryExceeded,  ///< the remote host stopped answering
};

struct RequesterStats {
  uint64_t pushed = 0;
  uint64_t transmitted = 0;
  uint64_t retransmitted = 0;
  uint64_t acked = 0;  ///< packets freed
  uint64_t seq_naks = 0;
  uint64_t rnr_naks = 0;
  uint64_t fatal_naks = 0;
  uint64_t timeouts = 0;
};

class Requester {
 public:
  /// With a pool of its own (`cfg.slots` slots of `cfg.slot_bytes`).
  explicit Requester(const RequesterConfig& cfg = {});
  /// Holding its packets in `pool` (which outlives it; `cfg.slot_bytes` is
  /// the pool's).
  Requester(const RequesterConfig& cfg, SlotPool& pool);

  /// Takes a new configuration for the next start() (at most the window
  /// it was built with; a control-path step when a flow is paired, no
  /// allocation). Gives back what it held.
  void configure(const RequesterConfig& cfg) noexcept;
  /// Starts the window at `next_psn`, the first PSN this side will own
  /// (gives back what it held).
  void start(uint32_t next_psn) noexcept;
  /// Gives every held packet back to the pool (the flow is released).
  void clear() noexcept;

  /// A request packet (`opcode`, `psn`, READ `dma_len`) from the peer
  /// gateway, in PSN order.
  PushResult push(std::span<const uint8_t> pkt, uint8_t opcode, uint32_t psn, uint32_t dma_len,
                  TimePoint now) noexcept;

  /// The next packet to send to the remote host at `now`, if any (a
  /// timeout's probe, new packets and go-back retransmissions, not during an
  /// RNR wait). The span
  /// stays valid until the next push/on_* call.
  bool next_transmit(TimePoint now, std::span<const uint8_t>* pkt) noexcept;

  /// An ACK / RNR NAK / NAK (AETH `syndrome`) for `psn` from the remote host.
  Event on_aeth(uint32_t psn, uint8_t syndrome, TimePoint now) noexcept;
  /// A READ response or atomic ACK from the remote host (carried on to the
  /// original requester by the caller).
  void on_response(uint8_t opcode, uint32_t psn, TimePoint now) noexcept;

  /// Timers (retransmission). Returns kRetryExceeded when giving up.
  Event poll(TimePoint now) noexcept;
  /// When poll() or next_transmit() must run next.
  TimePoint next_timeout() const noexcept;

  /// The path MTU toward the remote host (READ spans), once learnt.
  void set_pmtu(uint32_t pmtu) noexcept { cfg_.pmtu = pmtu; }

  bool full() const { return count_ == slots_ || pool_->available() == 0; }
  /// Bytes it allocated itself (its window's ring, and its own pool if any).
  uint64_t memory_bytes() const {
    return ring_.size() * sizeof(uint32_t) + (own_ ? own_->memory_bytes() : 0);
  }
  /// Whether `n` more packets fit (window and pool).
  bool room_for(uint32_t n) const { return count_ + n <= slots_ && pool_->available() >= n; }
  uint32_t in_window() const { return count_; }
  /// Packets sent and not yet acknowledged (of at most `max_inflight`).
  uint32_t in_flight() const { return send_; }
  uint32_t max_inflight() const { return cfg_.max_inflight; }
  /// Whether the packet next_transmit() handed out last was a timeout's probe.
  bool last_was_probe() const { return last_probe_; }
  /// Timeouts without progress answered by a probe before going back N
  /// (at least; see RequesterConfig::go_back_after).
  static constexpr uint32_t kProbes = 2;
  uint64_t bytes_held() const { return bytes_; }
  uint32_t start_psn() const { return start_psn_; }
  uint32_t next_psn() const { return next_psn_; }
  /// The oldest PSN not yet acknowledged by the remote host (next_psn()
  /// when nothing is held).
  uint32_t oldest_psn() const { return count_ > 0 ? at(0).psn : next_psn_; }
  /// Gives the flow up without a word from the remote host (the peer
  /// gateway restarted, so the request stream has a hole): nothing more is
  /// sent, failed() holds from now on with `syndrome`.
  void abandon(uint8_t syndrome) noexcept {
    failed_ = true;
    fatal_syndrome_ = syndrome;
    timer_ = TimePoint::infinite();
  }
  bool failed() const { return failed_; }
  uint8_t fatal_syndrome() const { return fatal_syndrome_; }
  Duration srtt() const { return srtt_; }
  Duration rto() const { return rto_cur_; }
  const RequesterStats& stats() const { return stats_; }

 private:
  using Entry = SlotPool::Entry;
  uint32_t slot(uint32_t i) const { return ring_[(head_ + i) % slots_]; }
  Entry& at(uint32_t i) { return pool_->entries_[slot(i)]; }
  const Entry& at(uint32_t i) const { return pool_->entries_[slot(i)]; }
  uint32_t last_psn(const Entry& e) const { return roce::psn_add(e.psn, e.span - 1); }
  /// Frees entries whose last PSN is before (`inclusive`: up to) `psn`.
  bool free_through(uint32_t psn, bool inclusive, TimePoint now) noexcept;
  void go_back() noexcept;
  Duration first_rto() const noexcept { return std::max(cfg_.rto, cfg_.initial_rto); }

  RequesterConfig cfg_;
  uint32_t slots_;
  std::unique_ptr<SlotPool> own_;  ///< built without a shared pool
  SlotPool* pool_;
  std::vector<uint32_t> ring_;  ///< the window: pool slots, from head_
  uint32_t head_ = 0;
  uint32_t count_ = 0;
  uint32_t send_ = 0;  ///< index (from head) of the next entry to transmit
  uint64_t bytes_ = 0;
  uint32_t start_psn_ = 0;
  uint32_t next_psn_ = 0;
  bool started_ = false;
  bool failed_ = false;
  uint8_t fatal_syndrome_ = 0;
  uint32_t retries_ = 0;
  bool probe_ = false;  ///< a timeout asks for the oldest packet to be resent alone
  bool last_probe_ = false;
  Duration rto_base_;  ///< from the RTT estimate
  Duration rto_cur_;   ///< with back-off
  Duration srtt_;
  Duration rttvar_;
  TimePoint timer_ =
      TimePoint::infinite();  ///< retransmission deadline (armed when sent data waits)
  TimePoint rnr_until_;
  TimePoint waiting_since_;  ///< the last progress, or the first send since none was in flight
  RequesterStats stats_;
};

}  // namespace rowan::split
