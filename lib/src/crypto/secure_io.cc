#include "crypto/secure_io.h"

#include <openssl/rand.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace rowan::crypto {

const char* to_string(SecureDrop d) {
  switch (d) {
    case SecureDrop::kTruncated:
      return "truncated";
    case SecureDrop::kOversize:
      return "oversize";
    case SecureDrop::kBadType:
      return "bad_type";
    case SecureDrop::kBadAuth:
      return "bad_auth";
    case SecureDrop::kReplay:
      return "replay";
    case SecureDrop::kStale:
      return "stale";
    case SecureDrop::kUnknownPeer:
      return "unknown_peer";
    case SecureDrop::kNoSession:
      return "no_session";
    case SecureDrop::kCount:
      break;
  }
  return "?";
}

SecureIo::SecureIo(io::PacketIo& inner, const SecureIoOptions& opts, TimePoint now)
    : inner_(inner), opts_(opts), dgram_(inner.max_datagram()) {
  if (!id_.init(opts.private_key, opts.peer_public)) {
    throw std::invalid_argument("peer public key is not a usable X25519 key");
  }
  if (dgram_ <= kOverhead + 64 || dgram_ < kInitiationSize) {
    throw std::invalid_argument("link MTU too small for the secure link");
  }
  if (opts_.burst == 0) opts_.burst = 1;
  if (RAND_bytes(reinterpret_cast<uint8_t*>(&index_seed_), sizeof index_seed_) != 1 ||
      RAND_bytes(reinterpret_cast<uint8_t*>(&incarnation_), sizeof incarnation_) != 1) {
    throw std::runtime_error("RAND_bytes failed");
  }
  if (opts_.incarnation != 0) incarnation_ = opts_.incarnation;
  tx_mem_.resize(static_cast<size_t>(opts_.burst) * dgram_);
  rx_mem_.resize(static_cast<size_t>(opts_.burst) * dgram_);
  tx_.resize(opts_.burst);
  tx_origin_.resize(opts_.burst);
  tx_in_place_.resize(opts_.burst);
  rx_.resize(opts_.burst);
  for (uint32_t i = 0; i < opts_.burst; ++i) {
    rx_[i].data = rx_mem_.data() + static_cast<size_t>(i) * dgram_;
    rx_[i].capacity = dgram_;
  }
  start_handshake(now);
}

SecureIo::~SecureIo() {
  pending_state_.wipe();
  wipe(id_.private_key);
  wipe(id_.static_dh);
}

uint32_t SecureIo::new_index() noexcept {
  // Distinct from the indices in use; unpredictable enough to make blind
  // injection pointless (the AEAD is what actually rejects forgeries).
  for (;;) {
    index_seed_ = index_seed_ * 1664525U + 1013904223U;
    uint32_t v = index_seed_ ^ (index_seed_ >> 16);
    bool used = v == 0 || (pending_ && pending_state_.local_index == v);
    for (const Session& s : slots_) used = used || (s.valid && s.local_index == v);
    if (!used) return v;
  }
}

bool SecureIo::usable(int slot, TimePoint now) const noexcept {
  if (slot == kNone) return false;
  const Session& s = slots_[static_cast<size_t>(slot)];
  return s.valid && now - s.created < opts_.reject_after_time;
}

bool SecureIo::has_session(TimePoint now) const noexcept {
  return usable(current_, now) &&
         slots_[static_cast<size_t>(current_)].send_counter < opts_.rekey_after_packets * 2;
}

bool SecureIo::peer_up(TimePoint now) const noexcept {
  return has_session(now) && !sstats_.last_rx.is_zero() && now - sstats_.last_rx < opts_.rx_timeout;
}

int SecureIo::find_session(uint32_t local_index, TimePoint now) const noexcept {
  for (int slot : {current_, next_, previous_}) {
    if (usable(slot, now) && slots_[static_cast<size_t>(slot)].local_index == local_index) {
      return slot;
    }
  }
  return kNone;
}

int SecureIo::free_slot() const noexcept {
  for (int i = 0; i < static_cast<int>(slots_.size()); ++i) {
    if (i != current_ && i != next_ && i != previous_) return i;
  }
  return kNone;
}

