// The WAN transport's wire format (docs/wan-transport.md is the prose version).
//
//   datagram = header (20 bytes) | frames ... | [CRC-32C (4 bytes)]
//
//   header: version u8 | flags u8 | path u8 | reserved u8 (0) |
//           connection id u64 | packet number u64               (big-endian)
//   path:   the index of the sender's path whose packet-number space numbers
//           this packet (each path has its own space).
//   flags:  bit 7 PROTECTED (reserved; a datagram with it set is dropped)
//           bit 6 KEY_PHASE (reserved)
//           bit 5 ELIDED (simulator only: STREAM data bytes left out)
//           bit 4 CRC: the datagram ends in a CRC-32C of header and frames
//           bits 0-3 packet type (0 = data)
//
// Encryption is below the transport: lib/src/crypto's SecureIo wraps each
// whole datagram in its own AEAD record, whose tag already authenticates it,
// so a connection under it sends no CRC (TransportConfig::integrity_check);
// one on a plain link ends each datagram in the CRC. Version 2 carried a
// 16-byte tag slot in every datagram, for an AEAD inside the transport that
// was never built: 16 bytes of every 1500 for nothing.
//
// Variable-length integers (STREAM's stream id and offset) are QUIC's
// (RFC 9000 section 16): the top two bits of the first byte give the length,
// 1, 2, 4 or 8 bytes, big-endian, values below 2^62.
//
// All readers are bounds-checked and return false on anything malformed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace rowan::transport::wire {

/// 2: per-path packet-number spaces; 3: CRC only when flagged, no tag slot,
/// STREAM's id and offset as varints.
inline constexpr uint8_t kVersion = 3;
inline constexpr size_t kHeaderSize = 20;
inline constexpr size_t kCrcSize = 4;
/// Header and trailer of a datagram with (`crc`) or without the CRC.
constexpr size_t overhead(bool crc) { return kHeaderSize + (crc ? kCrcSize : 0); }
inline constexpr size_t kMaxOverhead = overhead(true);

inline constexpr uint8_t kFlagProtected = 0x80;
inline constexpr uint8_t kFlagKeyPhase = 0x40;
inline constexpr uint8_t kFlagElided = 0x20;
inline constexpr uint8_t kFlagCrc = 0x10;
inline constexpr uint8_t kTypeMask = 0x0f;
inline constexpr uint8_t kTypeData = 0;

enum FrameType : uint8_t {
  kFramePadding = 0x00,
  kFramePing = 0x01,
  kFrameAck = 0x02,      ///< ACK of path 0's packet-number space
  kFrameAckPath = 0x03,  ///< ACK of another path's space: a path byte, then ACK's body
  kFrameStream = 0x08,   ///< | 0x01 when FIN
  kFrameStreamFin = 0x09,
  kFrameMaxData = 0x10,
  kFrameMaxStreamData = 0x11,
  kFrameDataBlocked = 0x14,  ///< the sender has data the connection credit does not allow
  kFrameClose = 0x1c,
  kFrameFecSource = 0x20,  ///< this packet is a source symbol of a FEC block
  kFrameRepair = 0x21,     ///< a repair symbol of a FEC block
};

inline constexpr uint64_t kMaxVarint = (uint64_t{1} << 62) - 1;
/// Bytes of v as a varint (v <= kMaxVarint).
constexpr size_t varint_size(uint64_t v) {
  return v < (1U << 6) ? 1 : v < (1U << 14) ? 2 : v < (uint64_t{1} << 30) ? 4 : 8;
}
/// STREAM: type | stream id varint | offset varint | length u16 | data.
constexpr size_t stream_frame_overhead(uint64_t id, uint64_t offset) {
  return 1 + varint_size(id) + varint_size(offset) + 2;
}
inline constexpr size_t kMaxStreamFrameOverhead = 1 + 8 + 8 + 2;
inline constexpr size_t kMaxDataFrameSize = 1 + 8;
inline constexpr size_t kMaxStreamDataFrameSize = 1 + 8 + 8;
inline constexpr size_t kDataBlockedFrameSize = 1 + 8;
inline constexpr size_t kCloseFrameSize = 1 + 2;
inline constexpr uint32_t kMaxStreamFrameData = 0xffff;
/// FEC_SOURCE: type | block u32 | index u8.
inline constexpr size_t kFecSourceFrameSize = 1 + 4 + 1;
/// REPAIR: type | block u32 | k u8 | m u8 | index u8 | length u16 | symbol.
inline constexpr size_t kRepairFrameOverhead = 1 + 4 + 1 + 1 + 1 + 2;

