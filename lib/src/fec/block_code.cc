#include "fec/block_code.h"

#include <isa-l/erasure_code.h>
#include <isa-l/raid.h>

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <new>

namespace rowan::fec {
namespace {

size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

void put_len(uint8_t* p, size_t len) {
  p[0] = static_cast<uint8_t>(len >> 8);
  p[1] = static_cast<uint8_t>(len);
}
size_t get_len(const uint8_t* p) { return (size_t{p[0]} << 8) | p[1]; }

uint32_t low_bits(int n) { return n >= 32 ? ~uint32_t{0} : (uint32_t{1} << n) - 1; }

// True when serial number a is newer than b (RFC 1982 on u32).
bool newer(uint32_t a, uint32_t b) { return static_cast<int32_t>(a - b) > 0; }

// dest = XOR of srcs[0..n) over len bytes (len a multiple of kSymbolAlign,
// buffers kSymbolAlign-aligned, as xor_gen needs).
void xor_into(uint8_t* const* srcs, int n, uint8_t* dest, size_t len) {
  if (n == 1) {
    std::memcpy(dest, srcs[0], len);
    return;
  }
  void* array[kMaxSources + 1];
  for (int i = 0; i < n; ++i) array[i] = srcs[i];
  array[n] = dest;
  xor_gen(n + 1, static_cast<int>(len), array);
}

}  // namespace

// ---------------------------------------------------------------------------
// SymbolStore

SymbolStore::SymbolStore(size_t count, size_t stride)
    : count_(count), stride_(round_up(std::max<size_t>(stride, 1), kSymbolAlign)) {
  void* p = std::aligned_alloc(kSymbolAlign, std::max<size_t>(count_, 1) * stride_);
  if (p == nullptr) throw std::bad_alloc();
  std::memset(p, 0, std::max<size_t>(count_, 1) * stride_);
  base_.reset(static_cast<uint8_t*>(p));
}

void SymbolStore::Free::operator()(uint8_t* p) const noexcept { std::free(p); }

// ---------------------------------------------------------------------------
// EncodeTables

const uint8_t* EncodeTables::get(int k, int m) noexcept {
  if (k != k_ || m != m_) {
    gf_gen_cauchy1_matrix(matrix_, k + m, k);
    ec_init_tables(k, m, matrix_ + k * k, tables_);
    k_ = k;
    m_ = m;
  }
  return tables_;
}

// ---------------------------------------------------------------------------
// Encoder

Encoder::Encoder(size_t max_payload)
    : max_payload_(std::min(max_payload, kMaxPayload)),
      store_(kMaxSources + kMaxRepair, max_payload_ + kLengthPrefix) {}

void Encoder::begin(int k, int m) noexcept {
  k_ = std::clamp(k, 1, kMaxSources);
  m_ = std::clamp(m, 1, kMaxRepair);
  count_ = 0;
  longest_ = 0;
}

uint8_t* Encoder::add_slot(size_t len, std::span<const uint8_t> head) noexcept {
  if (count_ >= k_ || len > max_payload_ || head.size() > max_payload_ - len) return nullptr;
  uint8_t* s = store_.at(count_);
  put_len(s, head.size() + len);
  if (!head.empty()) std::memcpy(s + kLengthPrefix, head.data(), head.size());
  lens_[count_] = head.size() + len + kLengthPrefix;
  longest_ = std::max(longest_, lens_[count_]);
  ++count_;
  return s + kLengthPrefix + head.size();
}

bool Encoder::add(const uint8_t* data, size_t len, std::span<const uint8_t> head) noexcept {
  uint8_t* dst = add_slot(len, head);
  if (dst == nullptr) return false;
  if (len > 0) std::memcpy(dst, data, len);
  return true;
}

size_t Encoder::encode(int m) noexcept {
  if (count_ == 0) return 0;
  if (m > 0) m_ = std::min(m, m_);
  const size_t coded = round_up(longest_, kSymbolAlign);
  uint8_t* src[kMaxSources];
  uint8_t* dst[kMaxRepair];
  for (int i = 0; i < count_; ++i) {
    src[i] = store_.at(i);
    std::memset(src[i] + lens_[i], 0, coded - lens_[i]);  // implicit zero padding
  }
  for (int j = 0; j < m_; ++j) dst[j] = store_.at(kMaxSources + j);
  if (m_ == 1) {
    xor_into(src, count_, dst[0], coded);
  } else {
    ec_encode_data(static_cast<int>(coded), count_, m_,
                   const_cast<uint8_t*>(tables_.get(count_, m_)), src, dst);
  }
  return longest_;
}

// ---------------------------------------------------------------------------
// Decoder

Decoder::Decoder(size_t max_payload, uint32_t slots)
    : max_payload_(std::min(max_payload, kMaxPayload)),
      mask_(std::bit_ceil(std::max<uint32_t>(slots, 1)) - 1),
      slots_(new Slot[mask_ + 1]),
      store_(size_t{mask_ + 1} * (kMaxSources + kMaxRepair), max_payload_ + kLengthPrefix) {}

void Decoder::retire(Slot& s) noexcept {
  if (s.used && !s.finished && s.k > 0 && s.have_rep != 0 &&
      (s.have_src & low_bits(s.k)) != low_bits(s.k)) {
    ++stats_.unrecoverable;
  }
  s = Slot{};
}

Decoder::Slot* Decoder::slot_for(uint32_t block, Status* refused) noexcept {
  Slot& s = slots_[block & mask_];
  if (s.used && s.block == block) return &s;
  if (s.used && !newer(block, s.block)) {
    ++stats_.stale;
    *refused = Status::kStale;
    return nullptr;
  }
  retire(s);
  s.used = true;
  s.block = block;
  return &s;
}

Status Decoder::add_source(uint32_t block, int index, const uint8_t* data, size_t data_len,
                           std::span<const uint8_t> head) noexcept {
  nrecovered_ = 0;
  if (index < 0 || index >= kMaxSources || data_len > max_payload_ ||
      head.size() > max_payload_ - data_len) {
    ++stats_.invalid;
    return Status::kInvalid;
  }
  const size_t len = head.size() + data_len;
  Status refused = Status::kStale;
  Slot* s = slot_for(block, &refused);
  if (s == nullptr) return refused;
  if (s->finished || (s->have_src & (uint32_t{1} << index)) != 0) return Status::kDuplicate;
  if (s->k > 0 && (index >= s->k || len + kLengthPrefix > s->repair_len)) {
    ++stats_.invalid;
    return Status::kInvalid;
  }
  uint8_t* p = sym(static_cast<size_t>(s - slots_.get()), index);
  put_len(p, len);
  if (!head.empty()) std::memcpy(p + kLengthPrefix, head.data(), head.size());
  if (data_len > 0) std::memcpy(p + kLengthPrefix + head.size(), data, data_len);
  s->lens[index] = static_cast<uint16_t>(len + kLengthPrefix);
  s->have_src |= uint32_t{1} << index;
  ++stats_.sources;
  return try_decode(*s, static_cast<size_t>(s - slots_.get()));
}

Status Decoder::add_repair(const RepairInfo& info, const uint8_t* data, size_t len) noexcept {
  nrecovered_ = 0;
  if (info.k < 1 || info.k > kMaxSources || info.m < 1 || info.m > kMaxRepair || info.index < 0 ||
      info.index >= info.m || len < kLengthPrefix || len > max_payload_ + kLengthPrefix) {
    ++stats_.invalid;
    return Status::kInvalid;
  }
  Status refused = Status::kStale;
  Slot* s = slot_for(info.block, &refused);
  if (s == nullptr) return refused;
  if (s->finished) {
    ++stats_.late;
    return Status::kDuplicate;
  }
  if (s->k == 0) {
    // The first repair symbol fixes the block's shape; the sources already
    // held must fit it.
    if ((s->have_src & ~low_bits(info.k)) != 0) {
      ++stats_.invalid;
      return Status::kInvalid;
    }
    for (int i = 0; i < info.k; ++i) {
      if ((s->have_src & (uint32_t{1} << i)) != 0 && s->lens[i] > len) {
        ++stats_.invalid;
        return Status::kInvalid;
      }
    }
    s->k = info.k;
    s->m = info.m;
    s->repair_len = len;
  } else if (s->k != info.k || s->m != info.m || s->repair_len != len) {
    ++stats_.invalid;
    return Status::kInvalid;
  }
  if ((s->have_rep & (uint32_t{1} << info.index)) != 0) return Status::kDuplicate;
  const size_t si = static_cast<size_t>(s - slots_.get());
  std::memcpy(sym(si, kMaxSources + info.index), data, len);
  s->lens[kMaxSources + info.index] = static_cast<uint16_t>(len);
  s->have_rep |= uint32_t{1} << info.index;
  ++stats_.repairs;
  return try_decode(*s, si);
}

Status Decoder::try_decode(Slot& s, size_t si) noexcept {
  if (s.k == 0) return Status::kStored;
  const int k = s.k;
  const uint32_t present = s.have_src & low_bits(k);
  const int missing = k - std::popcount(present);
  if (missing == 0) {
    s.finished = true;
    return Status::kComplete;
  }
  if (std::popcount(s.have_rep) < missing) return Status::kStored;

  const size_t coded = round_up(s.repair_len, kSymbolAlign);
  uint8_t* chosen[kMaxSources];
  uint8_t* out[kMaxRepair];
  int missing_index[kMaxRepair];
  int nchosen = 0, nout = 0;
  for (int i = 0; i < k; ++i) {
    uint8_t* p = sym(si, i);
    if ((present & (uint32_t{1} << i)) != 0) {
      std::memset(p + s.lens[i], 0, coded - s.lens[i]);
      chosen[nchosen++] = p;
    } else {
      missing_index[nout] = i;
      out[nout++] = p;
    }
  }
  int repair_rows[kMaxRepair];
  int nrep = 0;
  for (int j = 0; j < s.m && nrep < missing; ++j) {
    if ((s.have_rep & (uint32_t{1} << j)) == 0) continue;
    uint8_t* p = sym(si, kMaxSources + j);
    std::memset(p + s.repair_len, 0, coded - s.repair_len);
    chosen[nchosen++] = p;
    repair_rows[nrep++] = j;
  }
  s.finished = true;

  if (s.m == 1) {
    // XOR parity: the one missing source is the XOR of everything else.
    xor_into(chosen, nchosen, out[0], coded);
  } else {
    // Rows of the generator matrix for the symbols held: identity rows for
    // the sources present, Cauchy rows for the repair symbols used.
    gf_gen_cauchy1_matrix(encode_matrix_, k + s.m, k);
    int row = 0;
    for (int i = 0; i < k; ++i) {
      if ((present & (uint32_t{1} << i)) == 0) continue;
      std::memcpy(sub_matrix_ + row * k, encode_matrix_ + i * k, static_cast<size_t>(k));
      ++row;
    }
    for (int r = 0; r < nrep; ++r, ++row) {
      std::memcpy(sub_matrix_ + row * k, encode_matrix_ + (k + repair_rows[r]) * k,
                  static_cast<size_t>(k));
    }
    if (gf_invert_matrix(sub_matrix_, inverse_, k) != 0) {
      ++stats_.invalid;  // cannot happen with a Cauchy matrix; refuse rather than guess
      return Status::kInvalid;
    }
    for (int e = 0; e < nout; ++e) {
      std::memcpy(decode_matrix_ + e * k, inverse_ + missing_index[e] * k, static_cast<size_t>(k));
    }
    ec_init_tables(k, nout, decode_matrix_, tables_);
    ec_encode_data(static_cast<int>(coded), k, nout, tables_, chosen, out);
  }

  ++stats_.decoded_blocks;
  nrecovered_ = 0;
  for (int e = 0; e < nout; ++e) {
    const size_t len = get_len(out[e]);
    if (len + kLengthPrefix > s.repair_len) {
      ++stats_.invalid;  // not a source this block could have held (forged repair)
      continue;
    }
    s.have_src |= uint32_t{1} << missing_index[e];
    recovered_[nrecovered_++] = Recovered{missing_index[e], {out[e] + kLengthPrefix, len}};
    ++stats_.recovered;
  }
  return nrecovered_ > 0 ? Status::kRecovered : Status::kInvalid;
}

}  // namespace rowan::fec
