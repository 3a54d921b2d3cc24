// One reliable, paced, congestion-controlled connection between two rowan
// gateways over datagrams. See docs/wan-transport.md for the wire format, loss
// recovery, flow control and the memory bound.
//
// The connection never reads a clock and never does I/O: every entry point
// takes the `now` the caller read once for its burst, received datagrams are
// handed in with on_datagram(), datagrams to send are pulled with poll_send()
// into caller-owned buffers, and next_timeout() says when to call again
// (on_timeout() then poll_send()). A PacketIo event loop or the simulator
// drives it (see transport/driver.h).
//
// Hot path (on_datagram, poll_send, on_timeout): no allocation after warm-up
// (rings and pools are sized at construction or grow by doubling until they
// fit the window), no exception, no lock, no logging. Bad datagrams are
// dropped and counted in ConnStats.
//
// Paths: a connection runs over one or more paths (links) to the same peer,
// path 0 always. Each path has its own packet-number space, RTT estimator,
// loss detection, congestion controller and pacer; the streams and their
// flow control are the connection's. The owner hands each received datagram
// in with the path it arrived on and sends each polled datagram on the path
// OutDatagram::path names. See docs/wan-transport.md, "Paths".
//
// Threading: a connection and its congestion controllers belong to one
// thread (lcore); no method is thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/clock.h"
#include "base/histogram.h"
#include "base/units.h"
#include "cc_params.h"
#include "congestion_controller.h"
#include "io/packet_io.h"
#include "transport/chunk_buffer.h"
#include "transport/delivery_rate.h"
#include "transport/fec_coder.h"
#include "transport/interval_set.h"
#include "transport/pacer.h"
#include "transport/range_set.h"
#include "transport/rtt_estimator.h"
#include "transport/wire.h"