void SecureIo::install(int slot, const SessionKeys& keys, uint32_t local, uint32_t remote,
                       bool initiator, TimePoint now) {
  Session& s = slots_[static_cast<size_t>(slot)];
  s.send.set_key(keys.send);
  s.recv.set_key(keys.recv);
  s.valid = true;
  s.initiator = initiator;
  s.local_index = local;
  s.remote_index = remote;
  s.send_counter = 0;
  s.sent_bytes = 0;
  s.created = now;
  s.last_rx = TimePoint::zero();
  s.window = ReplayWindow{};
}

void SecureIo::send_raw(const uint8_t* data, uint32_t len, TimePoint now) noexcept {
  const io::TxDatagram d{data, len, io::Ecn::kNotEct};
  inner_.send_burst({&d, 1}, now);  // lost when refused: the retry timer covers it
}

void SecureIo::start_handshake(TimePoint now) noexcept {
  uint8_t msg[kInitiationSize];
  if (usable(current_, now)) ++sstats_.rekeys;
  pending_state_.wipe();
  const uint64_t ts = static_cast<uint64_t>((now.ns() + opts_.wall_offset.ns()));
  pending_ = false;
  pending_sent_ = now;  // also paces retries when creation fails
  try {
    if (!create_initiation(id_, new_index(), ts, incarnation_, pending_state_, msg)) return;
  } catch (...) {
    return;
  }
  pending_ = true;
  ++sstats_.initiations_sent;
  send_raw(msg, kInitiationSize, now);
}

TimePoint SecureIo::next_timer() const noexcept { return pending_sent_ + opts_.handshake_retry; }

void SecureIo::poll(TimePoint now) noexcept {
  if (previous_ != kNone && !usable(previous_, now)) {
    slots_[static_cast<size_t>(previous_)].valid = false;
    previous_ = kNone;
  }
  if (!opts_.keepalive.is_zero() && has_session(now) && now - last_sent_ >= opts_.keepalive) {
    send_keepalive(now);
    ++sstats_.tx_keepalives;
    last_tx_ = now;  // silence in return now means the peer or the path is gone
  }
  if (now - pending_sent_ < opts_.handshake_retry) return;  // one handshake per retry interval
  bool want = false;
  if (!has_session(now)) {
    // An answered initiation waiting for its confirmation counts as progress.
    want = !(usable(next_, now) &&
             now - slots_[static_cast<size_t>(next_)].created < opts_.handshake_retry);
  } else {
    const Session& c = slots_[static_cast<size_t>(current_)];
    // The initiator rekeys on time; the responder only if the initiator did not.
    const Duration age_limit =
        c.initiator ? opts_.rekey_after_time : opts_.rekey_after_time + opts_.handshake_retry * 3;
    want = now - c.created >= age_limit || c.sent_bytes >= opts_.rekey_after_bytes ||
           c.send_counter >= opts_.rekey_after_packets;
    // The peer has gone quiet while we send: it may have restarted.
    const TimePoint heard = sstats_.last_rx;
    if (!want && !last_tx_.is_zero() && last_tx_ > heard && now - heard >= opts_.rx_timeout &&
        now - c.created >= opts_.rx_timeout) {
      want = true;
    }
    if (want && usable(next_, now) &&
        now - slots_[static_cast<size_t>(next_)].created < opts_.handshake_retry) {
      want = false;
    }
  }
  if (want) start_handshake(now);
}

uint64_t SecureIo::start_record(Session& s, uint8_t* out) noexcept {
  out[0] = kMsgData;
  out[1] = 0;
  out[2] = 0;
  out[3] = 0;
  store_be32(out + 4, s.remote_index);
  const uint64_t counter = s.send_counter++;
  store_be64(out + 8, counter);
  return counter;
}

