// The ingress side of split mode: an RC responder toward the local requester
// (IBA vol. 1 ch. 9.7.4-9.7.5, "responder side behaviour"; Linux rxe_resp.c).
//
// It accepts SEND and RDMA WRITE packets in PSN order once the gateway has
// room for them (the caller carries them to the peer gateway), and answers
// with ACKs carrying the responder's MSN: coalesced, at once when the packet
// asks for one (AckReq) or after `ack_every` packets, otherwise after
// `ack_delay`. An out-of-sequence PSN gets one NAK-sequence-error per episode
// (again after `nak_retry` if the requester does not come back); a duplicate
// gets the current ACK again. READ and atomic requests are forwarded: their
// responses come from the remote host, and no ACK goes past them until their
// response has passed the gateway (an ACK beyond an outstanding READ would
// tell the requester the response was lost); an out-of-sequence PSN behind an
// outstanding READ is NAKed once the READ's last response has passed.
//
// A flow paired mid-stream starts with a "base" PSN: packets before it were
// carried in passthrough and are acknowledged by the remote host. Until a
// relayed ACK covers the base, the responder neither ACKs nor NAKs (either
// would acknowledge passthrough packets the remote host may not have), and
// retransmissions below the base are forwarded again. A packet it drops
// meanwhile (out of sequence, or no room) is NAKed as soon as the base is
// confirmed, so the requester does not wait for its ACK timeout.
//
// Back-pressure without drops: an ACK opens the requester's window, and a
// requester whose window is open sends it whole. When the gateway tells it
// (set_short_of_room) that it could not take another window's worth, the
// responder holds its ACKs, so the requester waits on its window instead of
// sending packets that would be dropped and NAKed (a go-back-N of up to a
// window each time: seen on the testbed with 4 KiB packets, 1929 requests
// dropped in two 60 MiB runs while the remote host was slower than the
// local one). A held ACK goes as soon as there is room, and at the latest
// `hold_max` after it was first held: never near the requester's ACK timeout.
// The window is estimated as the widest span of PSNs seen past the last ACK.
//
// State: PSNs are 24-bit (mod 2^24), MSN 24-bit, times are TimePoints passed
// in by the caller. No allocation after construction. Single-threaded: the
// packet lcore only.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>

#include "base/units.h"
#include "split/opcodes.h"

namespace rowan::split {

struct ResponderConfig {
  uint32_t pmtu = 1024;  ///< path MTU toward the requester (READ spans)
  /// ACK at least every N accepted packets: half of rxe's 128-PSN window,
  /// and as often as rxe asks for one itself (AckReq every 64 packets and at
  /// each message's end, answered at once), so a soft-RoCE requester gets no
  /// ACK it did not ask for. Every ACK costs the requester's host a received
  /// packet, which on soft-RoCE hosts is CPU time taken from the data: at 32
  /// gateway A sent 2.6 ACKs per 64 KiB message instead of 1, and split
  /// `ib_write_bw` carried 10 % less (docs/split-mode.md).
  uint32_t ack_every = 64;
  /// Packets without AckReq are acknowledged when the requester pauses for
  /// `ack_delay` (an idle timer, restarted by every accepted packet), and at
  /// the latest `ack_max_delay` after the first of them: a slow host's stream
  /// (a soft-RoCE guest sends a packet every ~300 us) is coalesced instead of
  /// acknowledged packet by packet, and no ACK waits long against any
  /// requester's ACK timeout (IBA 4.096 us x 2^timeout: 67 ms at rxe's and
  /// perftest's default of 14).
  Duration ack_delay = Duration::from_ms(1);
  Duration ack_max_delay = Duration::from_ms(8);
  Duration nak_retry = Duration::from_us(500);    ///< re-NAK when the requester does not go back
  Duration cnp_interval = Duration::from_us(50);  ///< at most one CNP per interval (DCQCN)
  /// The longest an ACK is held while the gateway is short of room (zero:
  /// never held), and how often the room is looked at again meanwhile.
  Duration hold_max = Duration::from_ms(32);
  Duration hold_recheck = Duration::from_us(250);
};

/// A request as the responder needs it.
struct Request {
  uint8_t opcode = 0;
  uint32_t psn = 0;
  bool ack_req = false;
  uint32_t dma_len = 0;  ///< READ: RETH DMA length
};

/// What the caller does with the request packet.
enum class Verdict : uint8_t {
  kCarry,  ///< new: carry it to the peer gateway (in order)
  kDrop,   ///< out of sequence, no room, a duplicate already answered, or failed
};

/// What the caller sends back to the requester (after carrying the packet).
struct Reply {
  bool send = false;
  uint8_t syndrome = 0;  ///< AETH syndrome (ACK, RNR NAK or NAK)
  uint32_t psn = 0;
  uint32_t msn = 0;
  bool cnp = false;  ///< also send a CNP to the requester's QP
};

struct ResponderStats {
  uint64_t accepted = 0;
  uint64_t forwarded = 0;  ///< READ / atomic requests
  uint64_t duplicates = 0;
  uint64_t out_of_sequence = 0;
  uint64_t no_room = 0;
  uint64_t acks = 0;
  uint64_t naks = 0;
  uint64_t cnps = 0;
  uint64_t failed_requests = 0;
  uint64_t fatal_relayed = 0;  ///< fatal NAKs relayed to the requester at once (fail_at)
  uint64_t acks_held = 0;      ///< times an ACK was held for room (episodes)
  uint64_t holds_expired = 0;  ///< held ACKs that went after hold_max without room
};

class Responder {
 public:
  static constexpr uint32_t kMaxReads = 16;  ///< IBA max_rd_atomic