namespace rowan::transport {

/// Index of one of a connection's paths (0 .. path_count() - 1). Both ends
/// number their paths alike (the same links in the same order).
struct PathId {
  uint16_t index = 0;
  constexpr bool operator==(const PathId&) const = default;
};
/// Paths per connection (the wire carries the index in one byte).
inline constexpr size_t kMaxPaths = 256;

/// What the owner knows of one path from its configuration.
struct PathConfig {
  BitsPerSec link_rate;  ///< configured rate (BDP sizing, CC hint); zero: TransportConfig's
  Duration base_rtt;     ///< configured RTT (BDP sizing, first PTO); zero: TransportConfig's
};

enum class PathState : uint8_t { kUp, kDown };
inline const char* to_string(PathState s) { return s == PathState::kUp ? "up" : "down"; }

/// A path went down or came back up (drained with Connection::next_path_event).
struct PathEvent {
  PathId path;
  PathState state = PathState::kUp;
  TimePoint at;
};

struct TransportConfig {
  uint64_t connection_id = 1;
  BitsPerSec link_rate = BitsPerSec::from_gbps(1);  ///< configured WAN rate (BDP sizing)
  Duration base_rtt = Duration::from_ms(10);        ///< configured RTT (BDP sizing, first PTO)
  uint32_t max_datagram = 1472;  ///< wire bytes per datagram, header+tag included
  std::string cc = "rowan";      ///< registered algorithm name
  cc::CcParams cc_params;
  double send_buffer_bdp = 2.0;         ///< send buffer = this × BDP (not below min_buffer)
  double recv_window_bdp = 2.0;         ///< connection receive window = this × BDP
  double stream_window_fraction = 1.0;  ///< per-stream window = this × connection window
  Bytes min_buffer = Bytes{256} * 1024;
  /// The send buffer and receive window grow, by doubling, up to this many
  /// times their configured size, when the path needs more than a hinted
  /// BDP gives: the send buffer when it, not the CC, limits what is in
  /// flight; the receive window when the peer nearly runs out of credit
  /// while the application keeps up (holes under repair hold data back).
  /// A hint wrong by half and loss recovery on a long path need it. 1: fixed.
  double window_growth = 4.0;
  uint32_t chunk_size = 16384;  ///< buffer granule (bytes)
  uint32_t max_streams = 256;
  uint32_t ack_every = 2;                         ///< ack-eliciting packets per ACK
  Duration max_ack_delay = Duration::from_ms(1);  ///< ACK timer
  Duration timer_granularity = Duration::from_us(100);
  uint32_t packet_threshold = 3;  ///< RFC 9002 kPacketThreshold
  uint32_t ptos_before_rto = 1;   ///< PTO expiries (TLPs) before an RTO
  /// Cap on the backed-off probe timeout (never below one un-backed-off PTO),
  /// so a path back from a long outage is probed within it instead of after
  /// 2^k PTOs (a 30 s flap would otherwise wait up to 25 s more). Zero: no cap.
  Duration max_pto = Duration::zero();
  /// The connection's paths, path i from paths[i]; empty: one path with
  /// link_rate and base_rtt. Buffers and windows are sized at construction
  /// for the sum of the paths' rates over their longest RTT.
  std::vector<PathConfig> paths;
  /// With several paths, one whose ACKs stop for max(3 × its smoothed RTT,
  /// this) while it has data in flight is declared down and its data resent
  /// on the others. A connection's last up path is never declared down (it
  /// recovers by PTO/RTO as a single path does).
  Duration path_down_floor = Duration::from_ms(200);
  /// A down path is probed with a PING after one PTO, then at doubling
  /// intervals capped at this; the first ACK of a probe brings it back.
  Duration path_probe_max = Duration::from_ms(500);
  /// With several paths, an up path that has sent nothing ack-eliciting for
  /// this long sends a keepalive PING (outside its flight and its CC), so a
  /// cut link goes down even when idle: within path_keepalive +
  /// max(3 × srtt, path_down_floor) of the cut. An unanswered keepalive is
  /// repeated every max(path_keepalive / 4, one PTO) until an ACK or the
  /// down deadline. A path the peer never acknowledged is not judged on
  /// keepalives (its gateway starting, the link's handshake under way).
  /// Zero: no keepalive (an idle path is never judged).
  Duration path_keepalive = Duration::from_ms(100);
  bool integrity_check = true;  ///< CRC-32C in the tag room while unencrypted
  bool elide_payload = false;   ///< simulator only: STREAM bytes counted, not carried
  /// Forward error correction: adaptive (the default) codes a lossy path's
  /// packets when a retransmission round trip costs more than the repair
  /// overhead, never a clean one; kOff is selective repeat alone.
  FecConfig fec;
};

/// Counters and gauges of one path (Connection::path_stats).
struct PathStats {
  PathState state = PathState::kUp;
  BitsPerSec link_rate;  ///< configured
  Duration base_rtt;     ///< configured
  Duration srtt, min_rtt, rttvar, latest_rtt;
  Bytes cwnd = 0;
  BitsPerSec pacing_rate;
  BitsPerSec btlbw;  ///< max delivery rate over ~10 rounds
  Bytes bytes_in_flight = 0;
  uint64_t packets_sent = 0;
  uint64_t bytes_sent = 0;  ///< wire bytes
  uint64_t packets_acked = 0;
  uint64_t bytes_acked = 0;  ///< wire bytes
  uint64_t lost_packets = 0;
  uint64_t lost_bytes = 0;
  uint64_t retransmitted_packets = 0;  ///< packets carrying retransmitted stream data
  uint64_t packets_received = 0;       ///< datagrams that arrived on this path
  uint64_t bytes_received = 0;
  uint64_t ptos = 0;
  uint64_t rtos = 0;
  uint64_t probes_sent = 0;      ///< PINGs sent while down
  uint64_t keepalives_sent = 0;  ///< PINGs sent while up and idle (path_keepalive)
  uint64_t downs = 0;            ///< transitions to down
  uint64_t ups = 0;              ///< transitions back to up
  Bytes memory = 0;              ///< what the path's own state holds (sent-packet ring included)
  // Forward error correction on this path (ConnStats has the totals).
  uint64_t fec_source_packets = 0;  ///< data packets sent as FEC source symbols
  uint64_t fec_repair_sent = 0;     ///< REPAIR packets sent
  uint64_t fec_repair_bytes = 0;    ///< their wire bytes
  uint64_t fec_recovered = 0;       ///< the peer's packets of this index rebuilt from repair
  uint32_t fec_k = 0;               ///< current code rate (0: not coding)
  uint32_t fec_m = 0;
};

/// Counters and gauges of a connection: rowand exports them per peer
/// (daemon/rowand/datapath/worker_metrics.cc), librowan per channel
/// (rowan_channel_stats_get). With several paths, counters are totals over
/// the paths; srtt, min_rtt, rttvar and latest_rtt are the lowest-numbered
/// up path's; cwnd, pacing_rate, btlbw and bytes_in_flight are sums over
/// the up paths.
struct ConnStats {
  Duration srtt, min_rtt, rttvar, latest_rtt;
  Bytes cwnd = 0;
  BitsPerSec pacing_rate;
  Bytes bytes_in_flight = 0;
  uint64_t delivered_bytes = 0;  ///< acked by the peer (any retransmission counted once)
  uint64_t packets_sent = 0;
  uint64_t bytes_sent = 0;  ///< wire bytes (header, frames, tag)
  uint64_t stream_bytes_sent = 0;
  uint64_t packets_received = 0;
  uint64_t bytes_received = 0;
  uint64_t retransmitted_packets = 0;  ///< packets carrying retransmitted stream data
  uint64_t retransmitted_bytes = 0;    ///< stream bytes sent again
  uint64_t lost_packets = 0;
  uint64_t lost_bytes = 0;
  uint64_t ptos = 0;  ///< probe timeouts (tail-loss probes)
  uint64_t rtos = 0;
  uint64_t spurious_losses = 0;  ///< packets declared lost and then acked
  uint64_t loss_events = 0;  ///< congestion events: losses of packets sent after the last one began
  BitsPerSec btlbw;          ///< bottleneck bandwidth estimate: max delivery rate over ~10 rounds
  LatencyHistogram rtt_histogram;          ///< every RTT sample (ack delay removed)
  LatencyHistogram queue_delay_histogram;  ///< every RTT sample minus the min RTT
  uint64_t acks_sent = 0;
  uint64_t acks_received = 0;
  uint64_t stream_bytes_received = 0;  ///< new in-order bytes made readable
  uint64_t stream_bytes_read = 0;
  uint64_t stream_bytes_read_in_place = 0;  ///< of those, taken by the StreamSink
  uint64_t rx_timestamped = 0;              ///< datagrams handled with the backend's receive time
  /// Of those, datagrams that arrived after the `now` they were handed in
  /// with (a clock read before a preemption or wait): before receive
  /// timestamps these gave RTT samples below the path.
  uint64_t rx_after_now = 0;
  Duration rx_after_now_max;
  // Drops, by reason.
  uint64_t drop_malformed = 0;
  uint64_t drop_bad_version = 0;
  uint64_t drop_bad_connection_id = 0;
  uint64_t drop_bad_integrity = 0;
  uint64_t drop_duplicate = 0;
  uint64_t drop_flow_control = 0;
  uint64_t drop_too_many_streams = 0;
  uint64_t drop_no_buffer = 0;
  uint64_t drop_invalid_ack = 0;
  uint64_t drop_bad_path = 0;        ///< path index the connection does not have
  uint64_t path_events_dropped = 0;  ///< transitions the owner did not drain in time
  // Forward error correction.
  uint64_t fec_source_packets = 0;   ///< data packets sent as FEC source symbols
  uint64_t fec_repair_sent = 0;      ///< REPAIR packets sent
  uint64_t fec_repair_bytes = 0;     ///< their wire bytes
  uint64_t fec_repair_received = 0;  ///< REPAIR frames received
  uint64_t fec_recovered = 0;        ///< packets rebuilt from repair symbols and acknowledged
  uint64_t fec_unrecoverable = 0;    ///< blocks given up with sources missing
  uint64_t fec_drop_invalid = 0;     ///< FEC frames or rebuilt packets refused (malformed)
  uint64_t fec_held_acked =
      0;               ///< sender: packets past loss thresholds the peer then acked (rebuilt)
  uint32_t fec_k = 0;  ///< current code rate (0: not coding)
  uint32_t fec_m = 0;
  // Memory.
  Bytes send_buffer_capacity = 0;
  Bytes send_buffer_used = 0;
  Bytes recv_buffer_capacity = 0;
  Bytes recv_buffer_used = 0;
  uint64_t send_window_growths = 0;  ///< times the send buffer doubled (window_growth)
  uint64_t recv_window_growths = 0;  ///< times the receive window doubled
};

/// Smallest buffer poll_send needs per datagram when payload is elided.
inline constexpr uint32_t kMinElidedBuffer = 512;

/// A buffer poll_send fills with one datagram (capacity >= max_datagram, or
/// >= kMinElidedBuffer with elide_payload).
struct OutDatagram {
  uint8_t* data = nullptr;
  uint32_t capacity = 0;
  uint32_t len = 0;       ///< bytes written
  uint32_t wire_len = 0;  ///< bytes on the wire (len plus elided payload)
  PathId path;            ///< the path it must leave on (set by poll_send)
  /// Set by the caller: stream bytes may be left in the send buffer as
  /// pieces (io::TxPiece) instead of copied into `data`, for a backend that
  /// takes them (PacketIo::takes_pieces) and reads them before the next
  /// call into the connection. Only datagrams without a CRC get pieces (it
  /// reads the whole datagram here).
  bool pieces_ok = false;
  uint8_t npieces = 0;  ///< set by poll_send
  std::array<io::TxPiece, io::kMaxTxPieces> pieces{};
};

class ConnectionPeer;  // tests

/// Takes stream data straight out of a received datagram (Connection::
/// set_stream_sink). Called, during on_datagram, with the bytes of a STREAM
/// frame that start at the stream's read offset while its receive buffer
/// holds nothing unread; returns how many of the leading bytes it took, which
/// then count as read. What it leaves goes into the stream's buffer and is
/// read as usual. It must not call back into the connection.
class StreamSink {
 public:
  virtual ~StreamSink() = default;
  virtual size_t on_stream_data(uint64_t id, const uint8_t* data, size_t len) noexcept = 0;
};

class Connection {
 public:
  /// `clock` is only handed to the congestion controller (for its initial
  /// state); the connection itself uses the `now` of each call.
  /// Throws cc::CcParamError for an unknown algorithm or bad parameters,
  /// std::invalid_argument for more than kMaxPaths paths.
  Connection(const TransportConfig& config, const Clock& clock, TimePoint now);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // ---- Application side -------------------------------------------------
  /// Queues up to `len` bytes on stream `id` (opened on first use); returns
  /// the bytes accepted, fewer when the send buffer is full. `fin` is applied
  /// only when every byte was accepted. `data` may be null with elide_payload.
  size_t write(uint64_t id, const uint8_t* data, size_t len, bool fin, TimePoint now) noexcept {
    return write(id, nullptr, 0, data, len, fin, now);
  }
  /// The same for `head` then `data` as one write: the bytes go into the
  /// send buffer straight from both (a record header and the packet behind
  /// it need no assembly copy). Returns the bytes accepted of the two.
  size_t write(uint64_t id, const uint8_t* head, size_t head_len, const uint8_t* data, size_t len,
               bool fin, TimePoint now) noexcept;
  /// The application holds at least `bytes` more than the send buffer took
  /// (a short write() says so by itself): the connection is in bulk
  /// transfer, where FEC repair would displace goodput (docs/wan-transport.md,
  /// "Bulk transfer is not coded").
  void note_backlog(TimePoint now, uint64_t bytes) noexcept {
    backlog_at_ = now;
    backlog_bytes_ = std::max<uint64_t>(backlog_bytes_, bytes);
  }
  /// Copies up to `len` in-order bytes of stream `id`; sets *fin when the
  /// stream's last byte has been read. `out` may be null (discard).
  size_t read(uint64_t id, uint8_t* out, size_t len, bool* fin, TimePoint now) noexcept;
  /// Copies up to `len` in-order bytes of stream `id` without consuming them.
  size_t peek(uint64_t id, uint8_t* out, size_t len) const noexcept;
  /// In-order data goes to `sink` first (null: none), one copy fewer than
  /// through the stream's buffer and read().
  void set_stream_sink(StreamSink* sink) noexcept { sink_ = sink; }
  /// In-order bytes ready on stream `id`.
  uint64_t readable(uint64_t id) const noexcept;
  /// Pops a stream that got readable data (each stream at most once until read).
  bool next_readable(uint64_t* id) noexcept;
  /// Bytes write() would accept now (connection send buffer).
  Bytes send_buffer_free() const noexcept;
  /// Stream bytes written but not yet acked, all streams.
  Bytes unacked_bytes() const noexcept { return send_buffered_; }
  /// Stream bytes written on `id` but not yet acked (0 for an unknown stream).
  Bytes stream_unacked(uint64_t id) const noexcept;
  /// The send buffer's budget (what unacked_bytes() may reach).
  Bytes send_buffer_capacity() const noexcept { return send_capacity_; }
  /// Sends CLOSE and stops the connection.
  void close(uint16_t code, TimePoint now) noexcept;
  /// Keepalive: the next poll_send sends one ack-eliciting PING even with
  /// nothing else to send (or rides on the next data packet); the peer's ACK
  /// of it is a sign of life. No-op once closed or while a probe is pending.
  void ping() noexcept;
  bool closed() const noexcept { return closed_; }
  bool peer_closed() const noexcept { return peer_closed_; }

