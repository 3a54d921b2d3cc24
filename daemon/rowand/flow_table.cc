#include "flow_table.h"

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
  // FNV-1a over the fields, then a murmur finalizer for the low bits.
  uint64_t h = 1469598103934665603ULL;
  auto mix = [&h](const uint8_t* p, size_t n) {
    for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ULL;
  };
  const size_t alen = src.version == 6 ? 16 : 4;
  mix(src.bytes.data(), alen);
  mix(dst.bytes.data(), alen);
  const uint8_t rest[] = {static_cast<uint8_t>(qp),         static_cast<uint8_t>(qp >> 8),
                          static_cast<uint8_t>(qp >> 16),   static_cast<uint8_t>(sport),
                          static_cast<uint8_t>(sport >> 8), static_cast<uint8_t>(dport),
                          static_cast<uint8_t>(dport >> 8), proto,
                          static_cast<uint8_t>(kind)};
  mix(rest, sizeof rest);
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  return h;
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
  for (uint64_t b = key.hash() & mask_;; b = (b + 1) & mask_) {
    const uint32_t v = index_[b];
    if (v == 0) return nullptr;
    if (flows_[v - 1].key == key) return &flows_[v - 1];
  }
}

Flow* FlowTable::find_or_add(const FlowKey& key, TimePoint now, bool* created) noexcept {
  *created = false;
  uint64_t b = key.hash() & mask_;
  for (;; b = (b + 1) & mask_) {
    const uint32_t v = index_[b];
    if (v == 0) break;
    if (flows_[v - 1].key == key) return &flows_[v - 1];
  }
  if (free_.empty()) return nullptr;
  const uint32_t slot = free_.back();
  free_.pop_back();
  index_[b] = slot + 1;
  Flow& f = flows_[slot];
  f.key = key;
  f.used = true;
  f.stream = slot;
  f.first_seen = f.last_seen = now;
  f.packets = f.bytes = f.ce_marked = f.dropped = f.window_bytes = f.last_window_bytes = 0;
  f.tail.clear();
  ++size_;
  *created = true;
  return &f;
}

void FlowTable::erase_slot(uint32_t slot) noexcept {
  uint64_t b = flows_[slot].key.hash() & mask_;
  while (index_[b] != slot + 1) b = (b + 1) & mask_;
  // Backward-shift deletion keeps every probe chain unbroken.
  uint64_t hole = b;
  for (uint64_t j = (hole + 1) & mask_; index_[j] != 0; j = (j + 1) & mask_) {
    const uint64_t home = flows_[index_[j] - 1].key.hash() & mask_;
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
    if (flows_[s].used && flows_[s].last_seen < cutoff && flows_[s].tail.empty()) {
      erase_slot(s);
      ++n;
    }
  }
  return n;
}

}  // namespace rowan::gw
