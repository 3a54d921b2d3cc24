// libFuzzer target for the FEC block code (lib/src/fec/block_code.h), the
// decoder a peer's REPAIR frames reach. Each input is, by its first byte:
//  - even: a sequence of operations on one Decoder (sources and repair
//    symbols of attacker-chosen blocks, indices, shapes and bytes);
//  - odd:  a round trip: the rest of the input is cut into k sources of a
//    block with m repair symbols, some of them erased, and decoded.
// Properties beyond ASan/UBSan: a rebuilt payload never exceeds its block's
// symbol; a round trip with at most m erasures rebuilds every erased source
// exactly, and one with more rebuilds nothing.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "fec/block_code.h"

namespace {

using namespace rowan::fec;

constexpr size_t kMax = 512;

struct Input {
  const uint8_t* p;
  size_t n;
  uint8_t u8() {
    if (n == 0) return 0;
    --n;
    return *p++;
  }
  uint16_t u16() { return static_cast<uint16_t>((u8() << 8) | u8()); }
};

void operations(Input in) {
  static Decoder dec(kMax, 4);
  while (in.n > 0) {
    const uint8_t op = in.u8();
    const uint32_t block = in.u8() % 16;
    RepairInfo r{block, 0, 0, 0};
    if (op & 1) {
      r.k = in.u8() % 40;
      r.m = in.u8() % 10;
      r.index = in.u8() % 10;
    }
    const size_t len = std::min<size_t>(in.u16() % (kMax + 8), in.n);
    const uint8_t* data = in.p;
    Status st;
    size_t symbol = 0;
    if (op & 1) {
      st = dec.add_repair(r, data, len);
      symbol = len;
    } else {
      st = dec.add_source(block, static_cast<int>(op >> 1) % 40 - 2, data, len);
    }
    if (st == Status::kRecovered) {
      for (int i = 0; i < dec.recovered_count(); ++i) {
        const auto rec = dec.recovered(i);
        if (rec.index < 0 || rec.index >= kMaxSources) std::abort();
        if (symbol != 0 && rec.payload.size() + kLengthPrefix > symbol) std::abort();
        if (rec.payload.size() > kMax) std::abort();
      }
    }
    in.p += len;
    in.n -= len;
  }
}

void round_trip(Input in) {
  static Encoder enc(kMax);
  static Decoder dec(kMax, 2);
  static uint32_t block = 0;
  const int k = in.u8() % kMaxSources + 1;
  const int m = in.u8() % kMaxRepair + 1;
  const uint64_t erase_bits = (uint64_t{in.u8()} << 32) | (uint64_t{in.u16()} << 16) | in.u16();
  std::vector<std::vector<uint8_t>> src(static_cast<size_t>(k));
  enc.begin(k, m);
  for (auto& s : src) {
    const size_t len = std::min<size_t>(in.u8() * 2, in.n);
    s.assign(in.p, in.p + len);
    in.p += len;
    in.n -= len;
    if (!enc.add(s.data(), s.size())) std::abort();
  }
  const size_t rlen = enc.encode();
  ++block;
  int erased = 0;
  for (int i = 0; i < k + m; ++i) erased += (erase_bits >> i) & 1;
  std::vector<bool> got(static_cast<size_t>(k), false);
  for (int i = 0; i < k + m; ++i) {
    if ((erase_bits >> i) & 1) continue;
    const Status st = i < k
                          ? dec.add_source(block, i, src[i].data(), src[i].size())
                          : dec.add_repair(RepairInfo{block, k, m, i - k}, enc.repair(i - k), rlen);
    if (st == Status::kInvalid) std::abort();
    if (st != Status::kRecovered) continue;
    if (erased > m) std::abort();  // too few symbols cannot decode
    for (int r = 0; r < dec.recovered_count(); ++r) {
      const auto rec = dec.recovered(r);
      const auto& want = src[static_cast<size_t>(rec.index)];
      if (rec.payload.size() != want.size() ||
          (!want.empty() && std::memcmp(rec.payload.data(), want.data(), want.size()) != 0))
        std::abort();
      got[static_cast<size_t>(rec.index)] = true;
    }
  }
  if (erased <= m) {
    for (int i = 0; i < k; ++i) {
      if (((erase_bits >> i) & 1) && !got[static_cast<size_t>(i)]) std::abort();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  Input in{data + 1, size - 1};
  if (data[0] & 1) {
    round_trip(in);
  } else {
    operations(in);
  }
  return 0;
}
