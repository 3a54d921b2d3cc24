// Split mode in the gateway (docs/split-mode.md): the glue between the packet
// engine (worker.cc) and the pure state machines of lib/src/split.
//
// Ingress (the site of the requester): RC requests from a local host on a
// `mode = "split"` route are tracked in passthrough until an ACK relayed
// from the remote host matches a forwarded PSN (PairingTracker); from the
// next in-sequence request on, a Responder answers the requester locally
// (ACK/NAK/CNP frames with a valid ICRC) and the accepted requests are
// carried on the flow's stream as before. The switch is announced to the
// peer gateway by a control record on the same stream, ahead of the first
// split packet.
//
// Egress (the site of the responder): on that control record a Requester
// takes over the flow: records are held and re-originated toward the local
// responder with their PSNs, the responder's ACKs are consumed (except the
// first one that covers the passthrough packets, which the requester still
// needs), NAKs and timeouts retransmit from the held copies, and a fatal NAK
// or exhausted retries reaches the ingress, which fails the flow toward the
// requester. READ/atomic requests and their responses travel end to end.
//
// RDMA CM (split/cm.h): the CM MADs on QP1 pass through in both directions;
// when a REP completes a REQ on a split route, the direction whose
// requester is a local host is paired at once (both QPNs and its starting
// PSN known, MSN 0, nothing in flight), so the split starts with its first
// request. DREQ, DREP and REJ release both directions of the connection; a
// failed flow is released once its failure was reported (QP error).
// Teardown keeps the order the hosts rely on: a DREQ from a requester whose
// flow is split is preceded, on the CM MAD's stream, by a drain record
// (F0 03 | ip version | 0 | end psn(4): the PSN after the last request the
// ingress accepted), and the gateway of the DREQ's receiver holds the DREQ
// until its egress flow has delivered every request before that PSN and
// had it acknowledged (or failed): the requester's work requests all
// completed at gateway A, but the data may still be in gateway B's slots or
// on the WAN (another stream), and a host that saw the DREQ first would tear
// its QP down under it.
//
// MTU translation (split/resegment.h): `set_local_pmtu()` gives the path
// MTU this site's hosts use. A REQ delivered to a local (passive) host gets
// that MTU, so each host runs its site's MTU; the control record carries the
// requester's MTU, and an egress whose local host uses another one (a CM
// flow) re-cuts the requests into its host's MTU with its own PSNs, and
// READ responses / atomic ACKs back into the requester's MTU and PSNs.
// Flows paired by PSN match are never translated (passthrough worked, so
// both hosts already use the same MTU).
//
// Control record (a record whose first byte is 0xF0, which no IP packet
// has): F0 | type(1) | ip version(1) | flags(1) | src(16) | dst(16) | qp(4) |
// requester qp(4) | start psn(4) | pmtu(4), integers big-endian. Flag bit 0:
// nothing before the start PSN is unacknowledged (CM pairing), so the egress
// consumes every responder ACK.
//
// Where the state lives: a fixed table of SplitFlow slots; the gateway's flow
// entry of a flow's local side holds its slot (Flow::split_ingress,
// Flow::split_egress), so a host's packet finds its split state through the
// classifier's own lookup; only records from the peer go through the
// engine's index of WAN-side keys (see SplitFlow).
//
// Files: split_engine.cc (the table, dispatch, frames toward the hosts, a
// peer's restart, timers, snapshot), split_ingress.cc, split_egress.cc and
// split_cm.cc (RDMA CM, held DREQs).
//
// Threading: the packet lcore only. Nothing is allocated per packet or when a
// flow is paired: the flow slots, one Requester per slot, the translations
// and the packets egress flows hold (one shared SlotPool) are allocated at
// construction (docs/split-mode.md "Scale").
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/units.h"
#include "datapath/flow_table.h"
#include "split/cm.h"
#include "split/pairing.h"
#include "split/requester.h"
#include "split/resegment.h"
#include "split/responder.h"

