#!/usr/bin/python3
"""Checks the class of the RoCEv2 frames a site's gateway delivered to its
soft-RoCE guest on VLAN 100 (InteropTest.VlanGuestsKeepTheirPcpAndDscp).

  vlan_check.py PCAP --from IP --vlan VID --request-pcp P --ack-pcp Q[,Q2] --dscp D
                [--cnp-pcp C --cnp-dscp E] [--min-requests N] [--min-acks N]
                [--want-ack-pcp Q] [--min-cnps N]

PCAP was taken on the site host namespace's side of the gateway link. Every
RoCEv2 frame from IP (the other site's host, as the gateway sends it) must be
802.1Q-tagged with VID; requests (any opcode but ACK and CNP) with PCP P, ACKs
with one of the PCPs Q (and at least one with --want-ack-pcp's), both with
DSCP D; CNPs with PCP C and DSCP E. Prints a JSON summary; exit 1 on a
violation or when fewer frames than asked for arrived.

Run with /usr/bin/python3 (Debian's python3-scapy).
"""
import argparse
import json
import sys

from scapy.all import IP, UDP, Dot1Q, rdpcap  # noqa: E402

ACK = 0x11
CNP = 0x81


def main():
    p = argparse.ArgumentParser()
    p.add_argument("pcap")
    p.add_argument("--from", dest="src", required=True)
    p.add_argument("--vlan", type=int, required=True)
    p.add_argument("--request-pcp", type=int, required=True)
    p.add_argument("--ack-pcp", required=True, help="comma list")
    p.add_argument("--want-ack-pcp", type=int)
    p.add_argument("--dscp", type=int, required=True)
    p.add_argument("--cnp-pcp", type=int, default=6)
    p.add_argument("--cnp-dscp", type=int, default=48)
    p.add_argument("--min-requests", type=int, default=0)
    p.add_argument("--min-acks", type=int, default=0)
    p.add_argument("--min-cnps", type=int, default=0)
    a = p.parse_args()
    ack_pcps = {int(x) for x in a.ack_pcp.split(",")}

    counts = {"requests": 0, "acks": 0, "cnps": 0, "untagged": 0, "wrong_vid": 0,
              "wrong_pcp": 0, "wrong_dscp": 0}
    seen = {"request": set(), "ack": set(), "cnp": set()}
    for f in rdpcap(a.pcap):
        if IP not in f or UDP not in f or f[UDP].dport != 4791 or f[IP].src != a.src:
            continue
        payload = bytes(f[UDP].payload)
        if not payload:
            continue
        opcode = payload[0]
        kind = "ack" if opcode == ACK else "cnp" if opcode == CNP else "request"
        counts[kind + "s"] += 1
        dscp = f[IP].tos >> 2
        if Dot1Q not in f:
            counts["untagged"] += 1
            seen[kind].add((None, None, dscp))
            continue
        tag = f[Dot1Q]
        seen[kind].add((tag.prio, tag.vlan, dscp))
        want_pcps = {"request": {a.request_pcp}, "ack": ack_pcps, "cnp": {a.cnp_pcp}}[kind]
        want_dscp = a.cnp_dscp if kind == "cnp" else a.dscp
        counts["wrong_vid"] += tag.vlan != a.vlan
        counts["wrong_pcp"] += tag.prio not in want_pcps
        counts["wrong_dscp"] += dscp != want_dscp
    ok = (counts["untagged"] == counts["wrong_vid"] == counts["wrong_pcp"] ==
          counts["wrong_dscp"] == 0 and counts["requests"] >= a.min_requests and
          counts["acks"] >= a.min_acks and counts["cnps"] >= a.min_cnps and
          (a.want_ack_pcp is None or any(c[0] == a.want_ack_pcp for c in seen["ack"])))
    # (pcp, vid, dscp) seen per kind, for the test's message.
    classes = {k: sorted([list(x) for x in v], key=str) for k, v in seen.items()}
    print(json.dumps({"ok": ok, **counts, "classes": classes}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
