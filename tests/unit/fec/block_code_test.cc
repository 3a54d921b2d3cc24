// The block erasure code: XOR and Reed-Solomon blocks recover any m erasures
// of variable-length payloads, in any arrival order, with late and duplicate
// repair symbols; blocks with too many erasures are given up; bad and forged
// input is refused and counted.
#include "fec/block_code.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

namespace rowan::fec {
namespace {

constexpr size_t kMax = 1444;

std::vector<uint8_t> payload(std::mt19937& rng, size_t len) {
  std::vector<uint8_t> v(len);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

struct Block {
  std::vector<std::vector<uint8_t>> sources;
  std::vector<std::vector<uint8_t>> repairs;
  int k = 0, m = 0;
};

Block make_block(Encoder& enc, std::mt19937& rng, int k, int m, size_t max_len = kMax) {
  Block b;
  b.k = k;
  b.m = m;
  enc.begin(k, m);
  std::uniform_int_distribution<size_t> len(0, max_len);
  for (int i = 0; i < k; ++i) {
    b.sources.push_back(payload(rng, len(rng)));
    EXPECT_TRUE(enc.add(b.sources.back().data(), b.sources.back().size()));
  }
  const size_t rlen = enc.encode();
  size_t longest = 0;
  for (auto& s : b.sources) longest = std::max(longest, s.size());
  EXPECT_EQ(rlen, longest + kLengthPrefix);
  for (int j = 0; j < m; ++j) b.repairs.emplace_back(enc.repair(j), enc.repair(j) + rlen);
  return b;
}

// Feeds `b` to `dec` as block `id`, erasing the sources and repair symbols
// flagged in `lost`, in a shuffled order; returns the sources the decoder
// produced (recovered ones) by index.
std::vector<std::vector<uint8_t>> deliver(Decoder& dec, const Block& b, uint32_t id,
                                          const std::vector<bool>& lost, std::mt19937& rng,
                                          int* recovered_calls = nullptr) {
  std::vector<int> order(b.k + b.m);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<std::vector<uint8_t>> got(b.k);
  for (int sym : order) {
    if (lost[sym]) continue;
    Status st;
    if (sym < b.k) {
      st = dec.add_source(id, sym, b.sources[sym].data(), b.sources[sym].size());
    } else {
      st = dec.add_repair(RepairInfo{id, b.k, b.m, sym - b.k}, b.repairs[sym - b.k].data(),
                          b.repairs[sym - b.k].size());
    }
    EXPECT_NE(st, Status::kInvalid);
    if (st == Status::kRecovered) {
      if (recovered_calls) ++*recovered_calls;
      for (int i = 0; i < dec.recovered_count(); ++i) {
        auto r = dec.recovered(i);
        got[r.index].assign(r.payload.begin(), r.payload.end());
        // A source rebuilt before its own copy arrived is as good as lost.
        EXPECT_EQ(got[r.index], b.sources[r.index]) << "block " << id << " source " << r.index;
      }
    }
  }
  return got;
}

TEST(BlockCode, XorRecoversAnySingleErasure) {
  std::mt19937 rng(1);
  Encoder enc(kMax);
  Decoder dec(kMax, 8);
  uint32_t id = 0;
  for (int k : {1, 2, 5, 16, 32}) {
    const Block b = make_block(enc, rng, k, 1);
    for (int erased = 0; erased < k; ++erased) {
      std::vector<bool> lost(k + 1, false);
      lost[erased] = true;
      auto got = deliver(dec, b, id++, lost, rng);
      EXPECT_EQ(got[erased], b.sources[erased]) << "k=" << k << " erased=" << erased;
    }
  }
  EXPECT_EQ(dec.stats().invalid, 0u);
}

TEST(BlockCode, ReedSolomonRecoversRandomErasurePatterns) {
  std::mt19937 rng(2);
  Encoder enc(kMax);
  Decoder dec(kMax, 16);
  uint32_t id = 100;
  uint64_t recovered = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const int k = std::uniform_int_distribution<int>(1, kMaxSources)(rng);
    const int m = std::uniform_int_distribution<int>(2, kMaxRepair)(rng);
    const Block b = make_block(enc, rng, k, m);
    // Erase up to m symbols anywhere (sources or repair).
    const int erase = std::uniform_int_distribution<int>(0, m)(rng);
    std::vector<int> idx(k + m);
    std::iota(idx.begin(), idx.end(), 0);
    std::shuffle(idx.begin(), idx.end(), rng);
    std::vector<bool> lost(k + m, false);
    int lost_sources = 0;
    for (int i = 0; i < erase; ++i) {
      lost[idx[i]] = true;
      lost_sources += idx[i] < k;
    }
    auto got = deliver(dec, b, id++, lost, rng);
    for (int i = 0; i < k; ++i) {
      if (lost[i]) {
        EXPECT_EQ(got[i], b.sources[i]) << "trial " << trial << " source " << i;
      }
    }
    recovered += lost_sources;
  }
  // Every lost source was rebuilt; some that were only late were rebuilt too.
  EXPECT_GE(dec.stats().recovered, recovered);
  EXPECT_GT(recovered, 300u);
  EXPECT_EQ(dec.stats().invalid, 0u);
}

TEST(BlockCode, ShortBlockAndEmptyAndTinyPayloads) {
  std::mt19937 rng(3);
  Encoder enc(kMax);
  Decoder dec(kMax, 4);
  // A block cut short: begun for 16, closed after 3 sources.
  enc.begin(16, 3);
  const std::vector<uint8_t> a = {}, bb = {7}, c = {1, 2, 3, 4, 5};
  ASSERT_TRUE(enc.add(a.data(), a.size()));
  ASSERT_TRUE(enc.add(bb.data(), bb.size()));
  ASSERT_TRUE(enc.add(c.data(), c.size()));
  const size_t rlen = enc.encode();
  ASSERT_EQ(rlen, 7u);
  // Lose all three sources; three repair symbols rebuild them.
  for (int j = 0; j < 3; ++j) {
    const Status st = dec.add_repair(RepairInfo{9, 3, 3, j}, enc.repair(j), rlen);
    EXPECT_EQ(st, j < 2 ? Status::kStored : Status::kRecovered);
  }
  ASSERT_EQ(dec.recovered_count(), 3);
  std::vector<std::vector<uint8_t>> got(3);
  for (int i = 0; i < 3; ++i) {
    auto r = dec.recovered(i);
    got[r.index].assign(r.payload.begin(), r.payload.end());
  }
  EXPECT_EQ(got[0], a);
  EXPECT_EQ(got[1], bb);
  EXPECT_EQ(got[2], c);
}

TEST(BlockCode, HeadAndBodyFormOnePayload) {
  // The transport codes a packet number (head) and the packet's frames (body).
  Encoder enc(32);
  Decoder dec(32, 2);
  const uint8_t pn[8] = {0, 0, 0, 0, 0, 0, 1, 2};
  const uint8_t body0[5] = {10, 11, 12, 13, 14}, body1[3] = {20, 21, 22};
  enc.begin(2, 1);
  ASSERT_TRUE(enc.add(body0, 5, pn));
  ASSERT_TRUE(enc.add(body1, 3, pn));
  EXPECT_FALSE(enc.add(body1, 25, pn));  // 33 > 32
  const size_t rlen = enc.encode();
  ASSERT_EQ(rlen, 8 + 5 + kLengthPrefix);
  EXPECT_EQ(dec.add_source(1, 1, body1, 3, pn), Status::kStored);
  EXPECT_EQ(dec.add_source(1, 0, body1, 25, pn), Status::kInvalid);
  ASSERT_EQ(dec.add_repair(RepairInfo{1, 2, 1, 0}, enc.repair(0), rlen), Status::kRecovered);
  const auto r = dec.recovered(0);
  EXPECT_EQ(r.index, 0);
  const std::vector<uint8_t> want = {0, 0, 0, 0, 0, 0, 1, 2, 10, 11, 12, 13, 14};
  EXPECT_EQ(std::vector<uint8_t>(r.payload.begin(), r.payload.end()), want);
}

TEST(BlockCode, LateAndDuplicateRepairAndCompleteBlocks) {
  std::mt19937 rng(4);
  Encoder enc(kMax);
  Decoder dec(kMax, 4);
  const Block b = make_block(enc, rng, 8, 2);
  // Every source arrives, then the repair: nothing to recover.
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(dec.add_source(1, i, b.sources[i].data(), b.sources[i].size()), Status::kStored);
  }
  EXPECT_EQ(dec.add_repair(RepairInfo{1, 8, 2, 0}, b.repairs[0].data(), b.repairs[0].size()),
            Status::kComplete);
  EXPECT_EQ(dec.add_repair(RepairInfo{1, 8, 2, 1}, b.repairs[1].data(), b.repairs[1].size()),
            Status::kDuplicate);
  EXPECT_EQ(dec.stats().late, 1u);
  // Repair first, then a late source completes the decode of the other.
  const Block c = make_block(enc, rng, 4, 2);
  EXPECT_EQ(dec.add_repair(RepairInfo{2, 4, 2, 1}, c.repairs[1].data(), c.repairs[1].size()),
            Status::kStored);
  EXPECT_EQ(dec.add_repair(RepairInfo{2, 4, 2, 1}, c.repairs[1].data(), c.repairs[1].size()),
            Status::kDuplicate);
  EXPECT_EQ(dec.add_source(2, 0, c.sources[0].data(), c.sources[0].size()), Status::kStored);
  EXPECT_EQ(dec.add_source(2, 2, c.sources[2].data(), c.sources[2].size()), Status::kStored);
  EXPECT_EQ(dec.add_source(2, 3, c.sources[3].data(), c.sources[3].size()), Status::kRecovered);
  ASSERT_EQ(dec.recovered_count(), 1);
  EXPECT_EQ(dec.recovered(0).index, 1);
  EXPECT_TRUE(std::equal(dec.recovered(0).payload.begin(), dec.recovered(0).payload.end(),
                         c.sources[1].begin(), c.sources[1].end()));
  // The source that was rebuilt, arriving late, is a duplicate.
  EXPECT_EQ(dec.add_source(2, 1, c.sources[1].data(), c.sources[1].size()), Status::kDuplicate);
}

TEST(BlockCode, TooManyErasuresIsGivenUpWhenTheSlotIsReused) {
  std::mt19937 rng(5);
  Encoder enc(kMax);
  Decoder dec(kMax, 2);
  const Block b = make_block(enc, rng, 6, 2);
  std::vector<bool> lost(8, false);
  lost[0] = lost[3] = lost[5] = true;  // three erasures, two repair symbols
  auto got = deliver(dec, b, 10, lost, rng);
  for (auto& g : got) EXPECT_TRUE(g.empty());
  EXPECT_EQ(dec.stats().recovered, 0u);
  EXPECT_EQ(dec.stats().unrecoverable, 0u);  // still waiting (a late symbol could come)
  // Block 12 takes block 10's slot (2 slots): 10 is given up and counted.
  const Block c = make_block(enc, rng, 2, 1);
  EXPECT_EQ(dec.add_source(12, 0, c.sources[0].data(), c.sources[0].size()), Status::kStored);
  EXPECT_EQ(dec.stats().unrecoverable, 1u);
  // Block 10 is now older than the window.
  EXPECT_EQ(dec.add_source(10, 0, b.sources[0].data(), b.sources[0].size()), Status::kStale);
  EXPECT_EQ(dec.stats().stale, 1u);
}

TEST(BlockCode, BadAndForgedInputIsRefusedAndCounted) {
  std::mt19937 rng(6);
  Encoder enc(64);
  Decoder dec(64, 4);
  std::vector<uint8_t> big(70, 1), ok(10, 2);
  EXPECT_FALSE(enc.add(big.data(), big.size()));
  uint64_t invalid = 0;
  auto bad = [&](Status st) {
    EXPECT_EQ(st, Status::kInvalid);
    EXPECT_EQ(dec.stats().invalid, ++invalid);
  };
  bad(dec.add_source(1, -1, ok.data(), ok.size()));
  bad(dec.add_source(1, kMaxSources, ok.data(), ok.size()));
  bad(dec.add_source(1, 0, big.data(), big.size()));
  bad(dec.add_repair(RepairInfo{1, 0, 1, 0}, ok.data(), ok.size()));
  bad(dec.add_repair(RepairInfo{1, kMaxSources + 1, 1, 0}, ok.data(), ok.size()));
  bad(dec.add_repair(RepairInfo{1, 4, 0, 0}, ok.data(), ok.size()));
  bad(dec.add_repair(RepairInfo{1, 4, kMaxRepair + 1, 0}, ok.data(), ok.size()));
  bad(dec.add_repair(RepairInfo{1, 4, 2, 2}, ok.data(), ok.size()));
  bad(dec.add_repair(RepairInfo{1, 4, 2, 0}, ok.data(), 1));
  bad(dec.add_repair(RepairInfo{1, 4, 2, 0}, big.data(), 64 + kLengthPrefix + 1));
  // A source held at index 5 cannot belong to a block of 4.
  EXPECT_EQ(dec.add_source(2, 5, ok.data(), ok.size()), Status::kStored);
  bad(dec.add_repair(RepairInfo{2, 4, 2, 0}, ok.data(), ok.size() + kLengthPrefix));
  // A source longer than the block's repair symbols cannot belong to it.
  EXPECT_EQ(dec.add_source(3, 0, ok.data(), ok.size()), Status::kStored);
  bad(dec.add_repair(RepairInfo{3, 4, 2, 0}, ok.data(), 5));
  // Repair symbols that disagree on the block's shape.
  EXPECT_EQ(dec.add_repair(RepairInfo{4, 4, 2, 0}, ok.data(), 8), Status::kStored);
  bad(dec.add_repair(RepairInfo{4, 5, 2, 1}, ok.data(), 8));
  bad(dec.add_repair(RepairInfo{4, 4, 3, 1}, ok.data(), 8));
  bad(dec.add_repair(RepairInfo{4, 4, 2, 1}, ok.data(), 9));
  bad(dec.add_source(4, 4, ok.data(), ok.size()));
}

TEST(BlockCode, ForgedRepairBytesNeverYieldAnOversizedPayload) {
  // Random repair bytes for a block whose sources are lost: whatever the
  // decode yields is either refused (a length beyond the symbol) or a payload
  // within the symbol; nothing reads or writes out of bounds (ASan in CI).
  std::mt19937 rng(7);
  Decoder dec(256, 4);
  uint32_t id = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    const int k = std::uniform_int_distribution<int>(1, kMaxSources)(rng);
    const int m = std::uniform_int_distribution<int>(1, kMaxRepair)(rng);
    const size_t len = std::uniform_int_distribution<size_t>(2, 258)(rng);
    const int have = std::uniform_int_distribution<int>(0, k)(rng);
    ++id;
    for (int i = 0; i < have; ++i) {
      auto p = payload(rng, std::uniform_int_distribution<size_t>(0, len - 2)(rng));
      dec.add_source(id, i, p.data(), p.size());
    }
    for (int j = 0; j < m; ++j) {
      auto r = payload(rng, len);
      const Status st = dec.add_repair(RepairInfo{id, k, m, j}, r.data(), r.size());
      if (st == Status::kRecovered) {
        for (int i = 0; i < dec.recovered_count(); ++i) {
          EXPECT_LE(dec.recovered(i).payload.size() + kLengthPrefix, len);
          EXPECT_GE(dec.recovered(i).index, have);
        }
      }
    }
  }
}

}  // namespace
}  // namespace rowan::fec
