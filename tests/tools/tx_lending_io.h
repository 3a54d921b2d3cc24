// A PacketIo wrapper that lends its transmit buffers (packet_io.h tx_buffer)
// the way the DPDK WAN lends mbufs, takes at most 5 datagrams per
// send_burst, and scribbles over each lent buffer it has sent before lending
// it again. A caller must write every datagram into a lent buffer, pass a
// refused one again as it is, and never reuse a sent one, or the data
// arrives corrupted. Receive passes through (over an RxLendingIo it lends
// what it receives too).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "tools/wrapping_io.h"

namespace rowan::test {

class TxLendingIo final : public WrappingIo {
 public:
  explicit TxLendingIo(io::PacketIo& inner) : WrappingIo(inner) {
    for (size_t b = 0; b < mem_.size(); ++b) free_.push_back(b);
  }
  uint8_t* tx_buffer(size_t i) noexcept override {
    if (i >= slot_.size()) return nullptr;
    if (slot_[i] < 0) {
      if (free_.empty()) return nullptr;
      slot_[i] = static_cast<int>(free_.back());
      free_.pop_back();
    }
    return mem_[static_cast<size_t>(slot_[i])].data();
  }
  size_t send_burst(std::span<const io::TxDatagram> pkts, TimePoint now) noexcept override {
    const size_t n = inner_.send_burst(pkts.first(std::min<size_t>(pkts.size(), 5)), now);
    for (size_t k = 0; k < n; ++k) {
      bool found = false;
      for (int& s : slot_) {
        if (s >= 0 && mem_[static_cast<size_t>(s)].data() == pkts[k].data) {
          std::fill(mem_[static_cast<size_t>(s)].begin(), mem_[static_cast<size_t>(s)].end(), 0xEE);
          free_.insert(free_.begin(), static_cast<size_t>(s));  // reused last
          s = -1;
          found = true;
          break;
        }
      }
      (found ? lent_sent : own_sent) += 1;
    }
    refused += pkts.size() - n;
    return n;
  }

  /// Whether `p` lies in memory this backend lends.
  bool lent_memory(const uint8_t* p) const { return lies_in(mem_, p); }

  uint64_t lent_sent = 0, own_sent = 0, refused = 0;

 private:
  std::array<std::vector<uint8_t>, 48> mem_{[] {
    std::array<std::vector<uint8_t>, 48> m;
    for (auto& b : m) b.assign(2048, 0);
    return m;
  }()};
  std::vector<size_t> free_;
  std::array<int, 16> slot_{[] {
    std::array<int, 16> s;
    s.fill(-1);
    return s;
  }()};
};

}  // namespace rowan::test