bool SecureIo::seal_pieces(Session& s, const io::TxDatagram& p, uint8_t* out) noexcept {
  // The datagram as runs: its buffer's bytes between the pieces, and each
  // piece from where it lies (the transport's send buffer).
  std::array<AesGcm::Run, 2 * io::kMaxTxPieces + 1> runs;
  size_t n = 0;
  if (p.npieces > io::kMaxTxPieces ||
      !io::for_each_run(p.data, p.len, p.pieces, p.npieces, 0, [&](const uint8_t* src, size_t len) {
        runs[n++] = {src, len};
      })) {
    ++sstats_.tx_crypto_errors;  // malformed by the caller: never sent
    return false;
  }
  const uint64_t counter = start_record(s, out);
  if (!s.send.seal_runs(AesGcm::nonce(counter), out, kDataHeaderSize, runs.data(), n,
                        out + kDataHeaderSize, out + kDataHeaderSize + p.len)) {
    ++sstats_.tx_crypto_errors;
    return false;
  }
  s.sent_bytes += p.len + kOverhead;
  ++sstats_.tx_sealed_pieces;
  return true;
}

bool SecureIo::seal_into(Session& s, const uint8_t* payload, uint32_t len, uint8_t* out) noexcept {
  const uint64_t counter = start_record(s, out);
  if (!s.send.seal(AesGcm::nonce(counter), out, kDataHeaderSize, payload, len,
                   out + kDataHeaderSize, out + kDataHeaderSize + len)) {
    ++sstats_.tx_crypto_errors;
    return false;
  }
  s.sent_bytes += len + kOverhead;
  return true;
}

void SecureIo::unseal_in_place(Session& s, uint8_t* record, uint32_t len) noexcept {
  // CTR mode: decrypting with the key that sealed restores the plaintext.
  const uint64_t counter = load_be64(record + 8);
  if (!s.send.open(AesGcm::nonce(counter), record, kDataHeaderSize, record + kDataHeaderSize, len,
                   record + kDataHeaderSize, record + kDataHeaderSize + len)) {
    ++sstats_.tx_crypto_errors;  // cannot happen with the key that just sealed it
  }
}

void SecureIo::send_keepalive(TimePoint now) noexcept {
  if (!usable(current_, now)) return;
  uint8_t msg[kOverhead];
  if (seal_into(slots_[static_cast<size_t>(current_)], nullptr, 0, msg)) {
    send_raw(msg, kOverhead, now);
    last_sent_ = now;
  }
}

size_t SecureIo::send_burst(std::span<const io::TxDatagram> pkts, TimePoint now) noexcept {
  poll(now);
  const size_t n = std::min<size_t>(pkts.size(), opts_.burst);
  const bool ok = has_session(now);
  Session* s = ok ? &slots_[static_cast<size_t>(current_)] : nullptr;
  const uint32_t max_payload = max_datagram();
  size_t m = 0;
  for (size_t i = 0; i < n; ++i) {
    const io::TxDatagram& p = pkts[i];
    if (s == nullptr) {
      ++sstats_.tx_no_session;  // the transport retransmits once a session exists
      continue;
    }
    if (p.len > max_payload) {
      ++sstats_.tx_oversize;
      continue;
    }
    // Sealed straight into the backend's transmit buffer when it lends one
    // (packet_io.h): the AEAD's output is the only copy of the payload. A
    // datagram the caller wrote into the buffer this lent it (tx_buffer) is
    // sealed where it lies. Otherwise its source is the caller's memory, or
    // a lent buffer of a later index (an earlier datagram was skipped, or
    // this is a retry), whose contents the caller has handed over already.
    uint8_t* out = inner_.tx_buffer(m);
    if (out == nullptr) out = tx_mem_.data() + m * dgram_;
    const bool sealed = p.npieces > 0 ? seal_pieces(*s, p, out) : seal_into(*s, p.data, p.len, out);
    if (!sealed) continue;
    tx_[m] = io::TxDatagram{out, p.len + kOverhead, p.ecn};
    tx_origin_[m] = static_cast<uint32_t>(i);
    const bool in_place = p.data == out + kDataHeaderSize;
    tx_in_place_[m] = in_place ? out : nullptr;
    sstats_.tx_sealed_in_place += in_place ? 1 : 0;
    ++m;
  }
  size_t accepted = n;
  if (m > 0) {
    const size_t sent = inner_.send_burst({tx_.data(), m}, now);
    if (sent < m) {
      accepted = tx_origin_[sent];
      stats_.tx_full += m - sent;
      // The caller passes the refused ones again as they are: give back the
      // plaintext of those sealed where they lie (each is sealed afresh,
      // with a new counter, when it goes).
      for (size_t j = sent; j < m; ++j) {
        if (tx_in_place_[j] != nullptr)
          unseal_in_place(*s, tx_in_place_[j], tx_[j].len - kOverhead);
      }
    }
    sstats_.tx_data += sent;
    last_tx_ = now;
    last_sent_ = now;
    for (size_t j = 0; j < sent; ++j) {
      ++stats_.tx_packets;
      stats_.tx_bytes += tx_[j].len - kOverhead;
    }
  }
  return accepted;
}

