#!/usr/bin/python3
"""Malformed frames at a DPDK WAN port (tests/integration/wan_dpdk_test.cc).

Run inside rowan-a-gw: sends COUNT frames of each kind out of wan0 toward
gateway B's WAN port (its MAC given), through the emulated WAN. Each kind is
one drop reason of daemon/rowand/datapath/dpdk_wan_io.h:
  bad_ip_checksum   IPv4 header checksum wrong
  bad_udp_checksum  UDP checksum wrong
  wrong_port        UDP to another port
  wrong_source      from 198.19.0.77 (not the peer)
  not_udp           IPv4 protocol 6
  unsupported_l2    an IPv6 ethertype to B's MAC
  runt              IPv4 total length longer than the frame
Prints a JSON object: kind -> frames sent. (No fragments: the net_af_packet
vdev's socket has PACKET_FANOUT_FLAG_DEFRAG, so the kernel reassembles them.)
"""
import json
import sys

from scapy.all import IP, UDP, Ether, Raw, conf, sendp  # noqa: E402

conf.verb = 0
A, B, PORT = "198.19.0.1", "198.19.0.2", 47910


def main():
    bmac = sys.argv[1]
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    amac = open("/sys/class/net/wan0/address").read().strip()
    eth = Ether(src=amac, dst=bmac)
    good = IP(src=A, dst=B) / UDP(sport=PORT, dport=PORT) / Raw(b"\x01" * 64)
    kinds = {
        "bad_ip_checksum": eth / IP(src=A, dst=B, chksum=0x1234) / UDP(sport=PORT, dport=PORT) / Raw(b"x" * 64),
        "bad_udp_checksum": eth / IP(src=A, dst=B) / UDP(sport=PORT, dport=PORT, chksum=0x1234) / Raw(b"x" * 64),
        "wrong_port": eth / IP(src=A, dst=B) / UDP(sport=PORT, dport=PORT + 1) / Raw(b"x" * 64),
        "wrong_source": eth / IP(src="198.19.0.77", dst=B) / UDP(sport=PORT, dport=PORT) / Raw(b"x" * 64),
        "not_udp": eth / IP(src=A, dst=B, proto=6) / Raw(b"x" * 64),
        "unsupported_l2": Ether(src=amac, dst=bmac, type=0x86DD) / Raw(bytes(good)),
    }
    runt = bytearray(bytes(eth / good))
    runt[14 + 2:14 + 4] = (1400).to_bytes(2, "big")  # total length past the frame's end
    frames = {k: bytes(v) for k, v in kinds.items()}
    frames["runt"] = bytes(runt)
    sent = {}
    for kind, frame in frames.items():
        sendp([Raw(frame)] * count, iface="wan0")
        sent[kind] = count
    print(json.dumps(sent))


if __name__ == "__main__":
    main()
