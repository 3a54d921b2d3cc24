#!/usr/bin/python3
"""802.1Q-tagged, DSCP-marked RoCEv2 frames for the VLAN integration test
(scapy plays a PFC fabric's RNIC).

  vlan_frames.py send --iface IF --src IP --dst IP --gw-mac MAC --count N
                      --vlan VID --pcp P --dscp D [--untagged N] [--bad]
      Sends COUNT RC SEND_ONLY frames tagged (VID, PCP) with DSCP D and ECT(0),
      then UNTAGGED more of them without a tag (same DSCP), each payload
      carrying its index and a SHA-256 digest, with a correct ICRC. --bad
      adds one frame with two 802.1Q tags, one with an 802.1ad (QinQ) service
      tag outside an 802.1Q one. (A tag cut short never crosses a veth: the
      kernel drops it on receive, so only the unit tests send one.)
  vlan_frames.py verify PCAP --count N --vlan VID --pcp P --dscp D [--untagged N]
      Checks that the capture holds COUNT tagged frames with exactly that VID
      and PCP and UNTAGGED untagged ones, every one with DSCP D and ECT(0),
      each index once, payload intact. Prints a JSON summary; exit 1 on a
      violation.

Run with /usr/bin/python3 (Debian's python3-scapy).
"""
import argparse
import hashlib
import json
import struct
import sys

from scapy.all import IP, UDP, Dot1AD, Dot1Q, Ether, Raw, rdpcap, sendp  # noqa: E402
from scapy.contrib.roce import BTH  # noqa: E402

from roce_flows import send_parser  # noqa: E402 (next to this file)

SEND_ONLY = 0x04
QP = 0x1A0
PSN_START = 0x10
SPORT = 0xC0DE


def payload(i):
    body = struct.pack("!I", i) + bytes((i * 13 + k) & 0xFF for k in range(60))
    return body + hashlib.sha256(body).digest()


def roce(args, i):
    data = payload(i)
    ip = IP(src=args.src, dst=args.dst, tos=(args.dscp << 2) | 2, flags="DF")
    return ip / UDP(sport=SPORT, dport=4791) / \
        BTH(opcode=SEND_ONLY, dqpn=QP, psn=(PSN_START + i) & 0xFFFFFF, ackreq=1) / Raw(data)


def cmd_send(args):
    frames = []
    n = 0
    for _ in range(args.count):
        frames.append(Ether(dst=args.gw_mac) / Dot1Q(prio=args.pcp, vlan=args.vlan) / roce(args, n))
        n += 1
    for _ in range(args.untagged):
        frames.append(Ether(dst=args.gw_mac) / roce(args, n))
        n += 1
    if args.bad:
        frames.append(Ether(dst=args.gw_mac) / Dot1Q(vlan=args.vlan) / Dot1Q(vlan=7) / roce(args, n))
        frames.append(Ether(dst=args.gw_mac) / Dot1AD(vlan=9) / Dot1Q(vlan=args.vlan) /
                      roce(args, n + 1))
    sendp(frames, iface=args.iface, verbose=False, inter=0.002)
    print(json.dumps({"sent": len(frames)}))


def cmd_verify(args):
    seen = {}
    problems = []
    for p in rdpcap(args.pcap):
        if BTH not in p or p[BTH].dqpn != QP:
            continue
        raw = bytes(p[BTH].payload)  # scapy takes the ICRC off
        if len(raw) < 36 + 4:
            problems.append("short payload")
            continue
        body, digest = raw[:-32], raw[-32:]
        (i,) = struct.unpack("!I", body[:4])
        if hashlib.sha256(body).digest() != digest:
            problems.append(f"frame {i}: payload corrupted")
        tags = []
        layer = p.getlayer(Dot1Q)
        while layer is not None:
            tags.append((layer.prio, layer.vlan))
            layer = layer.payload.getlayer(Dot1Q) if layer.payload is not None else None
        tos = p[IP].tos
        if tos >> 2 != args.dscp or tos & 3 != 2:
            problems.append(f"frame {i}: TOS {tos:#x}, want DSCP {args.dscp} ECT(0)")
        want_tag = [(args.pcp, args.vlan)] if i < args.count else []
        if tags != want_tag:
            problems.append(f"frame {i}: tags {tags}, want {want_tag}")
        seen[i] = seen.get(i, 0) + 1
    total = args.count + args.untagged
    missing = [i for i in range(total) if i not in seen]
    twice = [i for i, c in seen.items() if c > 1]
    if missing:
        problems.append(f"missing {len(missing)}: {missing[:10]}")
    if twice:
        problems.append(f"duplicated: {twice[:10]}")
    extra = [i for i in seen if i >= total]
    if extra:
        problems.append(f"frames that should have been dropped arrived: {extra}")
    print(json.dumps({"frames": sum(seen.values()), "tagged": sum(
        1 for i in seen if i < args.count), "problems": problems[:20]}))
    return 1 if problems else 0


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = send_parser(sub)
    s.add_argument("--bad", action="store_true")
    v = sub.add_parser("verify")
    v.add_argument("pcap")
    for p in (s, v):
        p.add_argument("--count", type=int, required=True)
        p.add_argument("--untagged", type=int, default=0)
        p.add_argument("--vlan", type=int, required=True)
        p.add_argument("--pcp", type=int, required=True)
        p.add_argument("--dscp", type=int, required=True)
    args = ap.parse_args()
    if args.cmd == "send":
        cmd_send(args)
        return 0
    return cmd_verify(args)


if __name__ == "__main__":
    sys.exit(main())