size_t SecureIo::recv_burst(std::span<io::RxDatagram> bufs, TimePoint now) noexcept {
  poll(now);
  size_t filled = 0;
  for (int round = 0; round < 4 && filled < bufs.size(); ++round) {
    const size_t want = std::min<size_t>(bufs.size() - filled, opts_.burst);
    const size_t got = inner_.recv_burst({rx_.data(), want}, now);
    for (size_t i = 0; i < got; ++i) {
      io::RxDatagram& dst = bufs[filled];
      const uint32_t len = on_datagram(rx_[i].data, rx_[i].len, dst, now);
      if (len > 0) {
        dst.len = len;
        dst.ecn = rx_[i].ecn;
        dst.rx_time = rx_[i].rx_time;
        ++stats_.rx_packets;
        stats_.rx_bytes += len;
        ++filled;
      }
    }
    // A lending inner pointed these at its own memory: point them back.
    if (lend_rx_) {
      for (size_t i = 0; i < got; ++i) rx_[i].data = rx_mem_.data() + i * dgram_;
    }
    if (got < want) break;
  }
  return filled;
}

uint32_t SecureIo::on_datagram(uint8_t* data, uint32_t len, io::RxDatagram& dst,
                               TimePoint now) noexcept {
  if (len < 4) {
    drop(SecureDrop::kTruncated);
    return 0;
  }
  switch (data[0]) {
    case kMsgData:
      break;
    case kMsgInitiation:
      if (len != kInitiationSize) {
        drop(len < kInitiationSize ? SecureDrop::kTruncated : SecureDrop::kOversize);
      } else {
        on_initiation(data, now);
      }
      return 0;
    case kMsgResponse:
      if (len != kResponseSize) {
        drop(len < kResponseSize ? SecureDrop::kTruncated : SecureDrop::kOversize);
      } else {
        on_response(data, now);
      }
      return 0;
    default:
      drop(SecureDrop::kBadType);
      return 0;
  }
  if (len < kOverhead) {
    drop(SecureDrop::kTruncated);
    return 0;
  }
  const uint32_t plen = len - kOverhead;
  // Lending, the record is opened where it lies and handed up from there.
  uint8_t* const out = lend_rx_ ? data + kDataHeaderSize : dst.data;
  if (!lend_rx_ && plen > dst.capacity) {
    drop(SecureDrop::kOversize);
    return 0;
  }
  const int slot = find_session(load_be32(data + 4), now);
  if (slot == kNone) {
    drop(SecureDrop::kNoSession);
    return 0;
  }
  Session& s = slots_[static_cast<size_t>(slot)];
  const uint64_t counter = load_be64(data + 8);
  switch (s.window.check(counter)) {
    case ReplayWindow::Result::kOk:
      break;
    case ReplayWindow::Result::kReplay:
      drop(SecureDrop::kReplay);
      return 0;
    case ReplayWindow::Result::kStale:
      drop(SecureDrop::kStale);
      return 0;
  }
  if (!s.recv.open(AesGcm::nonce(counter), data, kDataHeaderSize, data + kDataHeaderSize, plen, out,
                   data + kDataHeaderSize + plen)) {
    drop(SecureDrop::kBadAuth);
    return 0;
  }
  s.window.update(counter);
  s.last_rx = now;
  sstats_.last_rx = now;
  if (slot == next_) {
    // Key confirmation: the initiator now sends on this session, so do we.
    if (previous_ != kNone) slots_[static_cast<size_t>(previous_)].valid = false;
    previous_ = current_;
    current_ = next_;
    next_ = kNone;
    ++sstats_.handshakes_completed;
    sstats_.last_handshake = now;
  }
  if (plen == 0) {
    ++sstats_.rx_keepalives;
    return 0;
  }
  ++sstats_.rx_data;
  dst.data = out;
  return plen;
}