namespace rowan::gw {

struct PeerState;

/// What the split engine needs from the packet engine (worker.cc).
class SplitIo {
 public:
  virtual ~SplitIo() = default;
  /// Carries an IP packet on `flow`'s stream as a record; false when no room.
  virtual bool carry(Flow& flow, const uint8_t* ip, uint32_t len, TimePoint now) noexcept = 0;
  /// Whether a record of `len` IP bytes fits toward the flow's peer now.
  virtual bool has_room(const Flow& flow, uint32_t len) const noexcept = 0;
  /// Whether the flow's backlog is past its share of the WAN budget.
  virtual bool over_share(const Flow& flow) const noexcept = 0;
  /// Whether the send buffer toward peer `peer` (Flow::peer) has less than
  /// `bytes` free, while its capacity could hold them twice over (a smaller
  /// buffer never counts as short: holding ACKs could not help it).
  virtual bool short_of_room(uint32_t peer, uint64_t bytes) const noexcept = 0;
  /// Sends an IP packet to a host of the site. `tag`: with `from_wan`, the
  /// 802.1Q tag its sender's frame had across the WAN (the site's policy
  /// chooses the tag it gets, vlan.h); otherwise the tag it goes with (a
  /// local host's own, for what the gateway answers it).
  virtual void send_local(const uint8_t* ip, uint32_t len, TimePoint now, const VlanTag& tag,
                          bool from_wan) noexcept = 0;
  /// Carries an IP packet toward the remote site as if a local host sent it.
  virtual bool carry_packet(const uint8_t* ip, uint32_t len, TimePoint now) noexcept = 0;
  /// The gateway's flow entry for `key` (a flow a local host sends on), or
  /// nullptr when there is none.
  virtual Flow* find_flow(const FlowKey& key) noexcept = 0;
  /// The same, created when absent as the classifier would create it (its
  /// route's peer); nullptr when no route covers it or the table is full.
  virtual Flow* open_flow(const FlowKey& key, TimePoint now) noexcept = 0;
};

struct SplitStats {
  uint64_t flows_tracked = 0;
  uint64_t flows_paired = 0;  ///< ingress flows switched to split
  uint64_t flows_egress = 0;  ///< egress flows started by a control record
  uint64_t flows_released = 0;
  uint64_t table_full = 0;
  uint64_t acks_sent = 0;
  uint64_t naks_sent = 0;
  uint64_t cnps_sent = 0;
  uint64_t requests_carried = 0;
  uint64_t requests_dropped = 0;
  uint64_t reoriginated = 0;     ///< egress packets sent to the responder (incl. retransmissions)
  uint64_t acks_requested = 0;   ///< ... of which gateway B set AckReq on (see send_egress)
  uint64_t retransmitted = 0;    ///< ... of which were sent before (NAK, timeout: probe or go back)
  uint64_t egress_timeouts = 0;  ///< gateway B's retransmission timer fired
  uint64_t acks_consumed = 0;
  uint64_t fatal = 0;          ///< fatal NAKs / exhausted retries reported
  uint64_t fatal_relayed = 0;  ///< ... of which gateway A passed to a waiting requester at once
  uint64_t stalls = 0;         ///< a stream waited for the requester's window
  uint64_t bad_control = 0;
  uint64_t cm_paired = 0;    ///< flows paired from RDMA CM REQ/REP
  uint64_t cm_released = 0;  ///< flows released by DREQ/DREP/REJ
  uint64_t failed_released = 0;
  uint64_t translated_flows = 0;   ///< egress flows re-segmenting between two MTUs
  uint64_t resegmented = 0;        ///< request pieces built for the local host
  uint64_t cm_mtu_rewritten = 0;   ///< REQs given the site's path MTU
  uint64_t dreqs_held = 0;         ///< DREQs held until the egress delivered the data before them
  uint64_t dreq_hold_expired = 0;  ///< ... and delivered after kDreqHoldMax instead
  uint64_t dreqs_held_early = 0;   ///< held before the egress flow had started (its control
                                   ///< record was still on the way, e.g. behind a WAN loss)
  // A peer gateway restarted (on_peer_restart, docs/split-mode.md "A gateway restart").
  uint64_t peer_restarts = 0;   ///< new incarnations of a peer seen
  uint64_t restart_failed = 0;  ///< split flows failed because their peer restarted
  uint64_t restart_naks = 0;    ///< ... fatal NAKs sent at once to a local requester
  uint64_t poison_sent = 0;     ///< QP-failing requests sent to a host's responder
  uint64_t dead_dropped = 0;    ///< packets of such a failed flow consumed (not passed on)
};

/// How much one engine holds, all allocated at construction. The defaults
/// are what rowand runs; the fuzz target builds small engines (one per
/// input) to reach the full-table paths and to run at its pace.
struct SplitLimits {
  uint32_t flows = 4096;                     ///< split flows (QP directions) at once
  uint64_t pool_bytes = uint64_t{64} << 20;  ///< packets the egress flows hold
  uint32_t translations = 256;               ///< egress flows translating MTUs at once
};

class SplitEngine {
 public:
  /// Split flows (QP directions) one engine follows at once (rowand's).
  static constexpr uint32_t kMaxFlows = SplitLimits{}.flows;
  // MTU translations (SplitLimits::translations): CM flows between sites
  // that run different path MTUs, each ~17 KB of re-cutting state. The
  // packet pool (SplitLimits::pool_bytes): slots of the local MTU, at least
  // one full window (64 MiB: 44,739 slots of 1,500 bytes, about 43 full
  // 1,024-packet windows; 7,456 of 9,000 bytes).
  /// Per egress flow: the packets held toward its responder host.
  static constexpr uint32_t kEgressSlots = 1024;
  /// DREQs held at once (behind data still owned by an egress flow).
  static constexpr uint32_t kHeldMads = 16;
  /// The longest a DREQ waits for its egress flow to drain.
  static constexpr Duration kDreqHoldMax = Duration::from_s(10);