  // ---- Network side -----------------------------------------------------
  /// A received datagram (its bytes are not kept). `rx_time`, when the
  /// backend knows it (a kernel receive timestamp), is when it arrived: RTT
  /// samples and the ACK delay reported to the peer are measured from it
  /// instead of from `now`, which may have been read before the datagram
  /// arrived (a preempted event loop: the sample would read below the path)
  /// or long after (a late one: the sample would carry the lateness). Zero,
  /// or more than kRxTimeSlack away from `now`: `now` is used.
  /// `path`: the path (link) it arrived on; ACKs for it leave on that path.
  void on_datagram(const uint8_t* data, size_t len, io::Ecn ecn, TimePoint now,
                   TimePoint rx_time = TimePoint(), PathId path = PathId{}) noexcept;
  static constexpr Duration kRxTimeSlack = Duration::from_s(1);
  /// Fills up to out.size() datagrams that may leave at `now` (pacer, cwnd,
  /// flow control permitting; ACKs and probes are exempt); returns the count.
  /// Each one's `path` says where it must be sent.
  size_t poll_send(std::span<OutDatagram> out, TimePoint now) noexcept;
  /// Runs expired timers (loss time, PTO/RTO, delayed ACK).
  void on_timeout(TimePoint now) noexcept;
  /// When the connection next needs on_timeout()/poll_send(); infinite if never.
  TimePoint next_timeout() const noexcept;

