// Flow classification for passthrough: RoCEv2 packets are keyed by QP flow
// (source, destination, destination QP), everything else by 5-tuple. Each
// flow owns one transport stream toward its peer, so a loss on one flow never
// blocks another.
//
// The table is fixed-size (open addressing, linear probing, backward-shift
// deletion): no allocation when flows come and go. Threading: the packet
// lcore only.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "base/units.h"
#include "codec/roce.h"
#include "net/vlan.h"

namespace rowan::gw {

enum class FlowKind : uint8_t { kRoce, kTcp, kUdp, kOther };
const char* to_string(FlowKind k);

struct FlowKey {
  roce::IpAddr src;
  roce::IpAddr dst;
  uint32_t qp = 0;  ///< RoCE: destination QP
  uint16_t sport = 0;
  uint16_t dport = 0;
  uint8_t proto = 0;
  FlowKind kind = FlowKind::kOther;

  bool operator==(const FlowKey&) const = default;
  uint64_t hash() const;
};

struct Flow {
  FlowKey key;
  bool used = false;
  uint32_t peer = 0;
  uint64_t stream = 0;  ///< transport stream id (== slot index)
  TimePoint first_seen;
  TimePoint last_seen;
  uint64_t packets = 0;
  uint64_t bytes = 0;
  uint64_t ce_marked = 0;
  uint64_t dropped = 0;
  uint64_t window_bytes = 0;       ///< bytes written in the current backlog window
  uint64_t last_window_bytes = 0;  ///< bytes written in the previous window
  uint32_t offered_epoch = 0;      ///< last backlog window a packet of this flow arrived in
  VlanTag tag;  ///< the 802.1Q tag of its host's last frame (vlan.h; carried with its records)
  /// Split mode (split_engine.h): the slot + 1 of the split state this flow
  /// holds (0: none), where its local host is the requester (ingress) and
  /// where it is the responder (egress; this flow carries its answers). A
  /// flow holding either is not expired here: the split engine releases it.
  uint32_t split_ingress = 0;
  uint32_t split_egress = 0;
  std::vector<uint8_t> tail;  ///< part of a record the send buffer did not take yet
};

class FlowTable {
 public:
  explicit FlowTable(uint32_t capacity);

  /// The flow for `key`, created when absent (nullptr when the table is full).
  /// `created` tells which.
  Flow* find_or_add(const FlowKey& key, TimePoint now, bool* created) noexcept;
  Flow* find(const FlowKey& key) noexcept;
  /// Removes flows idle since before `cutoff`, with nothing pending and no
  /// split state; returns how many.
  uint32_t expire(TimePoint cutoff) noexcept;
  uint32_t size() const { return size_; }
  uint32_t capacity() const { return static_cast<uint32_t>(flows_.size()); }
  const std::vector<Flow>& flows() const { return flows_; }
  std::vector<Flow>& flows() { return flows_; }

 private:
  void erase_slot(uint32_t slot) noexcept;
  std::vector<Flow> flows_;  ///< slot → flow
  /// hash bucket → the hash's upper 32 bits (a tag compared before the key)
  /// | slot + 1 in the lower 32 (0 = empty)
  std::vector<uint64_t> index_;
  static constexpr uint64_t kSlotMask = 0xFFFFFFFFULL;
  std::vector<uint32_t> free_;  ///< free slots (stack)
  uint32_t size_ = 0;
  uint64_t mask_ = 0;
};

}  // namespace rowan::gw
