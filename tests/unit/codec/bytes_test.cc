#include "codec/bytes.h"

#include <gtest/gtest.h>

namespace rowan::wire {
namespace {

TEST(Bytes, BigEndianIsNetworkOrder) {
  uint8_t b[8] = {};
  store_be16(b, 0x0102);
  EXPECT_EQ(b[0], 0x01);
  EXPECT_EQ(b[1], 0x02);
  store_be32(b, 0x01020304);
  EXPECT_EQ(b[0], 0x01);
  EXPECT_EQ(b[3], 0x04);
  EXPECT_EQ(load_be32(b), 0x01020304u);
  store_be64(b, 0x0102030405060708ull);
  EXPECT_EQ(b[7], 0x08);
  EXPECT_EQ(load_be64(b), 0x0102030405060708ull);
  store_be24(b, 0x0a0b0c);
  EXPECT_EQ(load_be24(b), 0x0a0b0cu);
}

TEST(Bytes, LittleEndianLowByteFirst) {
  uint8_t b[9] = {};
  store_le16(b, 0x0102);
  EXPECT_EQ(b[0], 0x02);
  EXPECT_EQ(load_le16(b), 0x0102);
  store_le32(b + 1, 0x01020304);  // unaligned
  EXPECT_EQ(b[1], 0x04);
  EXPECT_EQ(b[4], 0x01);
  EXPECT_EQ(load_le32(b + 1), 0x01020304u);
  store_le64(b + 1, 0x0102030405060708ull);
  EXPECT_EQ(b[1], 0x08);
  EXPECT_EQ(b[8], 0x01);
  EXPECT_EQ(load_le64(b + 1), 0x0102030405060708ull);
}

}  // namespace
}  // namespace rowan::wire
