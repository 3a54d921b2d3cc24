// Adaptive forward error correction for one path of a connection
// (docs/wan-transport.md, "Forward error correction").
//
// Sender: the data packets of a path are grouped into blocks of k source
// packets; each source packet carries a FEC_SOURCE frame (block, index) and
// its symbol is its packet number followed by the frames before that frame.
// When a block has k sources, or the sender has no more stream data to send
// (the tail of a message), its m repair symbols leave in REPAIR packets —
// ordinary packets of the connection (own packet numbers, ack-eliciting,
// paced, in flight, and sealed by link security like every datagram). The
// code rate (k, m) comes from fec::choose_code_rate over this path's measured
// loss, burstiness, RTT and packet time; a clean path is not coded.
//
// Loss detection waits for a protected packet's repair: a source packet is
// declared lost only once its block's last repair packet is acknowledged past
// (packet threshold) or old enough (time threshold), so a packet the receiver
// rebuilds is acknowledged, not retransmitted.
//
// Receiver: source symbols are kept per block (fec::Decoder); a block that
// holds k symbols is decoded and each rebuilt packet is handled as if it had
// arrived (its packet number acknowledged, its frames applied).
//
// Memory is allocated at construction. Threading: the connection's thread.
#pragma once

#include <cstdint>
#include <span>

#include "base/units.h"
#include "fec/block_code.h"
#include "fec/policy.h"
#include "io/packet_io.h"
#include "transport/wire.h"

namespace rowan::transport {

enum class FecMode : uint8_t {
  kOff,       ///< selective repeat alone
  kAdaptive,  ///< code rate chosen from the path's loss and RTT (the default)
};

struct FecConfig {
  FecMode mode = FecMode::kAdaptive;
  fec::PolicyConfig policy;
  uint32_t decoder_blocks = 8;  ///< blocks a receiver holds at once
};

/// Bytes a source packet gives up so that its repair symbol fits a datagram:
/// its FEC_SOURCE frame, and the REPAIR frame header, length prefix and packet
/// number that a repair symbol carries beyond the source's frames.
inline constexpr size_t kFecSourceReserve = wire::kFecSourceFrameSize;
inline constexpr size_t kFecRepairExtra = wire::kRepairFrameOverhead + fec::kLengthPrefix + 8;

class FecCoder {
 public:
  /// `max_frames`: the most frame bytes a datagram carries (a full
  /// datagram's, or the simulator's ELIDED buffer's).
  FecCoder(const FecConfig& cfg, size_t max_frames);

  bool enabled() const noexcept { return cfg_.mode != FecMode::kOff; }

  // ---- Sender -------------------------------------------------------------
  /// Whether the next data packet is a source packet (it must then leave
  /// kFecSourceReserve + kFecRepairExtra bytes of its frame room unused).
  bool coding() const noexcept { return enabled() && (open_ || rate_.enabled()); }
  /// A source packet numbered `pn` is being built: its FEC_SOURCE frame's
  /// block and index (opens a block when none is open).
  void next_source(uint32_t* block, uint8_t* index) noexcept;
  /// Whether frames of `len` bytes fit a source symbol (a packet that does
  /// not is sent uncoded: no FEC_SOURCE frame, no add_source).
  bool fits(size_t len) const noexcept { return len + 8 <= encoder_.max_payload(); }
  /// The source packet's frames before its FEC_SOURCE frame; `elided` is the
  /// stream payload the packet counts on the wire but does not carry.
  /// With `pieces` (OutDatagram::pieces, offsets from the datagram's start,
  /// `frames` at `frames_off` into it) the frames' holes are read from them.
  void add_source(uint64_t pn, const uint8_t* frames, size_t len, size_t elided,
                  std::span<const io::TxPiece> pieces = {}, size_t frames_off = 0) noexcept;
  /// Closes an open block early (no more data to send, or a probe timeout):
  /// its repair symbols become due. A block of c < k sources gets
  /// ⌈m × c ÷ k⌉ repair symbols, as far as the repair credit (max_overhead
  /// per source packet sent, spent by every repair packet) allows; without
  /// credit it goes unprotected.
  void flush() noexcept;
  bool repair_due() const noexcept { return repair_next_ < repair_count_; }
  /// Frame bytes the next REPAIR frame needs.
  size_t repair_frame_size() const noexcept;
  /// Writes the next due REPAIR frame into `w` for packet `pn` sent at `now`;
  /// returns the extra wire bytes it stands for (elided payload).
  size_t write_repair(wire::FrameWriter& w, uint64_t pn, TimePoint now) noexcept;
  /// Gives up the due repair symbols (they cannot be sent); the block's
  /// sources are then judged on their own.
  void abandon_repair() noexcept;
  /// For loss detection of a source packet of `block`: false while its
  /// repair has not all left (hold the packet); else the packet number and
  /// send time of the block's last repair packet (the packet's own when the
  /// block is too old to be remembered).
  bool loss_reference(uint32_t block, uint64_t* pn, TimePoint* sent) const noexcept;

  /// Every packet that left on the path, and every one the path lost
  /// (declared lost, or acknowledged only after its block was decoded).
  void on_sent() noexcept;
  void on_path_loss(uint64_t pn) noexcept { meter_.on_lost(pn); }
  /// Re-chooses the code rate (at most once per round and 256 packets; the
  /// next block uses it). `packet_time`: a full datagram at the path's rate.
  void update_rate(Duration srtt, Duration packet_time) noexcept;
  fec::CodeRate rate() const noexcept { return rate_; }

  // ---- Receiver -----------------------------------------------------------
  /// A received source packet's symbol (as add_source on the sender).
  fec::Status on_source(uint32_t block, uint8_t index, uint64_t pn, const uint8_t* frames,
                        size_t len) noexcept;
  fec::Status on_repair(const wire::RepairFrame& r) noexcept;
  /// After kRecovered: the rebuilt packets (packet number + frames each),
  /// valid until the next on_source/on_repair.
  int recovered_count() const noexcept { return decoder_.recovered_count(); }
  std::span<const uint8_t> recovered(int i) const noexcept { return decoder_.recovered(i).payload; }
  const fec::DecoderStats& decoder_stats() const noexcept { return decoder_.stats(); }

 private:
  struct BlockRecord {
    uint32_t block = 0;
    bool used = false;
    bool sent = false;  // every repair symbol has left
    uint64_t last_repair_pn = 0;
    TimePoint last_repair_time;
  };
  static constexpr uint32_t kRecords = 64;
  void close_block(int m) noexcept;

  FecConfig cfg_;
  fec::Encoder encoder_;
  fec::Decoder decoder_;
  fec::LossMeter meter_;
  fec::CodeRate rate_;
  uint64_t sent_at_update_ = 0;
  uint64_t packets_sent_ = 0;

  uint32_t next_block_ = 0;
  bool open_ = false;
  uint32_t block_ = 0;       // open block, or the one whose repair is due
  size_t wire_longest_ = 0;  // longest prefixed source symbol counting elided bytes
  size_t repair_len_ = 0;
  int repair_count_ = 0, repair_next_ = 0;
  double credit_ = 0;  // repair packets the overhead cap still allows
  BlockRecord records_[kRecords];
};

}  // namespace rowan::transport