inline constexpr int kMaxAckRanges = 32;
/// Size of an ACK frame with `ranges` ranges.
/// Size of an ACK frame of `path`'s space with `ranges` ranges (path 0's
/// ACK has no path byte).
constexpr size_t ack_frame_size(int ranges, uint8_t path = 0) {
  return (path != 0 ? 1 : 0) + 1 + 8 + 4 + 8 + 1 + 8 + (ranges - 1) * 8;
}

struct Header {
  uint8_t version = kVersion;
  uint8_t flags = 0;
  uint8_t path = 0;  ///< packet-number space (the sender's path index)
  uint64_t connection_id = 0;
  uint64_t packet_number = 0;
};

/// Inclusive packet-number range.
struct PnRange {
  uint64_t lo = 0;
  uint64_t hi = 0;
};

/// ACK of one packet-number space (`path`): ranges in descending order,
/// ranges[0].hi == largest.
struct AckFrame {
  uint8_t path = 0;
  uint64_t largest = 0;
  uint32_t ack_delay_us = 0;
  uint64_t ce_count = 0;  ///< cumulative ECN-CE marks seen by the receiver
  int range_count = 0;
  PnRange ranges[kMaxAckRanges];
};

/// A repair symbol: the block's k sources and m repair symbols, which one this
/// is, and its bytes (always carried, also in ELIDED packets).
struct RepairFrame {
  uint32_t block = 0;
  uint8_t k = 0;
  uint8_t m = 0;
  uint8_t index = 0;
  uint16_t length = 0;
  const uint8_t* data = nullptr;
};

struct StreamFrame {
  uint64_t stream_id = 0;
  uint64_t offset = 0;
  uint32_t length = 0;
  bool fin = false;
  const uint8_t* data = nullptr;  ///< nullptr when the packet is ELIDED
};

// Big-endian helpers.
inline void put_u16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v >> 8);
  p[1] = static_cast<uint8_t>(v);
}
inline void put_u32(uint8_t* p, uint32_t v) {
  for (int i = 3; i >= 0; --i, v >>= 8) p[i] = static_cast<uint8_t>(v);
}
inline void put_u64(uint8_t* p, uint64_t v) {
  for (int i = 7; i >= 0; --i, v >>= 8) p[i] = static_cast<uint8_t>(v);
}
/// Writes v (<= kMaxVarint) as a varint; returns its size.
inline size_t put_varint(uint8_t* p, uint64_t v) {
  const size_t n = varint_size(v);
  const uint8_t prefix = n == 1 ? 0x00 : n == 2 ? 0x40 : n == 4 ? 0x80 : 0xc0;
  for (size_t i = n; i-- > 0; v >>= 8) p[i] = static_cast<uint8_t>(v);
  p[0] |= prefix;
  return n;
}
/// Reads a varint from at most `len` bytes; returns its size, 0 when it does
/// not fit.
inline size_t get_varint(const uint8_t* p, size_t len, uint64_t* v) {
  if (len == 0) return 0;
  const size_t n = size_t{1} << (p[0] >> 6);
  if (len < n) return 0;
  uint64_t x = p[0] & 0x3fU;
  for (size_t i = 1; i < n; ++i) x = (x << 8) | p[i];
  *v = x;
  return n;
}
inline uint16_t get_u16(const uint8_t* p) { return static_cast<uint16_t>((p[0] << 8) | p[1]); }
inline uint32_t get_u32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v = (v << 8) | p[i];
  return v;
}
inline uint64_t get_u64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | p[i];
  return v;
}

inline void write_header(uint8_t* p, const Header& h) {
  p[0] = h.version;
  p[1] = h.flags;
  p[2] = h.path;
  p[3] = 0;
  put_u64(p + 4, h.connection_id);
  put_u64(p + 12, h.packet_number);
}

/// False when `len` cannot hold a header.
inline bool read_header(const uint8_t* p, size_t len, Header* h) {
  if (len < kHeaderSize) return false;
  h->version = p[0];
  h->flags = p[1];
  h->path = p[2];
  h->connection_id = get_u64(p + 4);
  h->packet_number = get_u64(p + 12);
  return true;
}

/// CRC-32C (Castagnoli); hardware instruction when the CPU has SSE4.2.
uint32_t crc32c(const uint8_t* data, size_t len);

/// Bytes of frames in a datagram of `len` bytes whose header read_header
/// took: what lies between the header and the CRC, if it has one (0 when it
/// is too short for it).
inline size_t frames_length(const uint8_t* p, size_t len) {
  const size_t trailer = (p[1] & kFlagCrc) != 0 ? kCrcSize : 0;
  return len >= kHeaderSize + trailer ? len - kHeaderSize - trailer : 0;
}