void SecureIo::on_initiation(const uint8_t* data, TimePoint now) noexcept {
  HandshakeState st;
  uint64_t ts = 0;
  uint64_t inc = 0;
  HandshakeResult r = HandshakeResult::kBadAuth;
  try {
    r = consume_initiation(id_, data, last_peer_timestamp_, st, ts, inc);
  } catch (...) {
  }
  switch (r) {
    case HandshakeResult::kOk:
      break;
    case HandshakeResult::kBadAuth:
      drop(SecureDrop::kBadAuth);
      return;
    case HandshakeResult::kUnknownPeer:
      drop(SecureDrop::kUnknownPeer);
      return;
    case HandshakeResult::kReplay:
      drop(SecureDrop::kReplay);
      return;
  }
  uint8_t msg[kResponseSize];
  SessionKeys keys;
  try {
    if (!create_response(id_, new_index(), incarnation_, st, msg, keys)) return;
    // The answered session waits in `next` until the initiator's first
    // datagram confirms it; an older unconfirmed one is replaced.
    const int slot = next_ != kNone ? next_ : free_slot();
    const int use = slot != kNone ? slot : previous_;
    if (use == previous_) previous_ = kNone;
    install(use, keys, st.local_index, st.remote_index, false, now);
    next_ = use;
  } catch (...) {
    keys.wipe();
    return;
  }
  keys.wipe();
  last_peer_timestamp_ = ts;
  learn_incarnation(inc);
  sstats_.last_rx = now;  // an authentic initiation: the peer is alive
  ++sstats_.responses_sent;
  send_raw(msg, kResponseSize, now);
}

void SecureIo::learn_incarnation(uint64_t inc) noexcept {
  if (peer_incarnation_ != 0 && inc != peer_incarnation_) ++sstats_.peer_restarts;
  peer_incarnation_ = inc;
}

void SecureIo::on_response(const uint8_t* data, TimePoint now) noexcept {
  if (!pending_ || load_be32(data + 8) != pending_state_.local_index) {
    drop(SecureDrop::kNoSession);
    return;
  }
  SessionKeys keys;
  uint64_t inc = 0;
  HandshakeResult r = HandshakeResult::kBadAuth;
  try {
    r = consume_response(id_, data, pending_state_, keys, inc);
  } catch (...) {
  }
  if (r != HandshakeResult::kOk) {
    drop(SecureDrop::kBadAuth);
    return;
  }
  // Keep, besides the new session, the one the peer last sent on (it may
  // still be sending on it) and any session waiting for confirmation.
  int keep = previous_;
  if (current_ != kNone &&
      (previous_ == kNone || slots_[static_cast<size_t>(current_)].last_rx >=
                                 slots_[static_cast<size_t>(previous_)].last_rx)) {
    keep = current_;
  }
  for (int slot : {current_, previous_}) {
    if (slot != kNone && slot != keep) slots_[static_cast<size_t>(slot)].valid = false;
  }
  previous_ = keep;
  current_ = kNone;
  const int slot = free_slot();
  try {
    install(slot, keys, pending_state_.local_index, pending_state_.remote_index, true, now);
  } catch (...) {
    keys.wipe();
    pending_ = false;
    return;
  }
  keys.wipe();
  current_ = slot;
  pending_ = false;
  learn_incarnation(inc);
  sstats_.last_rx = now;  // an authentic response
  ++sstats_.handshakes_completed;
  sstats_.last_handshake = now;
  send_keepalive(now);  // confirms the session to the responder
}

}  // namespace rowan::crypto