  const ConnStats& stats() noexcept;
  /// Path 0's congestion controller (`path`'s with an argument).
  const cc::CongestionController& cc(PathId path = PathId{}) const {
    return *paths_[path.index]->cc;
  }

  // ---- Paths ------------------------------------------------------------
  /// Control path: adds a path (the next index) with its own packet numbers,
  /// RTT, loss detection, congestion controller (the configured algorithm)
  /// and pacer; it starts up. Buffers and windows keep the size they got at
  /// construction (list the paths in TransportConfig::paths to size them).
  /// Throws std::invalid_argument beyond kMaxPaths, cc::CcParamError.
  PathId add_path(const PathConfig& path, const Clock& clock, TimePoint now);
  size_t path_count() const noexcept { return paths_.size(); }
  /// `path` must be below path_count().
  const PathStats& path_stats(PathId path) noexcept;
  /// Pops the oldest path transition not yet drained; false when none. The
  /// connection keeps the newest 64; older ones are counted in
  /// ConnStats::path_events_dropped.
  bool next_path_event(PathEvent* ev) noexcept;
  /// Control path (config reload), on the connection's thread between
  /// packets: replaces the congestion controller by `algorithm` with
  /// `params`. Streams, data in flight and loss recovery stay; the new
  /// controller starts from its own initial state, told the path's measured
  /// min RTT (instead of the configured one) as its base RTT; every path
  /// gets one. Throws
  /// cc::CcParamError (the old controller stays) for an unknown name or bad
  /// parameters.
  void replace_cc(const std::string& algorithm, const cc::CcParams& params, const Clock& clock);
  const TransportConfig& config() const { return cfg_; }
  Bytes bdp() const { return bdp_; }  ///< over all paths: sum of rates × longest RTT

