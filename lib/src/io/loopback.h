// An in-memory PacketIo pair for tests (seastar loopback_socket.hh): two ports
// joined by two one-way channels that really carry the bytes and can delay,
// drop, reorder, duplicate and corrupt datagrams. Deterministic: every random
// choice comes from a seeded generator, and time is the `now` the caller
// passes in (FakeClock or simulated time).
//
// Storage is pre-sized at construction (a slot pool per direction and a heap
// of pending deliveries); sending and receiving do not allocate.
//
// Threading: single-threaded; both ports must be driven from one thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <vector>

#include "io/packet_io.h"

namespace rowan::io {

/// How one direction of a loopback link mistreats datagrams.
struct Impairment {
  Duration delay;          ///< one-way delay added to every datagram
  double loss = 0.0;       ///< probability a datagram is dropped
  double duplicate = 0.0;  ///< probability a datagram is delivered twice
  double reorder = 0.0;    ///< probability a datagram is held back
  Duration reorder_extra;  ///< how long a held-back datagram waits extra
  double corrupt = 0.0;    ///< probability one byte of a datagram is flipped
  double ce_mark = 0.0;    ///< probability a datagram arrives CE-marked
};

/// What a test filter decides for one datagram.
enum class Verdict : uint8_t { kPass, kDrop, kCorrupt, kDuplicate };

/// Test hook: called for each datagram entering a direction with its bytes and
/// its sequence number in that direction (0, 1, 2, ...). Test code only.
using LoopbackFilter = std::function<Verdict(const uint8_t* data, uint32_t len, uint64_t seq)>;

/// Counters of one direction.
struct ChannelStats {
  uint64_t sent = 0;
  uint64_t delivered = 0;
  uint64_t dropped = 0;
  uint64_t duplicated = 0;
  uint64_t reordered = 0;
  uint64_t corrupted = 0;
  uint64_t overflow = 0;  ///< dropped because the channel held `capacity` datagrams
};

class LoopbackLink;

/// One end of a LoopbackLink.
class LoopbackPort final : public PacketIo {
 public:
  size_t send_burst(std::span<const TxDatagram> pkts, TimePoint now) noexcept override;
  size_t recv_burst(std::span<RxDatagram> bufs, TimePoint now) noexcept override;
  TimePoint next_rx_time() const noexcept override;
  uint32_t max_datagram() const noexcept override;
  const IoStats& stats() const noexcept override { return stats_; }

 private:
  friend class LoopbackLink;
  LoopbackPort(LoopbackLink& link, int side) : link_(link), side_(side) {}
  LoopbackLink& link_;
  int side_;
  IoStats stats_;
};

class LoopbackLink {
 public:
  /// `capacity`: datagrams each direction can hold in flight (pre-allocated).
  LoopbackLink(uint32_t max_datagram, uint32_t capacity, uint64_t seed);
  LoopbackLink(const LoopbackLink&) = delete;
  LoopbackLink& operator=(const LoopbackLink&) = delete;

  LoopbackPort& a() { return a_; }
  LoopbackPort& b() { return b_; }

  /// Impairment of the direction a→b (dir 0) or b→a (dir 1). May change any time.
  void set_impairment(int dir, const Impairment& imp) { chan_[dir].imp = imp; }
  void set_filter(int dir, LoopbackFilter f) { chan_[dir].filter = std::move(f); }
  const ChannelStats& channel_stats(int dir) const { return chan_[dir].stats; }
  /// Datagrams currently travelling in direction `dir`.
  size_t in_flight(int dir) const { return chan_[dir].heap.size(); }

 private:
  friend class LoopbackPort;
  struct Pending {
    TimePoint at;
    uint64_t order;  // FIFO among equal times
    uint32_t slot;
    uint32_t len;
    Ecn ecn;
  };
  struct Channel {
    Impairment imp;
    LoopbackFilter filter;
    std::vector<uint8_t> storage;  // capacity × max_datagram
    std::vector<uint32_t> free_slots;
    std::vector<Pending> heap;  // min-heap on (at, order)
    uint64_t seq = 0;
    uint64_t order = 0;
    ChannelStats stats;
  };

  size_t send(int dir, std::span<const TxDatagram> pkts, TimePoint now) noexcept;
  size_t recv(int dir, std::span<RxDatagram> bufs, TimePoint now, IoStats& st) noexcept;
  bool enqueue(Channel& c, const uint8_t* data, uint32_t len, Ecn ecn, TimePoint at,
               bool corrupt) noexcept;
  double uniform() noexcept { return std::uniform_real_distribution<double>(0.0, 1.0)(rng_); }

  uint32_t max_datagram_;
  std::mt19937_64 rng_;
  Channel chan_[2];
  LoopbackPort a_{*this, 0};
  LoopbackPort b_{*this, 1};
};

}  // namespace rowan::io
