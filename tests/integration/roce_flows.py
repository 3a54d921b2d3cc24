#!/usr/bin/python3
"""Crafted RoCEv2 flows for the gateway integration tests (scapy plays the RNICs).

  roce_flows.py send --iface IF --src IP --dst IP --gw-mac MAC [--qps N] [--count N]
                     [--size BYTES] [--pps N]
      Sends, per QP, COUNT RC packets alternating SEND_ONLY and RDMA_WRITE_ONLY,
      PSNs consecutive from a per-QP start (wrapping 2^24), each payload carrying
      (qp, index) and a SHA-256 digest of the rest, with a correct ICRC.
  roce_flows.py recv --iface IF --out PCAP --count N --timeout S
      Captures RoCEv2 (UDP 4791) frames arriving on IF.
  roce_flows.py verify PCAP --qps N --count N
      Checks that every packet of every QP arrived exactly once, in PSN order,
      with an intact payload. Prints a JSON summary; exit 1 on any violation.

ICRCs are checked separately with `rowanctl decode` on the same capture.
Run with /usr/bin/python3 (Debian's python3-scapy).
"""
import argparse
import hashlib
import json
import struct
import sys
import time
import zlib

from scapy.all import IP, IPv6, UDP, Ether, Raw, conf, rdpcap, sniff, wrpcap  # noqa: E402
from scapy.contrib.roce import BTH  # noqa: E402

SEND_ONLY = 0x04
WRITE_ONLY = 0x0A
QP_BASE = 0x100
PSN_START = 0xFFFFF0  # so every flow wraps the 24-bit PSN space


def payload(qp, i, size):
    body = struct.pack("!II", qp, i) + bytes((qp * 31 + i * 7 + k) & 0xFF for k in range(size - 40))
    return body + hashlib.sha256(body).digest()


def frames(args):
    out = []
    for i in range(args.count):
        for q in range(args.qps):
            qp = QP_BASE + q
            psn = (PSN_START + i) & 0xFFFFFF
            op = SEND_ONLY if i % 2 == 0 else WRITE_ONLY
            data = payload(qp, i, args.size)
            ext = b""
            if op == WRITE_ONLY:
                ext = struct.pack("!QII", 0x7F0000000000 + i * args.size, 0x1234, len(data))
            pad = (-len(data)) % 4
            l3 = IPv6(src=args.src, dst=args.dst) if ":" in args.src else \
                IP(src=args.src, dst=args.dst, tos=0x02, flags="DF")
            pkt = Ether(dst=args.gw_mac) / l3 / UDP(sport=49152 + q, dport=4791) / \
                BTH(opcode=op, padcount=pad, dqpn=qp, psn=psn, ackreq=1) / Raw(ext + data + bytes(pad))
            raw = bytes(pkt)
            if ":" in args.src:
                raw = fix_ipv6(raw)
            out.append(Ether(raw))
    return out


def fix_ipv6(frame):
    """scapy leaves the ICRC of RoCEv2 over IPv6 zero: compute it (masked IPv6,
    UDP and BTH headers behind 8 bytes of ones, as lib/src/codec does), then
    the UDP checksum, which covers the ICRC."""
    f = bytearray(frame)
    ip, udp, bth = 14, 54, 62
    hdr = bytearray(b"\xff" * 8) + f[ip:ip + 40] + f[udp:udp + 8] + f[bth:bth + 12]
    hdr[8] |= 0x0F
    hdr[9:12] = b"\xff\xff\xff"
    hdr[15] = 0xFF  # hop limit
    hdr[48 + 6:48 + 8] = b"\xff\xff"  # UDP checksum
    hdr[56 + 4] = 0xFF  # BTH FECN/BECN/reserved
    crc = zlib.crc32(bytes(f[bth + 12:-4]), zlib.crc32(bytes(hdr))) & 0xFFFFFFFF
    f[-4:] = struct.pack("<I", crc)
    ulen = len(f) - udp
    f[udp + 6:udp + 8] = b"\0\0"
    data = bytes(f[ip + 8:ip + 40]) + struct.pack("!IxxxB", ulen, 17) + bytes(f[udp:])
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    c = ~total & 0xFFFF
    f[udp + 6:udp + 8] = struct.pack("!H", c or 0xFFFF)
    return bytes(f)