 private:
  friend class ConnectionPeer;

  // kProbe: a PING sent on a down path, outside its flight and its CC.
  enum class PacketState : uint8_t { kUnused, kInFlight, kAcked, kLost, kNotInFlight, kProbe };
  static constexpr int kMaxFramesPerPacket = 4;
  static constexpr size_t kMaxPathEvents = 64;
  struct SentFrame {
    uint32_t slot;
    uint32_t length;
    uint64_t offset;
    bool fin;
  };
  struct SentPacket {
    uint64_t pn = 0;
    TimePoint sent_time;
    uint32_t bytes = 0;  // wire bytes
    PacketState state = PacketState::kUnused;
    bool has_max_data = false;
    uint8_t nframes = 0;
    uint32_t msd_slot = kNoChunk;  // stream whose MAX_STREAM_DATA rode along
    bool fec_source = false;       // a source symbol of FEC block fec_block
    bool fec_held = false;         // loss detection waited for its block's repair
    bool fec_repair = false;       // a REPAIR packet (no stream data)
    uint32_t fec_block = 0;
    DeliveryStamp rate;  // delivery-rate sampler state when it left
    SentFrame frames[kMaxFramesPerPacket];
  };
  struct Stream {
    uint64_t id = 0;
    uint32_t slot = 0;
    // Send side.
    ChunkRing sbuf;
    uint64_t write_end = 0;
    uint64_t next_new = 0;
    uint64_t acked_floor = 0;
    RangeSet acked;  // above acked_floor
    RangeSet lost;
    uint64_t peer_max = 0;  // peer's MAX_STREAM_DATA
    bool fin_written = false;
    bool fin_sent = false;
    bool fin_acked = false;
    bool fin_lost = false;
    bool in_new_queue = false;
    bool in_retx_queue = false;
    // Receive side.
    ChunkRing rbuf;
    uint64_t read_offset = 0;
    uint64_t contiguous_end = 0;
    uint64_t highest_received = 0;
    uint64_t final_size = UINT64_MAX;
    RangeSet received;            // above contiguous_end
    uint64_t max_advertised = 0;  // our MAX_STREAM_DATA
    bool fin_read = false;
    bool in_readable_queue = false;
    bool msd_pending = false;
  };
  /// Simple power-of-two ring queue of stream slots.
  struct SlotQueue {
    std::vector<uint32_t> v;
    size_t head = 0, size = 0;
    void push(uint32_t s);
    uint32_t pop();
    bool empty() const { return size == 0; }
  };
  /// One path: our packet-number space on it (what we sent, its RTT, loss
  /// detection, CC and pacer) and the peer's space of the same index (what
  /// we received numbered in it, and our ACKs of that).
  struct Path {
    Path(PathId id, const PathConfig& pc, size_t ring, TimePoint now);
    SentPacket& sent(uint64_t pn) { return sent_ring[pn & (sent_ring.size() - 1)]; }