  SplitEngine(SplitIo& io, uint32_t local_mtu, const SplitLimits& limits = {});

  /// The RoCE path MTU (256..4096) the site's hosts use; 0: whatever the
  /// connection negotiated (no translation). Control path, before traffic.
  void set_local_pmtu(uint32_t pmtu) noexcept { local_pmtu_ = split::mtu_code(pmtu) ? pmtu : 0; }
  /// The class of the CNPs sent to the site's hosts: DSCP (0..63) and, on a
  /// QP whose frames are tagged, the PCP (0..7). Control path.
  void set_cnp_class(uint8_t dscp, uint8_t pcp) noexcept {
    cnp_tos_ = static_cast<uint8_t>((dscp & 0x3F) << 2);
    cnp_pcp_ = pcp & 7;
  }

  /// A RoCEv2 packet from a site host, classified into `flow` (local RX).
  /// `split_route`: its route has mode "split". Returns true when the engine
  /// consumed it (the caller frees the mbuf); false: carry it in passthrough.
  bool on_local(Flow& flow, bool split_route, const uint8_t* ip, uint32_t len,
                TimePoint now) noexcept;

  /// A record read from `peer`'s `stream`, before delivery to a site host.
  /// Returns true when the engine consumed it.
  /// `tag`: the 802.1Q tag its sender's frame had (a tagged record, vlan.h).
  bool on_wan(PeerState* peer, uint64_t stream, const uint8_t* ip, uint32_t len, TimePoint now,
              const VlanTag& tag = {}) noexcept;

  /// Whether the next record of `stream` must wait (its egress window is
  /// full). The engine remembers it and hands it back via take_unblocked().
  bool blocked(PeerState* peer, uint64_t stream) noexcept;
  /// A stream that blocked() held and that may be read again.
  bool take_unblocked(PeerState** peer, uint64_t* stream) noexcept;