  Responder() = default;
  explicit Responder(const ResponderConfig& cfg) : cfg_(cfg) {}

  /// Starts at `expected_psn` (the next PSN the requester sends) with `msn`
  /// messages completed. `base_confirmed`: false when packets before
  /// `expected_psn` were passthrough and are not yet acknowledged end to end.
  void start(uint32_t expected_psn, uint32_t msn, bool base_confirmed) noexcept;

  /// A request packet from the local requester at `now`. `room`: the gateway
  /// can carry it now; `over_share`: the flow's backlog is past its share of
  /// the WAN budget (send a CNP). Fills `reply` when something goes back.
  Verdict on_request(const Request& req, bool room, bool over_share, TimePoint now,
                     Reply& reply) noexcept;

  /// A READ response or atomic ACK from the remote host, on its way to the
  /// requester (the caller delivers it). May release a held ACK into `reply`,
  /// to be sent after the response.
  void on_response(uint8_t opcode, uint32_t psn, TimePoint now, Reply& reply) noexcept;

  /// An ACK or NAK from the remote host relayed to the requester (before the
  /// base is confirmed): `through` is the last PSN it acknowledges.
  void on_relayed_ack(uint32_t through) noexcept;

  /// The egress reported a fatal NAK (`syndrome`): every later request is
  /// answered with it and dropped.
  void fail(uint8_t syndrome) noexcept;
  /// The same for a fatal NAK at `psn` from the remote host. Returns true
  /// when the requester still waits on that PSN (a READ/atomic, or data not
  /// yet acknowledged locally): the caller relays the NAK at once, as the
  /// remote host's answer, instead of leaving it to the requester's next
  /// request (which, behind a READ, comes only after its ACK timeout).
  bool fail_at(uint8_t syndrome, uint32_t psn) noexcept;
  /// The peer gateway restarted (docs/split-mode.md "A gateway restart"):
  /// what was accepted here may be lost. Fails the flow like fail(), and
  /// when packets accepted here are not yet acknowledged locally, fills
  /// `reply` with a NAK `syndrome` at the first of them (the requester's
  /// oldest unacknowledged PSN, so the NAK completes nothing as a success).
  /// Without such packets the requester learns it at its next request.
  void fail_now(uint8_t syndrome, Reply& reply) noexcept;

