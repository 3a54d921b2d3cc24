#include "transport/driver.h"

#include <algorithm>

namespace rowan::transport {

Driver::Driver(Connection& conn, io::PacketIo& io, uint32_t burst, const Clock* clock)
    : conn_(conn),
      io_(io),
      clock_(clock),
      dgram_(std::max(conn.config().max_datagram, io.max_datagram())),
      rx_mem_(static_cast<size_t>(burst) * dgram_),
      tx_mem_(static_cast<size_t>(burst) * dgram_),
      rx_(burst),
      out_(burst),
      tx_(burst) {
  for (uint32_t i = 0; i < burst; ++i) {
    rx_[i].data = rx_mem_.data() + static_cast<size_t>(i) * dgram_;
    rx_[i].capacity = dgram_;
    out_[i].data = tx_mem_.data() + static_cast<size_t>(i) * dgram_;
    out_[i].capacity = dgram_;
  }
}

TimePoint Driver::poll(TimePoint now) noexcept {
  if (tx_count_ > 0) {
    const size_t sent = io_.send_burst(std::span(tx_.data() + tx_head_, tx_count_), now);
    tx_head_ += sent;
    tx_count_ -= sent;
  }
  for (;;) {
    // Once per burst: datagrams that arrive while earlier bursts are being
    // processed must not carry the time the pass began.
    if (clock_ != nullptr) now = std::max(now, clock_->now());
    const size_t n = io_.recv_burst(std::span(rx_.data(), rx_.size()), now);
    // A datagram that arrived after the clock read (the thread was preempted
    // before it reaped): move `now` past it, so no event of this pass is
    // dated before an arrival it handles.
    if (clock_ != nullptr) {
      TimePoint last;
      for (size_t i = 0; i < n; ++i) last = std::max(last, rx_[i].rx_time);
      if (last > now) now = std::max(now, clock_->now());
      // None can have arrived after this read: a later one is a bad conversion.
      for (size_t i = 0; i < n; ++i)
        if (rx_[i].rx_time > now) rx_[i].rx_time = now;
    }
    for (size_t i = 0; i < n; ++i)
      conn_.on_datagram(rx_[i].data, rx_[i].len, rx_[i].ecn, now, rx_[i].rx_time);
    if (n < rx_.size()) break;
  }
  if (conn_.next_timeout() <= now) conn_.on_timeout(now);
  if (tx_count_ == 0) {
    // Send stamps as close to the datagrams' departure as the loop can
    // read: handling the receive burst may have taken a while.
    if (clock_ != nullptr) now = std::max(now, clock_->now());
    const size_t n = conn_.poll_send(std::span(out_.data(), out_.size()), now);
    for (size_t i = 0; i < n; ++i)
      tx_[i] = io::TxDatagram{out_[i].data, out_[i].len, io::Ecn::kEct0};
    const size_t sent = io_.send_burst(std::span(tx_.data(), n), now);
    tx_head_ = sent;
    tx_count_ = n - sent;
  }
  TimePoint next = std::min(conn_.next_timeout(), io_.next_rx_time());
  // The backend refused part of a burst: retry soon rather than spin (the
  // connection, which wants to send, would otherwise ask for `now` again).
  if (tx_count_ > 0) next = now + kTxRetry;
  return next;
}

}  // namespace rowan::transport
