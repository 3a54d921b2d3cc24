// A site port in memory (tests): frames injected into its RX side, frames
// the worker sends collected from its TX side, optionally refusing TX
// beyond a budget (a busy port: the caller must keep what was refused).
// Real mbufs from a real mempool, so the data path runs as on a port.
#pragma once

#include <rte_mbuf.h>

#include <cstring>
#include <deque>
#include <string>
#include <vector>

#include "datapath/site_io.h"

namespace rowan::gw {

class MemorySiteIo final : public SiteIo {
 public:
  MemorySiteIo(rte_mempool* pool, std::string name, const std::array<uint8_t, 6>& mac)
      : pool_(pool), name_(std::move(name)), mac_(mac) {}
  ~MemorySiteIo() override {
    for (rte_mbuf* m : rx_) rte_pktmbuf_free(m);
    for (rte_mbuf* m : sent_) rte_pktmbuf_free(m);
  }
  /// Queues `frame` for rx(); false when the pool is empty.
  bool inject(const std::vector<uint8_t>& frame) {
    rte_mbuf* m = rte_pktmbuf_alloc(pool_);
    if (m == nullptr) return false;
    char* p = rte_pktmbuf_append(m, static_cast<uint16_t>(frame.size()));
    if (p == nullptr) {
      rte_pktmbuf_free(m);
      return false;
    }
    std::memcpy(p, frame.data(), frame.size());
    rx_.push_back(m);
    return true;
  }
  /// The frames sent so far, in order (their mbufs freed).
  std::vector<std::vector<uint8_t>> take_sent() {
    std::vector<std::vector<uint8_t>> out;
    for (rte_mbuf* m : sent_) {
      const auto* p = rte_pktmbuf_mtod(m, const uint8_t*);
      out.emplace_back(p, p + rte_pktmbuf_data_len(m));
      rte_pktmbuf_free(m);
    }
    sent_.clear();
    return out;
  }
  /// tx() takes at most `n` more frames (UINT32_MAX: no limit).
  void set_tx_budget(uint32_t n) { tx_budget_ = n; }
  size_t rx_pending() const { return rx_.size(); }

  uint16_t rx(rte_mbuf** pkts, uint16_t n) noexcept override {
    uint16_t k = 0;
    while (k < n && !rx_.empty()) {
      pkts[k++] = rx_.front();
      rx_.pop_front();
    }
    return k;
  }
  uint16_t tx(rte_mbuf** pkts, uint16_t n) noexcept override {
    uint16_t k = 0;
    while (k < n && tx_budget_ > 0) {
      sent_.push_back(pkts[k++]);
      if (tx_budget_ != UINT32_MAX) --tx_budget_;
    }
    return k;
  }
  rte_mempool* pool() const noexcept override { return pool_; }
  const std::string& name() const noexcept override { return name_; }
  const std::array<uint8_t, 6>& mac() const noexcept override { return mac_; }
  PortStats stats() const override { return {}; }

 private:
  rte_mempool* pool_;
  std::string name_;
  std::array<uint8_t, 6> mac_;
  std::deque<rte_mbuf*> rx_;
  std::vector<rte_mbuf*> sent_;
  uint32_t tx_budget_ = UINT32_MAX;
};

}  // namespace rowan::gw
