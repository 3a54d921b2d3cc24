#!/usr/bin/python3
"""Attacks on a gateway's WAN port, run inside rowan-a-gw (tests/integration/faults_test.cc).

Sniffs data datagrams gateway A sends to B, then sends to B, with A's address
and port as source (an on-path attacker spoofing the peer, which is what gets
past the UDP socket's source check to the decryption layer):
  replay    the captured datagrams unchanged             -> B: replay or stale
  forged    captured header, fresh counter, random bytes  -> B: bad_auth
  forged_init  random 120-byte initiations                -> B: bad_auth
  truncated 1..31-byte data datagrams                      -> B: truncated
  oversize  200-byte "initiations"                         -> B: oversize
Prints a JSON object with how many of each were sent.
"""
import json
import os
import struct
import sys

from scapy.all import IP, UDP, Raw, conf, send, sniff  # noqa: E402

conf.verb = 0
A, B, PORT = "198.19.0.1", "198.19.0.2", 47910


def out(payload):
    send(IP(src=A, dst=B) / UDP(sport=PORT, dport=PORT) / Raw(payload), iface="wan0")


def main():
    want = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    pkts = sniff(iface="wan0", timeout=20, count=want,
                 lfilter=lambda p: p.haslayer(UDP) and p[IP].src == A and p[IP].dst == B
                 and p[UDP].dport == PORT and bytes(p[UDP].payload)[:1] == b"\x04")
    captured = [bytes(p[UDP].payload) for p in pkts]
    sent = {"captured": len(captured)}
    for c in captured:
        out(c)
    sent["replay"] = len(captured)
    for i, c in enumerate(captured):
        out(c[:8] + struct.pack(">Q", (1 << 40) + i) + os.urandom(max(len(c) - 16, 16)))
    sent["forged"] = len(captured)
    for _ in range(5):
        out(b"\x01\x00\x00\x00" + os.urandom(116))
    sent["forged_init"] = 5
    n = 0
    for ln in (1, 2, 3, 5, 8, 13, 21, 31):
        out(b"\x04" + os.urandom(ln - 1))
        n += 1
    sent["truncated"] = n
    for _ in range(6):
        out(b"\x01\x00\x00\x00" + os.urandom(196))
    sent["oversize"] = 6
    print(json.dumps(sent))


if __name__ == "__main__":
    main()