  /// The peer gateway `peer` (its index `peer_idx`, Flow::peer) came back as
  /// a new incarnation and its transport was reset: what it held of our
  /// split flows (requests we acknowledged locally, requests it
  /// acknowledged to its hosts) may be lost. Fails every split flow through
  /// it so that both hosts' QPs go to the error state and the applications
  /// see an error, never a hole (docs/split-mode.md "A gateway restart"):
  /// - ingress (a local requester): a fatal NAK (Remote Operational Error)
  ///   at its oldest unacknowledged PSN now, or at its next request; and
  ///   toward the remote responder host, a QP-failing request at each PSN
  ///   it may expect (our next expected PSN and the kPoisonSpan before it,
  ///   highest first, paced);
  /// - egress (a local responder): nothing more is re-originated, and the
  ///   local host gets a QP-failing request at each PSN it may expect (the
  ///   egress window), so a host that only waits for a message fails too;
  ///   the remote requester, whose requests now come in passthrough, gets a
  ///   fatal NAK at its oldest unacknowledged PSN once that is known (the
  ///   lowest PSN it sent seen twice).
  /// The failed flows consume their packets until they are released.
  /// Called from the packet loop on the restart signal (rare).
  void on_peer_restart(const PeerState* peer, uint32_t peer_idx, TimePoint now) noexcept;
  /// PSNs before the next expected one that a restart poisons at the remote
  /// responder (its expected PSN is within them unless more than this many
  /// packets were in the dead gateway's memory).
  static constexpr uint32_t kPoisonSpan = 4096;

  /// Timers: coalesced ACKs, retransmissions, RNR waits.
  void poll(TimePoint now) noexcept;
  TimePoint next_timeout() const noexcept;
  /// Releases flows idle since before `cutoff` (housekeeping).
  void expire(TimePoint cutoff) noexcept;

  const SplitStats& stats() const { return stats_; }
  /// The shared packet pool of the egress flows: slots in all, and free.
  uint32_t pool_capacity() const noexcept { return pool_.capacity(); }
  uint32_t pool_available() const noexcept { return pool_.available(); }
  /// What the engine allocated at construction, in bytes (the pool's
  /// packet bytes included, which the kernel backs as they are used).
  uint64_t memory_bytes() const noexcept;
  /// Flows now followed: {tracking (unpaired), ingress, egress}. Control path.
  std::array<uint32_t, 3> role_counts() const noexcept {
    std::array<uint32_t, 3> n{};
    for (const SplitFlow& sf : active()) {
      if (sf.role == Role::kTracking) ++n[0];
      if (sf.role == Role::kIngress) ++n[1];
      if (sf.role == Role::kEgress) ++n[2];
    }
    return n;
  }
  /// What `rowanctl status` shows of split mode, as plain values: copied by
  /// the packet worker (view), rendered as JSON by the control thread
  /// (render).
  struct View {
    struct FlowView {
      uint8_t role = 0;  ///< Role
      roce::IpAddr requester, responder;
      uint32_t responder_qp = 0, requester_qp = 0, pmtu = 0;
      bool cm = false, dead = false, failed = false;
      // Ingress: the responder half.
      uint32_t expected_psn = 0, msn = 0;
      bool base_confirmed = false;
      split::ResponderStats responder_stats;
      // Egress: the requester half.
      uint32_t start_psn = 0, next_psn = 0, in_window = 0;
      split::RequesterStats requester_stats;
    };
    SplitStats stats;
    uint64_t dreqs_waiting = 0, cm_connections = 0, pool_slots = 0, pool_free = 0,
             pool_exhausted = 0, memory_bytes = 0;
    std::vector<FlowView> flows;
  };
  /// Copies the state into `v` (its flow vector's room is reused).
  void view(View& v) const;
  static nlohmann::ordered_json render(const View& v);
  /// view and render in one, on the calling thread (tests).
  nlohmann::ordered_json snapshot() const {
    View v;
    view(v);
    return render(v);
  }

