// The chunk pool behind the send and receive buffers.
#include "transport/chunk_buffer.h"

#include <gtest/gtest.h>

#include <vector>

namespace rowan::transport {
namespace {

TEST(ChunkPool, RingAllocatesOnlyWhatItCoversAndReleases) {
  ChunkPool pool(1024, 8, true);
  ChunkRing ring;
  EXPECT_EQ(ring.ensure(pool, 0, 3000), 3000U);
  EXPECT_EQ(pool.available(), 5U);
  std::vector<uint8_t> in(3000), out(3000);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<uint8_t>(i * 7);
  ring.write(pool, 0, in.data(), in.size());
  ring.read(pool, 0, out.data(), out.size());
  EXPECT_EQ(in, out);
  ring.release_below(pool, 2048);
  EXPECT_EQ(pool.available(), 7U);
  // A sparse write far ahead takes only the chunks it touches.
  EXPECT_EQ(ring.ensure(pool, 6000, 6100), 6100U);
  EXPECT_EQ(pool.available(), 6U);
  // The pool is the bound: asking for more stops at what it holds.
  EXPECT_LT(ring.ensure(pool, 3000, 100000), 100000U);
  EXPECT_EQ(pool.available(), 0U);
  ring.release_all(pool);
  EXPECT_EQ(pool.available(), 8U);
}

}  // namespace
}  // namespace rowan::transport
