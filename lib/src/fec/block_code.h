// A systematic block erasure code over packet payloads (Intel ISA-L).
//
// A block is k source symbols (packet payloads, each stored as a u16 length
// prefix followed by its bytes, implicitly zero-padded to the block's longest)
// and m repair symbols. m == 1 is plain XOR parity (isa-l raid xor_gen); m >= 2
// is Reed-Solomon over GF(2^8) with the Cauchy generator matrix
// (gf_gen_cauchy1_matrix, ec_init_tables, ec_encode_data; decoding inverts the
// k x k sub-matrix of the rows that arrived with gf_invert_matrix). Any k of the
// k + m symbols recover the block.
//
// A repair symbol is as long as the block's longest prefixed source, so a
// block of short packets costs short repair symbols.
//
// Memory is allocated at construction (aligned symbol buffers); encode(),
// add_source() and add_repair() do not allocate, throw, lock or log. Bad input
// (indices or lengths out of range, a repair frame that disagrees with what the
// block already holds) is refused with a status the caller counts.
//
// Threading: an Encoder or Decoder belongs to one thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

namespace rowan::fec {

inline constexpr int kMaxSources = 32;  ///< k
inline constexpr int kMaxRepair = 8;    ///< m
inline constexpr size_t kLengthPrefix = 2;
inline constexpr size_t kSymbolAlign = 64;  ///< buffers and coded lengths (SIMD)

/// Symbols hold at most this many payload bytes (the u16 length prefix).
inline constexpr size_t kMaxPayload = 0xffff - kLengthPrefix;

/// Aligned byte storage allocated once.
class SymbolStore {
 public:
  SymbolStore(size_t count, size_t stride);
  uint8_t* at(size_t i) const noexcept { return base_.get() + i * stride_; }
  size_t stride() const noexcept { return stride_; }
  size_t count() const noexcept { return count_; }

 private:
  struct Free {
    void operator()(uint8_t* p) const noexcept;
  };
  std::unique_ptr<uint8_t, Free> base_;
  size_t count_;
  size_t stride_;
};

/// ISA-L tables of one (k, m) encoding, rebuilt only when (k, m) changes.
class EncodeTables {
 public:
  /// k in [1, kMaxSources], m in [2, kMaxRepair].
  const uint8_t* get(int k, int m) noexcept;

 private:
  int k_ = 0, m_ = 0;
  uint8_t matrix_[(kMaxSources + kMaxRepair) * kMaxSources];
  uint8_t tables_[32 * kMaxSources * kMaxRepair];
};

/// Builds one block at a time: begin(), add() each source, encode(), read the
/// repair symbols.
class Encoder {
 public:
  /// `max_payload`: the longest source payload add() must accept.
  explicit Encoder(size_t max_payload);

  /// Starts a block of up to `k` sources with `m` repair symbols (both
  /// clamped to [1, kMaxSources] and [1, kMaxRepair]).
  void begin(int k, int m) noexcept;
  /// Copies one source payload in: `head` then `data` (a caller's header,
  /// such as a packet number, and the packet's bytes). False (nothing
  /// stored) when the block is full or the payload is longer than max_payload.
  bool add(const uint8_t* data, size_t len, std::span<const uint8_t> head = {}) noexcept;
  /// add() for a caller that writes the payload itself: stores `head` and
  /// returns where the payload's `len` bytes go (null, nothing stored, when
  /// add() would refuse). The caller writes them before the next call.
  uint8_t* add_slot(size_t len, std::span<const uint8_t> head = {}) noexcept;
  int sources() const noexcept { return count_; }
  int k() const noexcept { return k_; }
  int m() const noexcept { return m_; }
  bool full() const noexcept { return count_ >= k_; }
  /// Computes the repair symbols of the sources added so far (a block cut
  /// short codes sources() sources): m of them, or `m` (at most the block's
  /// m; a block cut short may need fewer) when given. Returns the length of
  /// each repair symbol (the longest prefixed source); 0 when no source was
  /// added.
  size_t encode(int m = 0) noexcept;
  const uint8_t* repair(int i) const noexcept { return store_.at(kMaxSources + i); }
  size_t max_payload() const noexcept { return max_payload_; }