 private:
  enum class Role : uint8_t { kFree, kTracking, kIngress, kEgress };
  /// An egress flow's MTU translation (allocated once, when it is paired).
  struct Translation {
    split::RequestSegmenter requests;
    split::ResponseSegmenter responses;
  };
  /// One direction of a QP pair (requester → responder) that the engine
  /// follows. Its state comes in three parts: what both roles use, the
  /// ingress half (the requester is a local host: tracking, then a
  /// Responder; split_ingress.cc) and the egress half (the responder is a
  /// local host: a Requester; split_egress.cc).
  ///
  /// Where it is found: its local side -- the gateway's flow entry that its
  /// local host sends on (the requests' key at the ingress, the answers'
  /// key at the egress) -- holds its slot (Flow::split_ingress or
  /// Flow::split_egress), so a local packet reaches it through the
  /// classifier's one lookup. Records from the peer, whose keys the flow
  /// table does not hold, find it by key in the engine's WAN index.
  struct IngressHalf {
    split::PairingTracker pairing;
    split::Responder responder;
    uint32_t local_peer = 0;   ///< the peer its flow is carried to (Flow::peer)
    uint32_t max_req_len = 0;  ///< the largest request seen (IP bytes)
  };
  struct EgressHalf {
    split::Requester* requester = nullptr;  ///< requesters_[slot]
    Translation* xlate = nullptr;           ///< one of xlates_ when MTUs differ
    bool base_relayed = false;              ///< the ACK covering the passthrough part went through
    PeerState* peer = nullptr;              ///< where the records come from
    uint64_t stream = 0;
    bool stalled = false;
    uint32_t unasked = 0;       ///< packets sent since the last one with AckReq
    uint32_t dead_min_psn = 0;  ///< dead: the remote requester's lowest PSN seen ...
    uint8_t dead_min_seen = 0;  ///< ... how often (2: its oldest unacknowledged one)
    bool dead_told = false;     ///< ... and a fatal NAK went to it
    VlanTag wan_tag;            ///< the remote requester's frames' tag (its records')
  };
  struct SplitFlow {
    Role role = Role::kFree;
    FlowKey fwd;          ///< requester → responder (dest QP = responder's QP)
    uint32_t rev_qp = 0;  ///< the requester's QP (0: not yet known)
    uint32_t pmtu = 0;    ///< learnt from full-size packets (0: unknown)
    uint16_t udp_sport = 0;
    uint8_t dscp_tos = 0;   ///< the requester's DSCP (<< 2): its ACKs/NAKs go in that class
    bool cm = false;        ///< paired from RDMA CM
    Flow* local = nullptr;  ///< the gateway's flow entry that holds this slot
    TimePoint last_active;
    // Failed by a peer restart (on_peer_restart): QP-failing requests go to
    // a host, toward the WAN (ingress) or the local host (egress).
    bool dead = false;
    bool poison_wan = false;    ///< its poison goes to the remote host (ingress) ...
    uint32_t poison_psn = 0;    ///< ... the next PSN to poison ...
    uint32_t poison_left = 0;   ///< ... and how many are left (going down) ...
    TimePoint poison_at;        ///< ... and when the next burst may go ...
    uint32_t poison_top = 0;    ///< ... the range: from this PSN down ...
    uint32_t poison_count = 0;  ///< ... this many PSNs ...
    uint8_t poison_rounds = 0;  ///< ... and how many more times the whole range goes
    IngressHalf in;
    EgressHalf out;
  };

  // The table (split_engine.cc). find_fwd: the flow whose requester →
  // responder key is `k`; find_rev: the flow whose answers' key is `k`.
  SplitFlow* find_fwd(const FlowKey& k) noexcept;
  SplitFlow* find_rev(const FlowKey& k) noexcept;
  SplitFlow* slot_of(uint32_t handle) noexcept {
    return handle == 0 ? nullptr : &flows_[handle - 1];
  }
  /// A free slot for `fwd` in `role`, held by the local flow entry `local`
  /// (nullptr when it has no room; counted).
  SplitFlow* add(const FlowKey& fwd, Role role, Flow* local, TimePoint now) noexcept;
  /// Puts the flow's WAN-side key (egress: fwd; otherwise the answers' key,
  /// once rev_qp is known) into the WAN index.
  void index_wan(SplitFlow& sf) noexcept;
  SplitFlow* find_wan(const FlowKey& k, bool answers) noexcept;
  /// The egress flow whose records come on `peer`'s `stream`.
  SplitFlow* find_stream(const PeerState* peer, uint64_t stream) noexcept;
  static uint64_t stream_hash(const PeerState* peer, uint64_t stream) noexcept;
  void rebuild_index() noexcept;
  static FlowKey rev_key(const SplitFlow& sf);
  /// The tag of the flow's local host's own frames (what it is answered with).
  static VlanTag local_tag(const SplitFlow& sf) noexcept {
    return sf.local != nullptr ? sf.local->tag : VlanTag{};
  }

