#include "transport/chunk_buffer.h"

#include <algorithm>
#include <cstring>

namespace rowan::transport {

ChunkPool::ChunkPool(uint32_t chunk_size, uint32_t count, bool backed)
    : chunk_size_(chunk_size),
      count_(0),
      seg_chunks_(std::max<uint32_t>(count, 1)),
      backed_(backed) {
  grow_to(count);
}

void ChunkPool::grow_to(uint32_t count) {
  if (count <= count_) return;
  const uint32_t segs = (count + seg_chunks_ - 1) / seg_chunks_;
  const uint32_t first = count_;
  while (segs_.size() < segs) {
    // Uninitialized: pages are committed as chunks are first written.
    segs_.emplace_back(backed_ ? new uint8_t[static_cast<size_t>(chunk_size_) * seg_chunks_]
                               : nullptr);
  }
  count_ = segs * seg_chunks_;
  free_.reserve(count_);
  // Free chunks are taken from the back: the new ones go under the old.
  free_.insert(free_.begin(), count_ - first, 0);
  for (uint32_t i = 0; i < count_ - first; ++i) free_[i] = count_ - 1 - i;
}

void ChunkRing::grow(uint64_t need) {
  size_t cap = slots_.empty() ? 8 : slots_.size();
  while (cap < need) cap *= 2;
  if (cap == slots_.size()) return;
  std::vector<uint32_t> next(cap, kNoChunk);
  for (uint64_t i = 0; i < count_; ++i) next[i] = slot(i);
  slots_.swap(next);
  head_ = 0;
}

uint64_t ChunkRing::ensure(ChunkPool& pool, uint64_t from, uint64_t to) {
  if (to <= from) return to;
  const uint64_t cs = pool.chunk_size();
  const uint64_t last_slot = (to - 1 - base_) / cs;
  if (last_slot + 1 > count_) {
    grow(last_slot + 1);
    for (uint64_t i = count_; i <= last_slot; ++i) slot(i) = kNoChunk;
    count_ = last_slot + 1;
  }
  for (uint64_t i = (from - base_) / cs; i <= last_slot; ++i) {
    if (slot(i) != kNoChunk) continue;
    const uint32_t c = pool.alloc();
    if (c == kNoChunk) return std::max(from, base_ + i * cs);
    slot(i) = c;
    ++held_;
  }
  return to;
}

void ChunkRing::write(const ChunkPool& pool, uint64_t off, const uint8_t* src, uint64_t n) {
  if (!pool.backed() || src == nullptr) return;
  walk(pool, off, n, [&src](uint8_t* p, uint64_t take) {
    std::memcpy(p, src, take);
    src += take;
    return true;
  });
}

void ChunkRing::read(const ChunkPool& pool, uint64_t off, uint8_t* dst, uint64_t n) const {
  if (!pool.backed() || dst == nullptr) return;
  walk(pool, off, n, [&dst](const uint8_t* p, uint64_t take) {
    std::memcpy(dst, p, take);
    dst += take;
    return true;
  });
}

size_t ChunkRing::runs(const ChunkPool& pool, uint64_t off, uint64_t n, Run* out,
                       size_t max) const {
  if (!pool.backed()) return 0;
  size_t k = 0;
  const bool all = walk(pool, off, n, [&](const uint8_t* p, uint64_t take) {
    if (k == max) return false;
    out[k++] = Run{p, static_cast<uint32_t>(take)};
    return true;
  });
  return all ? k : 0;
}

void ChunkRing::release_below(ChunkPool& pool, uint64_t off) {
  const uint64_t cs = pool.chunk_size();
  while (count_ > 0 && base_ + cs <= off) {
    uint32_t& s = slot(0);
    if (s != kNoChunk) {
      pool.release(s);
      s = kNoChunk;
      --held_;
    }
    head_ = (head_ + 1) & (slots_.size() - 1);
    --count_;
    base_ += cs;
  }
  if (count_ == 0) base_ = off / cs * cs;
}

void ChunkRing::release_all(ChunkPool& pool) {
  for (uint64_t i = 0; i < count_; ++i) {
    uint32_t& s = slot(i);
    if (s != kNoChunk) pool.release(s);
    s = kNoChunk;
  }
  count_ = 0;
  held_ = 0;
}

}  // namespace rowan::transport