 private:
  size_t max_payload_;
  SymbolStore store_;  // kMaxSources sources, then kMaxRepair repair symbols
  EncodeTables tables_;
  int k_ = 1, m_ = 1, count_ = 0;
  size_t longest_ = 0;  // prefixed
  size_t lens_[kMaxSources] = {};
};

/// What a repair frame says about its block.
struct RepairInfo {
  uint32_t block = 0;
  int k = 0;      ///< sources the block coded
  int m = 0;      ///< repair symbols of the block
  int index = 0;  ///< this symbol, [0, m)
};

enum class Status : uint8_t {
  kStored,     ///< kept; the block is not decodable yet
  kRecovered,  ///< the block was decoded: recovered() lists the missing sources
  kComplete,   ///< the block holds every source (nothing to recover)
  kDuplicate,  ///< this symbol was already held, or the block is finished
  kStale,      ///< the block is older than the decoder's window
  kInvalid,    ///< out of range, or inconsistent with the block's other symbols
};

struct DecoderStats {
  uint64_t sources = 0;    ///< source symbols stored
  uint64_t repairs = 0;    ///< repair symbols stored
  uint64_t recovered = 0;  ///< source symbols rebuilt
  uint64_t decoded_blocks = 0;
  uint64_t unrecoverable = 0;  ///< blocks given up with sources missing (repair seen)
  uint64_t invalid = 0;        ///< kInvalid results (includes bad recovered lengths)
  uint64_t stale = 0;
  uint64_t late = 0;  ///< repair symbols for a block already complete or decoded
};

/// Holds the symbols of the last `slots` blocks (by block id, serial
/// arithmetic on u32) and decodes a block as soon as it holds k symbols. A
/// newer block that needs an older block's slot evicts it (counted
/// unrecoverable when it had repair and missing sources): retransmission
/// covers what was not recovered.
class Decoder {
 public:
  /// `max_payload`: the longest source payload; `slots`: blocks kept (rounded
  /// up to a power of two, at least 1).
  Decoder(size_t max_payload, uint32_t slots);

  /// A source symbol arrived: `head` then `data` form its payload (as given
  /// to Encoder::add).
  Status add_source(uint32_t block, int index, const uint8_t* data, size_t len,
                    std::span<const uint8_t> head = {}) noexcept;
  Status add_repair(const RepairInfo& info, const uint8_t* data, size_t len) noexcept;

  /// After kRecovered: the sources rebuilt by that call (valid until the next
  /// add_*). Each is the original payload (length prefix removed).
  struct Recovered {
    int index;
    std::span<const uint8_t> payload;
  };
  int recovered_count() const noexcept { return nrecovered_; }
  Recovered recovered(int i) const noexcept { return recovered_[i]; }

  const DecoderStats& stats() const noexcept { return stats_; }

 private:
  struct Slot {
    uint32_t block = 0;
    bool used = false;
    bool finished = false;  // complete, decoded, or failed to decode
    int k = 0, m = 0;       // 0 until a repair symbol arrives
    size_t repair_len = 0;
    uint32_t have_src = 0;  // bit per source index
    uint32_t have_rep = 0;  // bit per repair index
    uint16_t lens[kMaxSources + kMaxRepair] = {};
  };
  Slot* slot_for(uint32_t block, Status* refused) noexcept;
  void retire(Slot& s) noexcept;
  Status try_decode(Slot& s, size_t slot_index) noexcept;
  uint8_t* sym(size_t slot_index, int i) const noexcept {
    return store_.at(slot_index * (kMaxSources + kMaxRepair) + i);
  }

  size_t max_payload_;
  uint32_t mask_;
  std::unique_ptr<Slot[]> slots_;
  SymbolStore store_;
  DecoderStats stats_;
  int nrecovered_ = 0;
  Recovered recovered_[kMaxSources];
  // Decode scratch (no allocation per block).
  uint8_t encode_matrix_[(kMaxSources + kMaxRepair) * kMaxSources];
  uint8_t sub_matrix_[kMaxSources * kMaxSources];
  uint8_t inverse_[kMaxSources * kMaxSources];
  uint8_t decode_matrix_[kMaxRepair * kMaxSources];
  uint8_t tables_[32 * kMaxSources * kMaxRepair];
};

}  // namespace rowan::fec