    PathId id;
    PathConfig cfg;  // resolved: never zero
    cc::ControllerPtr cc;
    Pacer pacer;
    RttEstimator rtt;
    DeliveryRateSampler rate;
    PathState state = PathState::kUp;
    // Sent packets.
    std::vector<SentPacket> sent_ring;
    uint64_t next_pn = 0;
    uint64_t first_pn = 0;  // oldest packet kept
    uint64_t largest_acked = 0;
    bool any_acked = false;
    IntervalSet unacked_holes{64};  // in flight, below largest_acked
    IntervalSet lost_pns{64};       // declared lost, kept for spurious detection
    Bytes bytes_in_flight = 0;
    uint32_t ack_eliciting_in_flight = 0;
    TimePoint last_ack_eliciting_sent;
    TimePoint loss_time = TimePoint::infinite();
    uint32_t pto_count = 0;
    uint32_t probes_pending = 0;
    bool idle_reported = false;
    bool cwnd_ok = true;  // at its last evaluation in poll_send
    bool held = false;    // ready but left to faster paths by the scheduler
    uint64_t peer_ce_count = 0;
    TimePoint loss_event_start;  ///< when the current loss event (recovery episode) began
    TimePoint ack_wait_from;     ///< last newly-acking ACK, or the start of the flight since
    bool rto_since_ack = false;  ///< an RTO emptied the flight: a new flight is no fresh start
    TimePoint next_probe = TimePoint::infinite();  ///< down: when the next PING leaves
    Duration probe_interval;
    bool keepalive_pending = false;     ///< up and idle: the next poll_send sends a PING
    bool keepalive_unanswered = false;  ///< a keepalive left and nothing was acked since
    TimePoint last_keepalive;
    // The peer's packet-number space of this index (our ACKs).
    IntervalSet recv_pns{wire::kMaxAckRanges + 1};
    uint64_t recv_floor = 0;
    uint64_t largest_received = 0;
    bool any_received = false;
    TimePoint largest_received_time;
    uint32_t unacked_eliciting = 0;
    bool ack_unsent = false;  // packets received since our last ACK frame
    TimePoint ack_deadline = TimePoint::infinite();
    uint64_t ce_received = 0;
    uint16_t ack_return = 0;  // path our ACKs of this space leave on (where it arrives)
    PathStats stats;
    /// This path's FEC: our encoder and loss reference, and the decoder of
    /// the peer's packet-number space of this index.
    std::unique_ptr<FecCoder> fec;
  };

