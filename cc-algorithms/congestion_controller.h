// The congestion-control interface every rowan algorithm implements.
//
// Algorithms are pure computation: events come in with `now` already read by
// the caller (the transport reads the clock once per burst), outputs are cwnd,
// pacing rate and send quantum. No I/O, no clock reads, no allocation after
// construction. Pacing is not the algorithm's job: the transport's Pacer wraps
// whatever the algorithm outputs (quiche PacingSender).
//
// Threading: one instance belongs to one connection and is called only from
// the thread (lcore) that owns that connection.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "base/clock.h"
#include "base/units.h"
#include "cc_params.h"

namespace rowan::cc {

/// Delivery-rate sample computed by the transport (Linux tcp_rate.c): bytes
/// delivered between the send of the newest acked packet and this ACK, over
/// max(send interval, ack interval).
struct RateSample {
  Bytes delivered = 0;          ///< bytes newly delivered over `interval`
  Duration interval;            ///< zero when no valid sample this ACK
  bool is_app_limited = false;  ///< sample taken while the sender had nothing to send
  Bytes prior_delivered = 0;    ///< connection's delivered count when the sampled packet left

  BitsPerSec rate() const { return BitsPerSec::from_bytes_per(delivered, interval); }
  bool valid() const { return interval.ns() > 0; }
};

/// Called after each packet leaves the pacer.
struct SentEvent {
  TimePoint now;
  uint64_t packet_number = 0;
  Bytes bytes = 0;
  Bytes in_flight = 0;  ///< in flight after this send, including it
  bool is_retransmission = false;
  bool app_limited = false;  ///< the sender ran out of data before cwnd
};

/// One batched event per processed ACK frame (several packets may be acked
/// and declared lost at once; ACK aggregation from batched I/O shows up here).
struct AckEvent {
  TimePoint now;
  Duration rtt;           ///< latest RTT sample (ack delay removed); zero if none
  Duration min_rtt;       ///< the transport's min RTT over its window; zero if none yet
  Duration ack_delay;     ///< delay the receiver reported
  Bytes acked_bytes = 0;  ///< newly acked by this ACK
  uint32_t acked_packets = 0;
  Bytes lost_bytes = 0;  ///< newly declared lost while processing this ACK
  uint32_t lost_packets = 0;
  Bytes prior_in_flight = 0;          ///< in flight before this ACK
  Bytes in_flight = 0;                ///< in flight after this ACK (acked and lost removed)
  uint32_t ce_count = 0;              ///< newly reported ECN-CE marks
  bool round_start = false;           ///< the first ACK of a new round trip (packet-timed)
  uint64_t round_count = 0;           ///< round trips elapsed on this connection
  TimePoint largest_acked_sent_time;  ///< when the newest acked packet was sent
  RateSample rate;
};

/// Static hints a gateway knows about its link (from config).
struct PathHints {
  BitsPerSec link_rate;  ///< configured rate of the WAN link; zero if unknown
  Duration base_rtt;     ///< configured or measured propagation RTT; zero if unknown
  Bytes mss = 1400;      ///< max payload bytes of one WAN datagram
};

class CongestionController {
 public:
  virtual ~CongestionController() = default;
  CongestionController(const CongestionController&) = delete;
  CongestionController& operator=(const CongestionController&) = delete;

  /// The registered name (e.g. "cubic").
  virtual std::string_view name() const = 0;

  /// After a packet is sent (including retransmissions and probes).
  virtual void on_packet_sent(const SentEvent& ev) { (void)ev; }
  /// Once per processed ACK frame, after loss detection ran on it.
  virtual void on_ack(const AckEvent& ev) = 0;
  /// When the retransmission timeout fired: all in flight is presumed lost.
  virtual void on_rto(TimePoint now) { (void)now; }
  /// When a loss previously reported turned out spurious (the "lost" packet
  /// was acked later). Algorithms that cut on loss may undo the cut.
  virtual void on_spurious_loss(TimePoint now) { (void)now; }
  /// When the connection had nothing to send and nothing in flight.
  virtual void on_idle(TimePoint now) { (void)now; }

  /// Congestion window: the most bytes the transport may keep in flight.
  virtual Bytes cwnd() const = 0;
  /// Rate the pacer releases packets at.
  virtual BitsPerSec pacing_rate() const = 0;
  /// Largest burst the pacer may release at once.
  virtual Bytes send_quantum() const { return 2 * hints_.mss; }

 protected:
  CongestionController(const Clock& clock, const PathHints& hints) : clock_(clock), hints_(hints) {}
  const Clock& clock_;  ///< for initial state only; events carry `now`
  PathHints hints_;
};

using ControllerPtr = std::unique_ptr<CongestionController>;
/// Builds an algorithm; throws CcParamError on bad parameters.
using ControllerFactory = ControllerPtr (*)(const Clock&, const PathHints&, const CcParams&);

}  // namespace rowan::cc