  bool ingress_request(SplitFlow& sf, Flow& flow, const roce::RocePacket& p, const uint8_t* ip,
                       uint32_t len, TimePoint now) noexcept;
  void start_split(SplitFlow& sf, Flow& flow, TimePoint now) noexcept;
  bool egress_from_responder(SplitFlow& sf, const roce::RocePacket& p, TimePoint now) noexcept;
  bool egress_request(SplitFlow& sf, const roce::RocePacket& p, const uint8_t* ip, uint32_t len,
                      TimePoint now) noexcept;
  bool ingress_from_remote(SplitFlow& sf, const roce::RocePacket& p, const uint8_t* ip,
                           uint32_t len, TimePoint now) noexcept;
  void track_ack(const roce::RocePacket& p) noexcept;
  void on_control(PeerState* peer, uint64_t stream, const uint8_t* rec, uint32_t len,
                  TimePoint now) noexcept;
  void send_reply(SplitFlow& sf, const split::Reply& r, TimePoint now) noexcept;
  /// The room an ACK to the requester may have to absorb (ACKs are held
  /// while the peer's send buffer has less free).
  static uint64_t window_bytes(const SplitFlow& sf) noexcept;
  void send_aeth(SplitFlow& sf, uint8_t syndrome, uint32_t psn, uint32_t msn, TimePoint now,
                 bool toward_wan) noexcept;
  void flush(SplitFlow& sf, TimePoint now) noexcept;
  /// One request toward the responder host, with AckReq set where the
  /// window needs an ACK (every half window, on the packet that fills it and
  /// on a probe).
  void send_egress(SplitFlow& sf, std::span<const uint8_t> pkt, bool window_full,
                   TimePoint now) noexcept;
  void report_failure(SplitFlow& sf, TimePoint now) noexcept;
  /// Sends up to a burst of a dead flow's QP-failing requests, two per PSN:
  /// a SEND only with invalidate of R_Key 0 without payload (it completes
  /// the host's posted receive with an error), and an RDMA WRITE only with
  /// R_Key 0 and a DMA length its empty payload does not have. At the
  /// responder's expected PSN an RC responder answers them with a class C
  /// or J error (NAK invalid request or remote access error) and moves the
  /// QP to the error state; at any other PSN they are duplicates, ACKed
  /// again, or out of sequence, NAKed once; nothing is ever written.
  void send_poison(SplitFlow& sf, TimePoint now) noexcept;
  /// A request from the remote requester of a dead egress flow: a fatal NAK
  /// once its PSN is known to be the oldest it has unacknowledged.
  void fail_remote_requester(SplitFlow& sf, uint32_t psn, TimePoint now) noexcept;
  void learn_pmtu(SplitFlow& sf, const roce::RocePacket& p) noexcept;
  bool on_cm(const roce::RocePacket& p, bool from_local, bool split_route, TimePoint now) noexcept;
  /// The path MTU the local host `host` uses on QP `qpn` (CM), 0 if unknown.
  uint32_t local_host_pmtu(const roce::IpAddr& host, uint32_t qpn) const noexcept;
  static bool egress_full(const SplitFlow& sf) noexcept;
  bool egress_translated(SplitFlow& sf, const roce::RocePacket& p, TimePoint now) noexcept;
  bool egress_response_translated(SplitFlow& sf, const roce::RocePacket& p, TimePoint now) noexcept;
  void cm_pair(const split::CmConnection& c, bool active_local, TimePoint now) noexcept;
  /// Releases the flow(s) of the QP pair; returns how many.
  uint32_t release_key(const FlowKey& k) noexcept;
  /// Frees the slot and its flow entry's handle (`count`: as released).
  void release(SplitFlow& sf, bool count = true) noexcept;
  /// The slots that may hold a flow: the per-packet and per-loop scans
  /// (timers, stalls, ACK pairing) touch these only, not all kMaxFlows.
  std::span<SplitFlow> active() noexcept { return {flows_.data(), high_}; }
  std::span<const SplitFlow> active() const noexcept { return {flows_.data(), high_}; }
  /// Lowers high_ past the free slots at the end.
  void trim() noexcept;
  /// A DREQ from the host of `flow` for a split flow it requests on: tells
  /// the peer gateway up to which PSN that flow's data precedes the DREQ.
  void announce_drain(Flow& flow, const roce::RocePacket& p, const split::CmMessage& m,
                      TimePoint now) noexcept;
  /// A DREQ from the WAN toward a local host whose egress flow has not yet
  /// delivered (and had acknowledged) every request up to `end_psn` (when
  /// `have_end`: a drain record came ahead of it): kept back until it has; a
  /// repeat of a DREQ already waiting is dropped. Returns false when it may
  /// go on at once.
  bool hold_dreq(const roce::RocePacket& p, const uint8_t* ip, uint32_t len, bool have_end,
                 uint32_t end_psn, TimePoint now) noexcept;
  static bool drained(const SplitFlow& sf, uint32_t end_psn) noexcept;
  /// Delivers (and acts on) the held DREQs whose wait is over.
  void release_held(TimePoint now) noexcept;