  Stream* find_stream(uint64_t id) const noexcept;
  Stream* open_stream(uint64_t id) noexcept;
  void grow_sent_ring(Path& path);
  void trim_sent(Path& path, TimePoint now);
  Path& make_path(const PathConfig& pc, const Clock& clock, TimePoint now);

  // Receive path.
  struct Validator;
  struct Applier;
  bool apply_stream(const wire::StreamFrame& f, TimePoint now) noexcept;
  void apply_ack(const wire::AckFrame& a, TimePoint now) noexcept;
  void on_packet_acked(SentPacket& p, TimePoint now);
  static bool queue_full(const Path& path) noexcept;
  void on_packet_lost(Path& path, SentPacket& p);
  void record_received_pn(Path& space, uint64_t pn, bool ack_eliciting, TimePoint now);
  void on_fec_status(Path& space, fec::Status st, TimePoint now) noexcept;
  void apply_recovered(Path& space, std::span<const uint8_t> packet, TimePoint now) noexcept;
  void update_flow_control_credit(Stream& s);

  // Loss recovery and path failover.
  void detect_losses(Path& path, TimePoint now, Bytes* lost_bytes, uint32_t* lost_packets);
  void on_pto(Path& path, TimePoint now);
  void on_rto(Path& path, TimePoint now);
  /// Declares everything in flight on `path` lost and tells its CC (on_rto).
  void lose_flight(Path& path, TimePoint now);
  Duration pto_base(const Path& path) const;
  Duration backed_off_pto(const Path& path) const;   ///< pto_base × 2^pto_count, capped by max_pto
  TimePoint down_deadline(const Path& path) const;   ///< infinite when it cannot go down
  TimePoint keepalive_time(const Path& path) const;  ///< infinite when none is due
  void declare_down(Path& path, TimePoint now);
  void bring_up(Path& path, TimePoint now);
  void push_path_event(const Path& path, TimePoint now);
  void queue_retx(Stream& s);

  // Window growth (TransportConfig::window_growth).
  Bytes stream_window_for(Bytes conn_window) const noexcept;
  void grow_send_window() noexcept;
  void grow_recv_window() noexcept;
  void on_peer_blocked(uint64_t limit) noexcept;

