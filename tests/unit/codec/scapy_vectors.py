#!/usr/bin/python3
"""Independent RoCEv2 ICRC reference: scapy's scapy.contrib.roce.

  scapy_vectors.py generate OUT.pcap OUT.json [--count N] [--seed S]
      Writes N random RoCEv2/IPv4 frames (every RC/UC/UD/CNP opcode, random
      header fields, payload sizes and pads) whose ICRC scapy computed, and the
      expected decoded fields as JSON.
  scapy_vectors.py verify IN.pcap
      Recomputes with scapy the ICRC of every frame rowan built and prints
      "N frames, M icrc ok"; exits 1 on any mismatch.

scapy computes the ICRC for IPv4 only; IPv6 is checked against rxe captures.
Run with /usr/bin/python3 (Debian's python3-scapy).
"""
import json
import random
import struct
import sys

from scapy.all import IP, UDP, Ether, Raw, Dot1Q, rdpcap, wrpcap  # noqa: E402
from scapy.contrib.roce import BTH  # noqa: E402

# Extended header bytes per opcode, in wire order (IBA vol. 1 ch. 9).
EXT = {}
for base in (0x00, 0x20):
    EXT.update({base + 0: 0, base + 1: 0, base + 2: 0, base + 3: 4, base + 4: 0, base + 5: 4,
                base + 6: 16, base + 7: 0, base + 8: 0, base + 9: 4, base + 10: 16,
                base + 11: 20})
EXT.update({0x0c: 16, 0x0d: 4, 0x0e: 0, 0x0f: 4, 0x10: 4, 0x11: 4, 0x12: 12, 0x13: 28,
            0x14: 28, 0x16: 4, 0x17: 4, 0x64: 8, 0x65: 12, 0x81: 0})
NO_PAYLOAD = {0x0c, 0x11, 0x12, 0x13, 0x14}
FULL_PMTU = {0x00, 0x01, 0x06, 0x07, 0x0d, 0x0e, 0x20, 0x21, 0x26, 0x27}


def generate(pcap, out_json, count, seed):
    rng = random.Random(seed)
    frames, expected = [], []
    opcodes = sorted(EXT)
    for i in range(count):
        opc = opcodes[i % len(opcodes)]
        if opc == 0x81:
            data = bytes(16)
        elif opc in NO_PAYLOAD:
            data = b""
        elif opc in FULL_PMTU:
            data = bytes(rng.getrandbits(8) for _ in range(256))
        else:
            data = bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 300)))
        pad = 0 if opc == 0x81 else (-len(data)) % 4
        ext = bytes(rng.getrandbits(8) for _ in range(EXT[opc]))
        bth = BTH(opcode=opc, solicited=rng.randint(0, 1), padcount=pad,
                  pkey=rng.choice([0xffff, 0x8001]), fecn=rng.randint(0, 1),
                  becn=rng.randint(0, 1), dqpn=rng.getrandbits(24),
                  ackreq=rng.randint(0, 1), psn=rng.getrandbits(24))
        ip = IP(src="198.18.1.%d" % rng.randint(1, 254), dst="198.18.2.%d" % rng.randint(1, 254),
                tos=rng.getrandbits(8), ttl=rng.randint(1, 255), flags="DF")
        l2 = Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")
        if rng.random() < 0.2:
            l2 = l2 / Dot1Q(vlan=rng.randint(1, 4094))
        pkt = l2 / ip / UDP(sport=rng.randint(49152, 65535), dport=4791) / bth / \
            Raw(ext + data + bytes(pad))
        raw = bytes(pkt)
        icrc = struct.unpack(">I", raw[-4:])[0]  # wire order, as Wireshark shows it
        frames.append(Ether(raw))
        expected.append({"opcode": opc, "dest_qp": bth.dqpn, "psn": bth.psn,
                         "ack_req": bool(bth.ackreq), "se": bool(bth.solicited),
                         "fecn": bool(bth.fecn), "becn": bool(bth.becn), "pad": pad,
                         "payload_len": len(data), "icrc": "0x%08x" % icrc,
                         "src": ip.src, "dst": ip.dst})
    wrpcap(pcap, frames)
    with open(out_json, "w") as f:
        json.dump(expected, f)


def verify(pcap):
    n = ok = 0
    for pkt in rdpcap(pcap):
        if BTH not in pkt or IP not in pkt:
            continue
        n += 1
        raw = bytes(pkt)
        wire = raw[-4:]
        rebuilt = Ether(raw)
        rebuilt[BTH].icrc = None
        again = bytes(rebuilt)[-4:]
        if again == wire:
            ok += 1
        else:
            print("frame %d: wire %s scapy %s" % (n, wire.hex(), again.hex()))
    print("%d frames, %d icrc ok" % (n, ok))
    return 0 if n > 0 and n == ok else 1


def main():
    if len(sys.argv) >= 4 and sys.argv[1] == "generate":
        count, seed = 400, 1
        args = sys.argv[4:]
        if "--count" in args:
            count = int(args[args.index("--count") + 1])
        if "--seed" in args:
            seed = int(args[args.index("--seed") + 1])
        generate(sys.argv[2], sys.argv[3], count, seed)
        return 0
    if len(sys.argv) == 3 and sys.argv[1] == "verify":
        return verify(sys.argv[2])
    print(__doc__, file=sys.stderr)
    return 64


if __name__ == "__main__":
    sys.exit(main())