/// Ends the datagram at p, whose header and `frames_len` bytes of frames are
/// written: with `crc`, sets the CRC flag and appends the CRC-32C (p has room
/// for kCrcSize more). Returns the datagram's length.
inline size_t end_datagram(uint8_t* p, size_t frames_len, bool crc) {
  const size_t body = kHeaderSize + frames_len;
  if (!crc) return body;
  p[1] |= kFlagCrc;
  put_u32(p + body, crc32c(p, body));
  return body + kCrcSize;
}

/// Appends frames to a packet under construction. Callers check room first.
class FrameWriter {
 public:
  FrameWriter(uint8_t* p, size_t cap) : p_(p), cap_(cap) {}
  size_t size() const { return pos_; }
  size_t room() const { return cap_ - pos_; }

  void ping() { p_[pos_++] = kFramePing; }
  void max_data(uint64_t v) {
    p_[pos_] = kFrameMaxData;
    put_u64(p_ + pos_ + 1, v);
    pos_ += kMaxDataFrameSize;
  }
  void data_blocked(uint64_t limit) {
    p_[pos_] = kFrameDataBlocked;
    put_u64(p_ + pos_ + 1, limit);
    pos_ += kDataBlockedFrameSize;
  }
  void max_stream_data(uint64_t id, uint64_t v) {
    p_[pos_] = kFrameMaxStreamData;
    put_u64(p_ + pos_ + 1, id);
    put_u64(p_ + pos_ + 9, v);
    pos_ += kMaxStreamDataFrameSize;
  }
  void close(uint16_t code) {
    p_[pos_] = kFrameClose;
    put_u16(p_ + pos_ + 1, code);
    pos_ += kCloseFrameSize;
  }
  /// Writes the STREAM frame header; returns where its data goes (the caller
  /// copies `length` bytes there unless the packet is ELIDED, then calls
  /// commit_stream_data with the bytes it actually placed).
  /// Takes stream_frame_overhead(id, offset) bytes; id and offset <= kMaxVarint.
  uint8_t* stream_header(uint64_t id, uint64_t offset, uint16_t length, bool fin) {
    uint8_t* q = p_ + pos_;
    q[0] = fin ? kFrameStreamFin : kFrameStream;
    size_t n = 1 + put_varint(q + 1, id);
    n += put_varint(q + n, offset);
    put_u16(q + n, length);
    pos_ += n + 2;
    return p_ + pos_;
  }
  void commit_stream_data(size_t placed) { pos_ += placed; }
  void fec_source(uint32_t block, uint8_t index) {
    p_[pos_] = kFrameFecSource;
    put_u32(p_ + pos_ + 1, block);
    p_[pos_ + 5] = index;
    pos_ += kFecSourceFrameSize;
  }
  /// Writes a REPAIR frame header; the caller copies `length` bytes to the
  /// returned pointer (the frame's size includes them).
  uint8_t* repair(uint32_t block, uint8_t k, uint8_t m, uint8_t index, uint16_t length) {
    uint8_t* q = p_ + pos_;
    q[0] = kFrameRepair;
    put_u32(q + 1, block);
    q[5] = k;
    q[6] = m;
    q[7] = index;
    put_u16(q + 8, length);
    pos_ += kRepairFrameOverhead + length;
    return q + kRepairFrameOverhead;
  }
  void ack(const AckFrame& a) {
    uint8_t* q = p_ + pos_;
    if (a.path == 0) {
      q[0] = kFrameAck;
    } else {
      q[0] = kFrameAckPath;
      q[1] = a.path;
      ++q;
      ++pos_;
    }
    put_u64(q + 1, a.largest);
    put_u32(q + 9, a.ack_delay_us);
    put_u64(q + 13, a.ce_count);
    q[21] = static_cast<uint8_t>(a.range_count);
    put_u64(q + 22, a.ranges[0].hi - a.ranges[0].lo);
    size_t off = 30;
    for (int i = 1; i < a.range_count; ++i) {
      // gap: unacked packets between ranges minus one; length: acked minus one.
      put_u32(q + off, static_cast<uint32_t>(a.ranges[i - 1].lo - a.ranges[i].hi - 2));
      put_u32(q + off + 4, static_cast<uint32_t>(a.ranges[i].hi - a.ranges[i].lo));
      off += 8;
    }
    pos_ += off;
  }
  void pad_to(size_t n) {
    if (n > pos_) {
      std::memset(p_ + pos_, kFramePadding, n - pos_);
      pos_ = n;
    }
  }

 private:
  uint8_t* p_;
  size_t cap_;
  size_t pos_ = 0;
};

