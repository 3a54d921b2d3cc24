#include "transport/driver.h"

#include <algorithm>

namespace rowan::transport {
namespace {

uint32_t datagram_size(const Connection& conn, std::span<io::PacketIo* const> ios) {
  uint32_t d = conn.config().max_datagram;
  for (const io::PacketIo* io : ios) d = std::max(d, io->max_datagram());
  return d;
}

}  // namespace

Driver::Driver(Connection& conn, io::PacketIo& io, uint32_t burst, const Clock* clock)
    : Driver(conn, std::span<io::PacketIo* const>(std::vector<io::PacketIo*>{&io}), burst, clock) {}

Driver::Driver(Connection& conn, std::span<io::PacketIo* const> ios, uint32_t burst,
               const Clock* clock)
    : conn_(conn),
      ios_(ios.begin(), ios.end()),
      clock_(clock),
      dgram_(datagram_size(conn, ios)),
      rx_mem_(static_cast<size_t>(burst) * dgram_),
      tx_mem_(static_cast<size_t>(burst) * dgram_),
      rx_(burst),
      out_(burst),
      tx_(burst),
      scratch_(burst),
      tx_path_(burst),
      tx_buf_(burst) {
  for (uint32_t i = 0; i < burst; ++i) {
    rx_[i].data = rx_mem_.data() + static_cast<size_t>(i) * dgram_;
    rx_[i].capacity = dgram_;
    out_[i].data = tx_mem_.data() + static_cast<size_t>(i) * dgram_;
    out_[i].capacity = dgram_;
  }
  // Every received burst is handled before the next is read, so the
  // backends may lend their receive memory (rx_done after each burst).
  for (io::PacketIo* io : ios_) rx_lent_.push_back(io->lend_rx(true));
  pieces_ok_ = !ios_.empty();
  for (const io::PacketIo* io : ios_) pieces_ok_ = pieces_ok_ && io->takes_pieces();
  for (OutDatagram& o : out_) o.pieces_ok = pieces_ok_;
}

void Driver::flush(TimePoint now) noexcept {
  size_t kept = 0;
  for (size_t k = 0; k < ios_.size() && tx_count_ > 0; ++k) {
    size_t n = 0;
    for (size_t i = 0; i < tx_count_; ++i)
      if (tx_path_[i] == k) scratch_[n++] = tx_[i];
    if (n == 0) continue;
    const size_t sent = ios_[k]->send_burst(std::span(scratch_.data(), n), now);
    // Keep this backend's unsent ones, in order, for the next pass, whole:
    // a piece read later could be data the peer acknowledged meanwhile
    // (a retransmission's original), whose chunk went back to the pool.
    size_t seen = 0;
    for (size_t i = 0; i < tx_count_; ++i) {
      if (tx_path_[i] != k) continue;
      if (seen++ < sent) {
        tx_path_[i] = UINT16_MAX;  // sent
      } else if (tx_[i].npieces > 0) {
        io::fill_pieces(tx_buf_[i], tx_[i].pieces, tx_[i].npieces);
        tx_[i].npieces = 0;
        tx_[i].pieces = nullptr;
      }
    }
  }
  for (size_t i = 0; i < tx_count_; ++i) {
    if (tx_path_[i] == UINT16_MAX) continue;
    if (tx_path_[i] >= ios_.size()) {
      ++dropped_no_io_;
      continue;
    }
    tx_[kept] = tx_[i];
    tx_path_[kept] = tx_path_[i];
    tx_buf_[kept] = tx_buf_[i];
    ++kept;
  }
  tx_count_ = kept;
}

void Driver::lend_tx_buffers() noexcept {
  // With one backend every datagram goes to it, so it can be written where
  // the backend sends it from. With several, the path (and so the backend)
  // is chosen per datagram after its buffer: the Driver's own memory.
  // A lent buffer holds max_datagram() of its backend: enough when that is
  // the largest datagram the connection writes (dgram_).
  if (ios_.size() != 1 || ios_[0]->max_datagram() < dgram_) return;
  for (size_t i = 0; i < out_.size(); ++i) {
    uint8_t* lent = ios_[0]->tx_buffer(i);
    out_[i].data = lent != nullptr ? lent : tx_mem_.data() + i * dgram_;
  }
}

TimePoint Driver::poll(TimePoint now) noexcept {
  if (tx_count_ > 0) flush(now);
  for (size_t k = 0; k < ios_.size(); ++k) {
    io::PacketIo& io = *ios_[k];
    const PathId path{static_cast<uint16_t>(k)};
    for (;;) {
      // Once per burst: datagrams that arrive while earlier bursts are being
      // processed must not carry the time the pass began.
      if (clock_ != nullptr) now = std::max(now, clock_->now());
      const size_t n = io.recv_burst(std::span(rx_.data(), rx_.size()), now);
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
        conn_.on_datagram(rx_[i].data, rx_[i].len, rx_[i].ecn, now, rx_[i].rx_time, path);
      if (rx_lent_[k]) {
        // Give the burst back, and point the buffers it lent back at ours.
        io.rx_done();
        for (size_t i = 0; i < n; ++i) rx_[i].data = rx_mem_.data() + i * dgram_;
      }
      if (n < rx_.size()) break;
    }
  }
  if (conn_.next_timeout() <= now) conn_.on_timeout(now);
  // Up to kMaxSendBursts bursts while the connection fills each one and the
  // backends take it all: a loop that sleeps between passes (wake-up
  // coalescing, a late timer) comes back owing more than one burst, and
  // the pacer lets it catch up (pacer.h); one burst per pass made the
  // loop's wake-up rate a ceiling on its sending rate.
  for (uint32_t b = 0; b < kMaxSendBursts && tx_count_ == 0; ++b) {
    // Send stamps as close to the datagrams' departure as the loop can
    // read: handling the receive burst may have taken a while.
    if (clock_ != nullptr) now = std::max(now, clock_->now());
    lend_tx_buffers();
    const size_t n = conn_.poll_send(std::span(out_.data(), out_.size()), now);
    for (size_t i = 0; i < n; ++i) {
      const OutDatagram& o = out_[i];
      tx_[i] = io::TxDatagram{o.data, o.len, io::Ecn::kEct0, o.pieces.data(), o.npieces};
      tx_path_[i] = o.path.index;
      tx_buf_[i] = o.data;
    }
    tx_count_ = n;
    flush(now);
    if (n < out_.size()) break;
  }
  TimePoint next = conn_.next_timeout();
  for (const io::PacketIo* io : ios_) next = std::min(next, io->next_rx_time());
  // The backend refused part of a burst: retry soon rather than spin (the
  // connection, which wants to send, would otherwise ask for `now` again).
  if (tx_count_ > 0) next = now + kTxRetry;
  return next;
}

}  // namespace rowan::transport