  /// One of xlates_ for `sf` (false when all are in use).
  bool take_translation(SplitFlow& sf) noexcept;

  SplitIo& io_;
  uint32_t local_mtu_;
  uint32_t local_pmtu_ = 0;
  // CNPs go in the class RoCE fabrics give them, so a congested data class
  // does not delay them: by default mlx5's (roce_np cnp_dscp 48 and
  // cnp_802p_prio 6); set_cnp_class() / [local] cnp_dscp, cnp_pcp.
  uint8_t cnp_tos_ = 48 << 2;
  uint8_t cnp_pcp_ = 6;
  VlanTag wan_tag_;  ///< the tag of the record on_wan() handles
  // Everything below is allocated at construction (start-up), none of it
  // when a flow is paired or a packet passes (docs/split-mode.md "Scale").
  std::vector<SplitFlow> flows_;
  std::vector<uint32_t> free_;                ///< free slots of flows_ (a stack)
  split::SlotPool pool_;                      ///< the packets egress flows hold
  std::vector<split::Requester> requesters_;  ///< one per slot, over pool_
  std::vector<Translation> xlates_;
  std::vector<uint32_t> free_xlate_;
  uint32_t index_size_;  ///< buckets of each WAN-side index: 4 per flow
  /// WAN-side keys, hash bucket → slot + 1: requests from the peer (egress
  /// flows by fwd) and answers from the peer (the others, by rev_key).
  std::vector<int32_t> wan_req_index_;
  std::vector<int32_t> wan_ans_index_;
  std::vector<int32_t> stream_index_;  ///< egress flows by (peer, stream)
  uint32_t used_ = 0;
  uint32_t high_ = 0;  ///< 1 + the highest slot in use (add() takes the lowest free one)
  uint32_t tracking_ = 0;
  uint32_t stalled_ = 0;
  std::array<uint8_t, 256> frame_{};  ///< one reply frame being built
  std::array<uint8_t, 4400> big_{};   ///< a re-segmented or rewritten packet being built
  split::CmTracker cm_;
  PeerState* cm_split_peer_ = nullptr;  ///< a kCtrlCmSplit record came on this stream ...
  uint64_t cm_split_stream_ = 0;
  bool cm_split_pending_ = false;       ///< ... and applies to the next CM REQ on it
  PeerState* cm_drain_peer_ = nullptr;  ///< a kCtrlCmDrain record came on this stream ...
  uint64_t cm_drain_stream_ = 0;
  uint32_t cm_drain_psn_ = 0;
  bool cm_drain_pending_ = false;  ///< ... and applies to the next CM MAD on it
  /// A DREQ kept back (IPv6 + UDP + BTH + DETH + 256-byte MAD + ICRC fit).
  struct HeldMad {
    bool used = false;
    FlowKey egress;  ///< the egress flow it waits for
    uint32_t end_psn = 0;
    bool seen = false;  ///< the egress flow existed at some point while it waited
    TimePoint since;
    uint32_t len = 0;
    VlanTag tag;  ///< its sender's
    std::array<uint8_t, 384> bytes{};
  };
  std::array<HeldMad, kHeldMads> held_{};
  uint32_t held_n_ = 0;
  SplitStats stats_;
};

}  // namespace rowan::gw
