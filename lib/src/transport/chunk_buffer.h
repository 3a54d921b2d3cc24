// Stream byte storage: a fixed pool of equal chunks per connection direction,
// and per stream a ring of chunk slots mapping stream offsets onto chunks.
//
// The pool is allocated once when the connection is created and never grows:
// it is the memory bound of that direction's buffering (docs/wan-transport.md,
// "Buffers and flow control"). A pool built `backed = false` only counts
// chunks and stores no bytes: the simulator's ELIDED mode, where the same
// accounting runs without copying payload.
//
// Threading: owned by one connection; single-threaded.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

namespace rowan::transport {

inline constexpr uint32_t kNoChunk = 0xffffffffU;

class ChunkPool {
 public:
  ChunkPool(uint32_t chunk_size, uint32_t count, bool backed);
  ChunkPool(const ChunkPool&) = delete;
  ChunkPool& operator=(const ChunkPool&) = delete;

  uint32_t alloc() {
    if (free_.empty()) return kNoChunk;
    const uint32_t c = free_.back();
    free_.pop_back();
    return c;
  }
  void release(uint32_t c) { free_.push_back(c); }
  uint8_t* data(uint32_t c) const {
    if (!backed_) return nullptr;
    // Most pools never grow: their one segment needs no division.
    if (c < seg_chunks_) return segs_[0].get() + static_cast<size_t>(c) * chunk_size_;
    return segs_[c / seg_chunks_].get() + static_cast<size_t>(c % seg_chunks_) * chunk_size_;
  }
  /// Adds chunks, a segment of the first count at a time, until the pool
  /// holds at least `count` (the connection's windows grew). Chunks already
  /// handed out stay where they are. Allocates: a rare, bounded event.
  void grow_to(uint32_t count);
  bool backed() const { return backed_; }
  uint32_t chunk_size() const { return chunk_size_; }
  uint32_t count() const { return count_; }
  uint32_t available() const { return static_cast<uint32_t>(free_.size()); }
  uint64_t bytes_in_use() const {
    return static_cast<uint64_t>(count_ - available()) * chunk_size_;
  }
  uint64_t capacity_bytes() const { return static_cast<uint64_t>(count_) * chunk_size_; }

 private:
  uint32_t chunk_size_;
  uint32_t count_;
  uint32_t seg_chunks_;  ///< chunks per segment (the first count)
  bool backed_;
  std::vector<std::unique_ptr<uint8_t[]>> segs_;
  std::vector<uint32_t> free_;
};

/// Maps a window of one stream's offsets onto pool chunks. Slots cover
/// [base, base + slots × chunk_size); base is chunk-aligned.
class ChunkRing {
 public:
  ChunkRing() = default;
  ChunkRing(const ChunkRing&) = delete;
  ChunkRing& operator=(const ChunkRing&) = delete;
  ChunkRing(ChunkRing&&) = default;
  ChunkRing& operator=(ChunkRing&&) = default;

  /// Allocates chunks so that [from, to) is backed; `from` >= the last
  /// release point. Returns the end actually covered (< to when the pool ran dry).
  uint64_t ensure(ChunkPool& pool, uint64_t from, uint64_t to);
  /// Copies into / out of a range that ensure() covered. No-ops for unbacked pools.
  void write(const ChunkPool& pool, uint64_t off, const uint8_t* src, uint64_t n);
  void read(const ChunkPool& pool, uint64_t off, uint8_t* dst, uint64_t n) const;
  /// Where a range that ensure() covered lies: up to `max` contiguous runs,
  /// in order, into `out`. Returns how many, or 0 when it takes more than
  /// `max` (or the pool is unbacked). The bytes stay there until released.
  struct Run {
    const uint8_t* data;
    uint32_t len;
  };
  size_t runs(const ChunkPool& pool, uint64_t off, uint64_t n, Run* out, size_t max) const;
  /// Returns to the pool every chunk that lies wholly below `off`.
  void release_below(ChunkPool& pool, uint64_t off);
  void release_all(ChunkPool& pool);
  uint32_t chunks_held() const { return held_; }

 private:
  /// f(bytes, n) for each chunk's part of [off, off + n) (writable), in order, while
  /// f returns true; returns whether it went through (backed pools only).
  template <class F>
  bool walk(const ChunkPool& pool, uint64_t off, uint64_t n, F&& f) const {
    const uint64_t cs = pool.chunk_size();
    while (n > 0) {
      const uint64_t rel = off - base_;
      const uint64_t in = rel % cs;
      const uint64_t take = std::min(n, cs - in);
      if (!f(pool.data(slot(rel / cs)) + in, take)) return false;
      off += take;
      n -= take;
    }
    return true;
  }
  uint32_t& slot(uint64_t i) { return slots_[(head_ + i) & (slots_.size() - 1)]; }
  uint32_t slot(uint64_t i) const { return slots_[(head_ + i) & (slots_.size() - 1)]; }
  void grow(uint64_t need);

  uint64_t base_ = 0;            // stream offset of slot 0 (chunk-aligned)
  std::vector<uint32_t> slots_;  // power-of-two ring of chunk ids
  uint64_t head_ = 0;
  uint64_t count_ = 0;  // slots in use from head_
  uint32_t held_ = 0;   // chunks allocated
};

}  // namespace rowan::transport
