#include "datapath/flow_table.h"

#include <cstring>

#include "net/packet_util.h"

namespace rowan::gw {

const char* to_string(FlowKind k) {
  switch (k) {
    case FlowKind::kRoce:
      return "roce";
    case FlowKind::kTcp:
      return "tcp";
    case FlowKind::kUdp:
      return "udp";
    case FlowKind::kOther:
      break;
  }
  return "ip";
}

uint64_t FlowKey::hash() const {
  // Independent multiplies of the key's words (they pipeline), one murmur
  // finalizer: a few ns where byte-wise FNV took a dependent multiply per
  // byte. Whole 16-byte addresses: IPv4 keys keep the rest zero, and
  // operator== compares all of them too.
  uint64_t w[4];
  std::memcpy(w, src.bytes.data(), 16);
  std::memcpy(w + 2, dst.bytes.data(), 16);
  const uint64_t rest = uint64_t{qp} ^ (uint64_t{sport} << 24) ^ (uint64_t{dport} << 40) ^
                        (uint64_t{proto} << 56) ^ (uint64_t{static_cast<uint8_t>(kind)} << 32) ^
                        (uint64_t{src.version} << 60);
  uint64_t h = w[0] * 0x9E3779B97F4A7C15ULL ^ w[1] * 0xC2B2AE3D27D4EB4FULL ^
               w[2] * 0x165667B19E3779F9ULL ^ w[3] * 0x27D4EB2F165667C5ULL ^
               rest * 0xFF51AFD7ED558CCDULL;
  return pkt::fmix64(h);
}

FlowTable::FlowTable(uint32_t capacity) : flows_(capacity) {
  uint64_t buckets = 1;
  while (buckets < 2ULL * capacity) buckets <<= 1;
  index_.assign(buckets, 0);
  mask_ = buckets - 1;
  free_.reserve(capacity);
  for (uint32_t i = capacity; i > 0; --i) free_.push_back(i - 1);
}

Flow* FlowTable::find(const FlowKey& key) noexcept {
  const uint64_t h = key.hash();
  const uint64_t tag = h >> 32 << 32;
  for (uint64_t b = h & mask_;; b = (b + 1) & mask_) {
    const uint64_t v = index_[b];
    if (v == 0) return nullptr;
    // The tag first: a miss never touches the flow's cache lines.
    if ((v & ~kSlotMask) == tag && flows_[(v & kSlotMask) - 1].key == key) {
      return &flows_[(v & kSlotMask) - 1];
    }
  }
}

Flow* FlowTable::find_or_add(const FlowKey& key, TimePoint now, bool* created) noexcept {
  *created = false;
  const uint64_t h = key.hash();
  const uint64_t tag = h >> 32 << 32;
  uint64_t b = h & mask_;
  for (;; b = (b + 1) & mask_) {
    const uint64_t v = index_[b];
    if (v == 0) break;
    if ((v & ~kSlotMask) == tag && flows_[(v & kSlotMask) - 1].key == key) {
      return &flows_[(v & kSlotMask) - 1];
    }
  }
  if (free_.empty()) return nullptr;
  const uint32_t slot = free_.back();
  free_.pop_back();
  index_[b] = tag | (slot + 1);
  Flow& f = flows_[slot];
  f.key = key;
  f.used = true;
  f.stream = slot;
  f.first_seen = f.last_seen = now;
  f.packets = f.bytes = f.ce_marked = f.dropped = f.window_bytes = f.last_window_bytes = 0;
  f.tail.clear();
  f.split_ingress = f.split_egress = 0;
  f.tag = {};
  ++size_;
  *created = true;
  return &f;
}

void FlowTable::erase_slot(uint32_t slot) noexcept {
  uint64_t b = flows_[slot].key.hash() & mask_;
  while ((index_[b] & kSlotMask) != slot + 1) b = (b + 1) & mask_;
  // Backward-shift deletion keeps every probe chain unbroken.
  uint64_t hole = b;
  for (uint64_t j = (hole + 1) & mask_; index_[j] != 0; j = (j + 1) & mask_) {
    const uint64_t home = flows_[(index_[j] & kSlotMask) - 1].key.hash() & mask_;
    // Move j into the hole when its home is not cyclically in (hole, j].
    const bool between = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
    if (!between) {
      index_[hole] = index_[j];
      hole = j;
    }
  }
  index_[hole] = 0;
  flows_[slot].used = false;
  free_.push_back(slot);
  --size_;
}

uint32_t FlowTable::expire(TimePoint cutoff) noexcept {
  uint32_t n = 0;
  for (uint32_t s = 0; s < flows_.size(); ++s) {
    const Flow& f = flows_[s];
    if (f.used && f.last_seen < cutoff && f.tail.empty() && f.split_ingress == 0 &&
        f.split_egress == 0) {
      erase_slot(s);
      ++n;
    }
  }
  return n;
}

}  // namespace rowan::gw