  /// Whether the gateway is short of room for another window of requests
  /// (window_estimate() packets): ACKs are held meanwhile. The caller sets it
  /// before on_request() and poll().
  void set_short_of_room(bool short_of_room) noexcept { short_of_room_ = short_of_room; }
  /// The requester's window as seen so far: the widest span of PSNs past the
  /// last ACK, at least `ack_every`.
  uint32_t window_estimate() const noexcept { return std::max(window_, cfg_.ack_every); }
  bool holding() const noexcept { return !held_since_.is_infinite(); }

  /// Timers: a coalesced ACK whose delay ran out goes into `reply`.
  void poll(TimePoint now, Reply& reply) noexcept;
  /// When poll() must run next (infinite when nothing waits).
  TimePoint next_timeout() const noexcept;

  /// The path MTU toward the requester (READ response spans), once learnt.
  void set_pmtu(uint32_t pmtu) noexcept { cfg_.pmtu = pmtu; }
  uint32_t pmtu() const { return cfg_.pmtu; }

  bool started() const { return started_; }
  bool failed() const { return failed_; }
  bool base_confirmed() const { return base_confirmed_; }
  uint32_t expected_psn() const { return expected_; }
  uint32_t base_psn() const { return base_; }  ///< the first PSN split (start())
  uint32_t msn() const { return msn_; }
  uint32_t acked_psn() const { return acked_psn_; }  ///< last PSN acknowledged locally
  uint32_t outstanding_reads() const { return nreads_; }
  const ResponderStats& stats() const { return stats_; }

 private:
  struct Read {
    uint32_t first = 0;  ///< request PSN
    uint32_t last = 0;   ///< last response PSN
    uint32_t msn_before = 0;
  };
  bool may_ack() const { return base_confirmed_ && nreads_ == 0 && !failed_; }
  /// A NAK owed since before the base was confirmed may go now.
  bool nak_owed() const { return nak_owed_ && base_confirmed_ && !failed_; }
  void make_ack(Reply& r) noexcept;
  /// may_ack(), and the ACK is not held for room (see set_short_of_room).
  bool ack_allowed(TimePoint now) noexcept;
  /// Arms (or moves) the coalescing timer for an accepted, unacknowledged packet.
  void defer_ack(TimePoint now) noexcept;
  void maybe_cnp(bool over_share, TimePoint now, Reply& r) noexcept;
  void nak_sequence(TimePoint now, Reply& r) noexcept;

  ResponderConfig cfg_;
  bool started_ = false;
  bool base_confirmed_ = true;
  bool failed_ = false;
  uint8_t fail_syndrome_ = 0;
  uint32_t base_ = 0;       ///< first PSN the responder owns
  uint32_t expected_ = 0;   ///< next PSN in sequence
  uint32_t msn_ = 0;        ///< messages completed (24 bits)
  uint32_t acked_psn_ = 0;  ///< last ACK sent: PSN ...
  uint32_t acked_msn_ = 0;  ///< ... and MSN
  uint32_t unacked_ = 0;    ///< accepted packets since the last ACK
  uint32_t window_ = 0;     ///< widest PSN span seen past the last ACK
  bool short_of_room_ = false;
  TimePoint held_since_ = TimePoint::infinite();  ///< an ACK is held since (infinite: none)
  TimePoint hold_check_at_;                       ///< when a held ACK looks at the room again
  TimePoint ack_due_ = TimePoint::infinite();
  TimePoint first_unacked_at_;  ///< when the oldest unacknowledged packet was accepted
  bool in_nak_episode_ = false;
  bool nak_deferred_ = false;  ///< an out-of-sequence packet waits for a READ's response
  /// A packet was dropped (out of sequence, or no room) while the base was
  /// unconfirmed, when no NAK may go: it goes once the base is confirmed.
  bool nak_owed_ = false;
  TimePoint last_nak_;
  TimePoint last_cnp_;
  bool cnp_sent_ = false;
  std::array<Read, kMaxReads> reads_{};
  uint32_t read_head_ = 0;
  uint32_t nreads_ = 0;
  ResponderStats stats_;
};

}  // namespace rowan::split