  // Send path.
  bool has_stream_data() const noexcept;
  bool has_control_data() const noexcept;
  bool ack_due(const Path& space, TimePoint now) const noexcept;
  Path* pick_data_path(TimePoint now) noexcept;
  Path* pick_control_path(TimePoint now) noexcept;
  size_t build_packet(OutDatagram& out, Path& path, TimePoint now, bool allow_data, bool probe);
  size_t build_repair_packet(OutDatagram& out, Path& path, TimePoint now);
  /// Seals the packet being built on `path` (header, tag) and records it as sent.
  size_t finish_packet(OutDatagram& out, Path& path, SentPacket& sp, size_t frames_len,
                       Bytes elided, bool eliciting, bool retx, bool keepalive, TimePoint now);
  /// Places `len` bytes of stream `s` from offset `lo` at `dst`: copied, or,
  /// with `pieces` (the datagram being built, `dst` inside it), left where
  /// they lie as its pieces while it has room for them.
  void place_stream_data(const Stream& s, uint64_t lo, uint8_t* dst, uint64_t len,
                         OutDatagram* pieces);
  bool write_stream_frame(wire::FrameWriter& w, SentPacket& p, size_t budget, OutDatagram* pieces,
                          bool* retx, Bytes* payload_bytes);
  void fill_ack_frame(const Path& space, wire::AckFrame& a, TimePoint now) const;
  Path& primary() noexcept;  ///< lowest-numbered up path (path 0 when none is up)

  TransportConfig cfg_;
  std::vector<std::unique_ptr<Path>> paths_;
  uint32_t up_paths_ = 0;
  Bytes bdp_ = 0;
  uint32_t overhead_ = 0;     // header and CRC per datagram (wire::overhead)
  uint32_t mss_payload_ = 0;  // frame bytes per datagram
  size_t ring_size_ = 1024;   // initial sent-packet ring per path

  // Streams.
  std::vector<std::unique_ptr<Stream>> streams_;
  // id -> slot. Ids below max_streams (rowand's streams are flow-table
  // slots, librowan's count up from 0) are looked up by index, the rest in
  // the map: a lookup per written record and per received STREAM frame.
  std::vector<uint32_t> stream_direct_;  // id -> slot + 1 (0: none)
  StreamSink* sink_ = nullptr;
  std::unordered_map<uint64_t, uint32_t> stream_index_;
  SlotQueue new_queue_, retx_queue_, readable_queue_;
  ChunkPool send_pool_;
  ChunkPool recv_pool_;
  Bytes send_capacity_ = 0;
  Bytes send_max_ = 0;       // what send_capacity_ may grow to
  Bytes send_buffered_ = 0;  // written and not yet acked
  Bytes stream_window_ = 0;
  // The per-stream window before any growth: both ends are configured
  // alike, so this is the credit each assumes the other gives a new stream
  // (the grown stream_window_ is this end's alone; MAX_STREAM_DATA raises a
  // new stream's credit to it).
  Bytes initial_stream_window_ = 0;
  uint64_t written_total_ = 0;  // sum of write_end over streams

  // Connection flow control.
  uint64_t peer_max_data_ = 0;   // peer's limit on what we send
  uint64_t sent_new_total_ = 0;  // sum of next_new over streams
  TimePoint backlog_at_;         // last short write() or note_backlog()
  uint64_t backlog_bytes_ = 0;   // what the application held back then, less what it wrote since
  uint64_t recv_window_ = 0;
  uint64_t recv_max_ = 0;       // what recv_window_ may grow to
  uint64_t recv_grown_at_ = 0;  // max_data_advertised_ when it last grew
  uint64_t max_data_advertised_ = 0;
  uint64_t recv_highest_total_ = 0;  // sum of highest_received
  uint64_t consumed_total_ = 0;      // sum of read_offset
  bool max_data_pending_ = false;
  bool data_blocked_pending_ = false;  // DATA_BLOCKED(peer_max_data_) to send
  uint64_t blocked_reported_ = 0;      // the credit limit last reported blocked
  std::vector<uint32_t> msd_pending_;  // slots

  TimePoint rx_time_;     ///< arrival time of the datagram being handled (on_datagram)
  uint16_t rx_path_ = 0;  ///< path the datagram being handled arrived on

  // Path transitions not yet drained (a ring of kMaxPathEvents).
  std::vector<PathEvent> path_events_;
  size_t path_event_head_ = 0, path_event_count_ = 0;

  bool closed_ = false;
  bool peer_closed_ = false;
  bool close_pending_ = false;
  uint16_t close_code_ = 0;

  ConnStats stats_;
  wire::AckFrame ack_scratch_;
};

}  // namespace rowan::transport