def cmd_send(args):
    conf.verb = 0
    pkts = frames(args)
    gap = 1.0 / args.pps if args.pps > 0 else 0
    sock = conf.L2socket(iface=args.iface)
    start = time.time()
    for n, p in enumerate(pkts):
        sock.send(p)
        if gap:
            delay = start + (n + 1) * gap - time.time()
            if delay > 0:
                time.sleep(delay)
    sock.close()
    print(json.dumps({"sent": len(pkts)}))
    return 0


def cmd_recv(args):
    conf.verb = 0
    pkts = sniff(iface=args.iface, filter="udp port 4791", count=args.count, timeout=args.timeout)
    wrpcap(args.out, pkts)
    print(json.dumps({"captured": len(pkts)}))
    return 0


def cmd_verify(args):
    got = {}
    bad = []
    for p in rdpcap(args.pcap):
        if BTH not in p:
            continue
        bth = p[BTH]
        body = bytes(bth.payload)  # scapy keeps the ICRC in BTH's trailing FCS field
        if len(body) < 48:
            bad.append("short frame")
            continue
        if bth.padcount:
            body = body[:-bth.padcount]
        if bth.opcode == WRITE_ONLY:
            body = body[16:]
        data, digest = body[:-32], body[-32:]
        if hashlib.sha256(data).digest() != digest:
            bad.append("payload digest mismatch on qp %#x psn %d" % (bth.dqpn, bth.psn))
            continue
        qp, i = struct.unpack("!II", data[:8])
        if qp != bth.dqpn or (PSN_START + i) & 0xFFFFFF != bth.psn:
            bad.append("header/payload disagree on qp %#x psn %d" % (bth.dqpn, bth.psn))
        got.setdefault(qp, []).append(i)
    summary = {"qps": len(got), "packets": sum(len(v) for v in got.values()), "errors": bad[:10]}
    for q in range(args.qps):
        seq = got.get(QP_BASE + q, [])
        if seq != list(range(args.count)):
            missing = sorted(set(range(args.count)) - set(seq))
            ordered = all(a < b for a, b in zip(seq, seq[1:]))
            bad.append("qp %#x: %d of %d, %d missing, %s" % (QP_BASE + q, len(seq), args.count,
                                                            len(missing),
                                                            "in order" if ordered else "OUT OF ORDER"))
    summary["errors"] = bad[:10]
    summary["ok"] = not bad
    print(json.dumps(summary))
    return 0 if not bad else 1


def send_parser(sub):
    """The `send` subcommand with what every frame sender needs (vlan_frames.py too)."""
    s = sub.add_parser("send")
    s.add_argument("--iface", required=True)
    s.add_argument("--src", required=True)
    s.add_argument("--dst", required=True)
    s.add_argument("--gw-mac", required=True)
    return s


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = send_parser(sub)
    s.add_argument("--qps", type=int, default=2)
    s.add_argument("--count", type=int, default=100)
    s.add_argument("--size", type=int, default=1024)
    s.add_argument("--pps", type=int, default=500)
    r = sub.add_parser("recv")
    r.add_argument("--iface", required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--count", type=int, required=True)
    r.add_argument("--timeout", type=float, default=30)
    v = sub.add_parser("verify")
    v.add_argument("pcap")
    v.add_argument("--qps", type=int, default=2)
    v.add_argument("--count", type=int, default=100)
    args = ap.parse_args()
    return {"send": cmd_send, "recv": cmd_recv, "verify": cmd_verify}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
