// The log lines of a peer's life: up, down (an outage), link-security
// handshakes and restarts of the peer, each logged once when it happens, with
// the peer's name, and rate-limited so a flapping link cannot flood the
// journal.
//
// Pure policy on observed counters (no clock reads, no I/O): the packet loop's
// publish() (every 100 ms, never per packet) feeds each peer's state and
// writes the lines this returns. Threading: the packet-loop thread only.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "base/units.h"
#include "datapath/peer_health.h"

namespace rowan::gw {

class PeerEvents {
 public:
  /// What the gateway knows of the peer at one publish.
  struct Observation {
    bool up = false;
    bool seen = false;           ///< a datagram ever arrived
    uint64_t outages = 0;        ///< PeerHealth::outages()
    Duration last_outage;        ///< PeerHealth::last_outage(): length of the last one
    uint64_t handshakes = 0;     ///< link-security sessions confirmed (0 on an insecure link)
    uint64_t peer_restarts = 0;  ///< handshakes from a new incarnation of the peer
  };

  enum class Level : uint8_t { kInfo, kWarn };
  struct Line {
    Level level;
    std::string text;
  };

  /// Lines of one kind at most this often per peer; the rest are counted and
  /// the count goes into the next line of that kind.
  static constexpr Duration kMinInterval = Duration::from_s(10);

  explicit PeerEvents(std::string peer) : peer_(std::move(peer)) {}

  /// The lines for what changed since the last call.
  std::vector<Line> observe(const Observation& o, TimePoint now) {
    std::vector<Line> out;
    if (o.up && !last_.up) {
      if (!last_.seen) {
        emit(out, kUp, now, Level::kInfo, fmt::format("peer {}: up", peer_));
      } else {
        emit(out, kUp, now, Level::kInfo,
             fmt::format("peer {}: up again after an outage of {:.1f} s ({} outage(s) so far)",
                         peer_, o.last_outage.seconds(), o.outages));
      }
    } else if (!o.up && last_.up) {
      emit(out, kDown, now, Level::kWarn,
           fmt::format("peer {}: down: no datagram for {:.0f} s (outage {})", peer_,
                       PeerHealth::kDeadAfter.seconds(), o.outages));
    }
    if (o.handshakes > last_.handshakes) {
      emit(out, kHandshake, now, Level::kInfo,
           fmt::format("peer {}: link-security handshake completed ({} so far)", peer_,
                       o.handshakes));
    }
    if (o.peer_restarts > last_.peer_restarts) {
      emit(out, kRestart, now, Level::kWarn,
           fmt::format("peer {}: the peer restarted (a new incarnation); its transport is reset",
                       peer_));
    }
    last_ = o;
    return out;
  }

  /// The line for path `path` (over link `link`) going down or coming back
  /// up (Connection::next_path_event), or none when this kind of line was
  /// logged for that path less than kMinInterval ago.
  std::vector<Line> path_event(uint32_t path, const std::string& link, bool up, TimePoint now) {
    std::vector<Line> out;
    if (path_limits_.size() <= path) path_limits_.resize(path + 1);
    Limit& l = path_limits_[path][up ? 1 : 0];
    std::string text =
        up ? fmt::format("peer {}: path {} (link {}) up again", peer_, path, link)
           : fmt::format(
                 "peer {}: path {} (link {}) down: its acknowledgements stopped; its data "
                 "goes over the other paths",
                 peer_, path, link);
    emit_limited(out, l, now, up ? Level::kInfo : Level::kWarn, std::move(text));
    return out;
  }

 private:
  enum Kind : uint8_t { kUp, kDown, kHandshake, kRestart, kKinds };

  struct Limit {
    TimePoint last;
    uint64_t suppressed = 0;
    bool ever = false;
  };

  void emit(std::vector<Line>& out, Kind k, TimePoint now, Level level, std::string text) {
    emit_limited(out, limits_[k], now, level, std::move(text));
  }
  void emit_limited(std::vector<Line>& out, Limit& l, TimePoint now, Level level,
                    std::string text) {
    if (l.ever && now - l.last < kMinInterval) {
      ++l.suppressed;
      return;
    }
    if (l.suppressed > 0) {
      text += fmt::format(" ({} more like it in the last {:.0f} s not logged)", l.suppressed,
                          (now - l.last).seconds());
    }
    l = Limit{now, 0, true};
    out.push_back({level, std::move(text)});
  }

  std::string peer_;
  Observation last_;
  Limit limits_[kKinds];
  std::vector<std::array<Limit, 2>> path_limits_;  ///< per path: [down, up]
};

}  // namespace rowan::gw