/// Parses the frames of one packet, calling v.on_*(...) for each. Returns
/// false at the first malformed frame. Callers run it once with a validating
/// visitor and once with the applying one so a bad packet changes nothing.
/// FEC frames go to v.on_fec_source(block, index, offset of the frame in `p`)
/// and v.on_repair(frame) when the visitor has them, and are skipped when not.
template <typename Visitor>
bool parse_frames(const uint8_t* p, size_t len, bool elided, Visitor& v) {
  size_t i = 0;
  while (i < len) {
    const uint8_t type = p[i];
    switch (type) {
      case kFramePadding:
        ++i;
        break;
      case kFramePing:
        ++i;
        if (!v.on_ping()) return false;
        break;
      case kFrameAck:
      case kFrameAckPath: {
        AckFrame& a = v.ack_scratch();
        a.path = 0;
        if (type == kFrameAckPath) {
          if (len - i < 2) return false;
          a.path = p[i + 1];
          if (a.path == 0) return false;  // path 0's ACK is kFrameAck
          ++i;
        }
        if (len - i < ack_frame_size(1)) return false;
        const uint8_t* q = p + i;
        a.largest = get_u64(q + 1);
        a.ack_delay_us = get_u32(q + 9);
        a.ce_count = get_u64(q + 13);
        a.range_count = q[21];
        if (a.range_count < 1 || a.range_count > kMaxAckRanges) return false;
        if (len - i < ack_frame_size(a.range_count)) return false;
        const uint64_t first = get_u64(q + 22);
        if (first > a.largest) return false;
        a.ranges[0] = PnRange{a.largest - first, a.largest};
        size_t off = 30;
        for (int r = 1; r < a.range_count; ++r) {
          const uint64_t gap = get_u32(q + off);
          const uint64_t length = get_u32(q + off + 4);
          off += 8;
          const uint64_t prev_lo = a.ranges[r - 1].lo;
          if (prev_lo < gap + 2) return false;
          const uint64_t hi = prev_lo - gap - 2;
          if (length > hi) return false;
          a.ranges[r] = PnRange{hi - length, hi};
        }
        i += off;
        if (!v.on_ack(a)) return false;
        break;
      }
      case kFrameStream:
      case kFrameStreamFin: {
        StreamFrame s;
        s.fin = type == kFrameStreamFin;
        size_t at = i + 1;
        const size_t id_len = get_varint(p + at, len - at, &s.stream_id);
        if (id_len == 0) return false;
        at += id_len;
        const size_t off_len = get_varint(p + at, len - at, &s.offset);
        if (off_len == 0) return false;
        at += off_len;
        if (len - at < 2) return false;
        s.length = get_u16(p + at);
        i = at + 2;
        if (s.offset > (uint64_t{1} << 62) - s.length) return false;
        if (!elided) {
          if (len - i < s.length) return false;
          s.data = p + i;
          i += s.length;
        }
        if (!v.on_stream(s)) return false;
        break;
      }
      case kFrameMaxData:
        if (len - i < kMaxDataFrameSize) return false;
        if (!v.on_max_data(get_u64(p + i + 1))) return false;
        i += kMaxDataFrameSize;
        break;
      case kFrameMaxStreamData:
        if (len - i < kMaxStreamDataFrameSize) return false;
        if (!v.on_max_stream_data(get_u64(p + i + 1), get_u64(p + i + 9))) return false;
        i += kMaxStreamDataFrameSize;
        break;
      case kFrameDataBlocked:
        if (len - i < kDataBlockedFrameSize) return false;
        if (!v.on_data_blocked(get_u64(p + i + 1))) return false;
        i += kDataBlockedFrameSize;
        break;
      case kFrameClose:
        if (len - i < kCloseFrameSize) return false;
        if (!v.on_close(get_u16(p + i + 1))) return false;
        i += kCloseFrameSize;
        break;
      case kFrameFecSource: {
        if (len - i < kFecSourceFrameSize) return false;
        if constexpr (requires { v.on_fec_source(uint32_t{}, uint8_t{}, size_t{}); }) {
          if (!v.on_fec_source(get_u32(p + i + 1), p[i + 5], i)) return false;
        }
        i += kFecSourceFrameSize;
        break;
      }
      case kFrameRepair: {
        if (len - i < kRepairFrameOverhead) return false;
        RepairFrame r;
        r.block = get_u32(p + i + 1);
        r.k = p[i + 5];
        r.m = p[i + 6];
        r.index = p[i + 7];
        r.length = get_u16(p + i + 8);
        if (len - i - kRepairFrameOverhead < r.length) return false;
        r.data = p + i + kRepairFrameOverhead;
        if constexpr (requires { v.on_repair(r); }) {
          if (!v.on_repair(r)) return false;
        }
        i += kRepairFrameOverhead + r.length;
        break;
      }
      default:
        return false;
    }
  }
  return true;
}

}  // namespace rowan::transport::wire
