// af_packet_ring.h: slot geometry for jumbo frames on net_af_packet.
#include "io/af_packet_ring.h"

#include <gtest/gtest.h>

namespace rowan::io {
namespace {

TEST(AfPacketRingTest, DefaultSlotsHoldAStandardFrame) {
  const AfPacketRing r = af_packet_ring(1518);
  EXPECT_EQ(r.framesz, 0U);
  EXPECT_EQ(r.blocksz, 0U);
  uint32_t room = 2048;
  EXPECT_EQ(af_packet_device("net_af_packet0,iface=lan0", 1518, &room),
            "net_af_packet0,iface=lan0");
  EXPECT_EQ(room, 2048U);
}

TEST(AfPacketRingTest, JumboSlotsTileWholePages) {
  for (const uint32_t frame : {2000U, 4218U, 4418U, 9018U, 9216U, 16000U}) {
    const AfPacketRing r = af_packet_ring(frame);
    ASSERT_GT(r.framesz, 0U) << frame;
    EXPECT_GE(r.framesz, frame + 66) << "the kernel's header and the frame fit in a slot";
    EXPECT_EQ(r.framesz % 16, 0U) << "TPACKET_ALIGNMENT";
    EXPECT_EQ(r.blocksz % 4096, 0U) << "a block is whole pages";
    EXPECT_EQ(r.blocksz % r.framesz, 0U) << "slots are one array across blocks";
    const uint32_t per_block = r.blocksz / r.framesz;
    EXPECT_LE(per_block, 16U);
    EXPECT_EQ(512 % per_block, 0U) << "the PMD's default framecnt fills whole blocks";
    EXPECT_GE(r.data_room + 32, r.framesz) << "the PMD's own check";
  }
  const AfPacketRing r = af_packet_ring(4218);  // rowand's default [local] mtu 4200
  EXPECT_EQ(r.framesz, 4352U);
  EXPECT_EQ(r.blocksz, 69632U);
}

TEST(AfPacketRingTest, DeviceStringGetsTheGeometryOnce) {
  uint32_t room = 4218;
  EXPECT_EQ(af_packet_device("net_af_packet0,iface=lan0", 4218, &room),
            "net_af_packet0,iface=lan0,framesz=4352,blocksz=69632");
  EXPECT_EQ(room, 4320U);
  // The operator's own geometry and other PMDs are left alone.
  room = 4218;
  EXPECT_EQ(af_packet_device("net_af_packet0,iface=lan0,framesz=8192,blocksz=8192", 4218, &room),
            "net_af_packet0,iface=lan0,framesz=8192,blocksz=8192");
  EXPECT_EQ(room, 4218U);
  EXPECT_EQ(af_packet_device("net_memif0,role=client", 9018, &room), "net_memif0,role=client");
  EXPECT_EQ(af_packet_device("net_tap0,iface=t0", 9018, nullptr), "net_tap0,iface=t0");
  EXPECT_EQ(room, 4218U);
}

}  // namespace
}  // namespace rowan::io
