#!/usr/bin/python3
"""Crafted RC flows for the split-mode integration test (scapy plays both RNICs).

  split_flows.py responder --iface IF --me IP --peer IP --gw-mac MAC --qp N --out JSON
                           [--expect N] [--timeout S] [--first-psn P] [--ready FILE]
      Plays the RC responder on one site: accepts requests to QP N in PSN order,
      answers each in-sequence request that asks for it (AckReq) with an ACK
      carrying its MSN (messages completed), an out-of-sequence PSN with one
      NAK-sequence-error per episode, a duplicate with the current ACK. Writes
      a JSON summary (requests received, accepted in order, payload check,
      ACKs sent) to OUT when EXPECT packets were accepted or at the timeout.
  split_flows.py requester --iface IF --me IP --peer IP --gw-mac MAC --qp N --peer-qp M
                           [--messages N] [--packets-per-message K] [--size B] [--window W]
      Plays the RC requester: one SEND_ONLY (PSN start) that the remote host
      acknowledges through the gateways, then MESSAGES RDMA WRITEs of K packets
      (AckReq on each last packet) with at most W packets unacknowledged,
      go-back-N on a NAK or after 300 ms without progress. Prints JSON: ACK
      latency per message, MSN errors, retransmissions.

Payload of packet i: (qp, i) and a SHA-256 digest of the rest, so the
responder can check every byte. Run with /usr/bin/python3 (python3-scapy).
"""
import argparse
import hashlib
import json
import struct
import sys
import threading
import time

from scapy.all import IP, UDP, Ether, Raw, conf, sniff  # noqa: E402
from scapy.contrib.roce import AETH, BTH  # noqa: E402

SEND_ONLY = 0x04
WRITE_FIRST, WRITE_MIDDLE, WRITE_LAST = 0x06, 0x07, 0x08
ACK = 0x11
PSN_START = 0xFFFFF8  # the flow wraps the 24-bit PSN space right after pairing
ENDS = {0x02, 0x03, 0x04, 0x05, 0x08, 0x09, 0x0A, 0x0B}


def payload(qp, i, size):
    body = struct.pack("!II", qp, i) + bytes((qp * 31 + i * 7 + k) & 0xFF for k in range(size - 40))
    return body + hashlib.sha256(body).digest()


def frame(args, opcode, qp, psn, ackreq, data=b"", ext=b"", syndrome=None, msn=0):
    pad = (-len(data)) % 4
    l3 = IP(src=args.me, dst=args.peer, flags="DF", tos=0x02)
    bth = BTH(opcode=opcode, padcount=pad, dqpn=qp, psn=psn & 0xFFFFFF, ackreq=int(ackreq))
    if syndrome is not None:
        pkt = Ether(dst=args.gw_mac) / l3 / UDP(sport=49200, dport=4791) / bth / \
            AETH(syndrome=syndrome, msn=msn)
    else:
        pkt = Ether(dst=args.gw_mac) / l3 / UDP(sport=49152, dport=4791) / bth / \
            Raw(ext + data + bytes(pad))
    return bytes(pkt)


def psn_diff(a, b):
    d = (a - b) & 0xFFFFFF
    return d - 0x1000000 if d > 0x800000 else d


# ---------------------------------------------------------------------------
# Responder

def cmd_responder(args):
    conf.verb = 0
    sock = conf.L2socket(iface=args.iface)
    st = {"expected": args.first_psn, "msn": 0, "received": 0, "accepted": 0, "duplicates": 0,
          "out_of_sequence": 0, "acks": 0, "naks": 0, "bad_payload": 0, "order_errors": 0,
          "nak_episode": False, "index": []}
    done = threading.Event()

    def handle(p):
        if BTH not in p or p[IP].dst != args.me:
            return
        bth = p[BTH]
        if bth.dqpn != args.qp or bth.opcode not in (SEND_ONLY, WRITE_FIRST, WRITE_MIDDLE,
                                                        WRITE_LAST, 0x0A):
            return
        st["received"] += 1
        d = psn_diff(bth.psn, st["expected"])
        requester_qp = args.peer_qp
        if d > 0:
            st["out_of_sequence"] += 1
            if not st["nak_episode"]:
                st["nak_episode"] = True
                st["naks"] += 1
                sock.send(frame(args, ACK, requester_qp, st["expected"], False, syndrome=0x60,
                                msn=st["msn"]))
            return
        if d < 0:
            st["duplicates"] += 1
            sock.send(frame(args, ACK, requester_qp, st["expected"] - 1, False, syndrome=0x1F,
                            msn=st["msn"]))
            st["acks"] += 1
            return
        st["nak_episode"] = False
        body = bytes(bth.payload)  # scapy keeps the ICRC in BTH's trailing field
        if bth.padcount:
            body = body[:-bth.padcount]
        if bth.opcode in (WRITE_FIRST, 0x0A):
            body = body[16:]
        if len(body) >= 40:
            data, digest = body[:-32], body[-32:]
            if hashlib.sha256(data).digest() != digest:
                st["bad_payload"] += 1
            else:
                qp, i = struct.unpack("!II", data[:8])
                if st["index"] and i != st["index"][-1] + 1:
                    st["order_errors"] += 1
                st["index"].append(i)
        st["expected"] = (st["expected"] + 1) & 0xFFFFFF
        st["accepted"] += 1
        if bth.opcode in ENDS:
            st["msn"] = (st["msn"] + 1) & 0xFFFFFF
        if bth.ackreq:
            sock.send(frame(args, ACK, requester_qp, bth.psn, False, syndrome=0x1F, msn=st["msn"]))
            st["acks"] += 1
        if args.expect and st["accepted"] >= args.expect:
            done.set()

    def ready():
        if args.ready:
            with open(args.ready, "w") as f:
                f.write("ready\n")

    sniff(iface=args.iface, filter="udp port 4791", prn=handle, timeout=args.timeout,
          started_callback=ready, stop_filter=lambda _: done.is_set())
    st["indices_in_order"] = st["index"] == list(range(len(st["index"])))
    st["payloads"] = len(st.pop("index"))
    st.pop("nak_episode")
    with open(args.out, "w") as f:
        json.dump(st, f)
    return 0


# ---------------------------------------------------------------------------
# Requester

def cmd_requester(args):
    conf.verb = 0
    sock = conf.L2socket(iface=args.iface)
    # The packet list: one SEND_ONLY, then the WRITE messages.
    pkts = []  # (psn, frame bytes, ends_message)
    psn = PSN_START
    pkts.append((psn, frame(args, SEND_ONLY, args.peer_qp, psn, True,
                            payload(args.qp, 0, args.size)), True))
    idx = 1
    k = args.packets_per_message
    for m in range(args.messages):
        for j in range(k):
            psn = (psn + 1) & 0xFFFFFF
            data = payload(args.qp, idx, args.size)
            idx += 1
            if k == 1:
                op, ext = 0x0A, struct.pack("!QII", 0x7F0000000000 + m * 65536, 0x1234, args.size)
            elif j == 0:
                op, ext = WRITE_FIRST, struct.pack("!QII", 0x7F0000000000 + m * 65536, 0x1234,
                                                   args.size * k)
            else:
                op, ext = (WRITE_LAST if j == k - 1 else WRITE_MIDDLE), b""
            last = j == k - 1
            pkts.append((psn, frame(args, op, args.peer_qp, psn, last, data, ext), last))
    n = len(pkts)
    # msn expected in an ACK for packet i: messages ended through i.
    msn_at = []
    c = 0
    for _, _, ends in pkts:
        c += ends
        msn_at.append(c)

    lock = threading.Lock()
    st = {"acked": -1, "nak_to": None, "acks": 0, "naks": 0, "msn_errors": [], "rnr": 0,
          "other": 0}
    sent_at = [None] * n
    acked_at = [None] * n

    def on_ack(p):
        if BTH not in p or p[BTH].opcode != ACK or p[BTH].dqpn != args.qp or AETH not in p:
            return
        now = float(p.time)  # the capture time: no Python scheduling delay
        b, a = p[BTH], p[AETH]
        i = psn_diff(b.psn, PSN_START)
        with lock:
            kind = a.syndrome >> 5
            if kind == 0:
                st["acks"] += 1
                if 0 <= i < n and msn_at[i] != a.msn:
                    st["msn_errors"].append([i, a.msn, msn_at[i]])
                for j in range(st["acked"] + 1, min(i, n - 1) + 1):
                    acked_at[j] = now
                st["acked"] = max(st["acked"], min(i, n - 1))
            elif kind == 3 and (a.syndrome & 0x1F) == 0:
                st["naks"] += 1
                for j in range(st["acked"] + 1, min(i - 1, n - 1) + 1):
                    acked_at[j] = now
                st["acked"] = max(st["acked"], i - 1)
                st["nak_to"] = i
            elif kind == 1:
                st["rnr"] += 1
                st["nak_to"] = i
            else:
                st["other"] += 1
                st["fatal"] = a.syndrome

    sniffer_ready = threading.Event()
    stop = threading.Event()

    def sniffer():
        sniff(iface=args.iface, filter="udp port 4791 and src host " + args.peer, prn=on_ack,
              started_callback=sniffer_ready.set, stop_filter=lambda _: stop.is_set(),
              timeout=args.timeout)

    t = threading.Thread(target=sniffer, daemon=True)
    t.start()
    sniffer_ready.wait(5)
    nxt = 0
    retransmitted = 0
    last_progress = time.time()
    last_acked = -1
    start = time.time()
    # The first SEND alone: its ACK comes from the remote host (passthrough)
    # and lets the gateway pair the flow.
    while time.time() - start < args.timeout:
        with lock:
            acked = st["acked"]
            nak_to = st["nak_to"]
            st["nak_to"] = None
        if acked != last_acked:
            last_acked = acked
            last_progress = time.time()
        if acked >= n - 1:
            break
        if nak_to is not None and nak_to <= nxt:
            retransmitted += nxt - nak_to
            nxt = nak_to
        elif time.time() - last_progress > 0.3 and nxt > acked + 1:
            retransmitted += nxt - (acked + 1)
            nxt = acked + 1
            last_progress = time.time()
        limit = 1 if acked < 0 else acked + 1 + args.window
        if nxt < min(limit, n):
            if sent_at[nxt] is None:
                sent_at[nxt] = time.time()
            sock.send(pkts[nxt][1])
            nxt += 1
        else:
            time.sleep(0.0002)
    stop.set()
    lat = []
    for i in range(1, n):
        if pkts[i][2] and sent_at[i] is not None and acked_at[i] is not None:
            lat.append((acked_at[i] - sent_at[i]) * 1000)
    lat.sort()
    first = (acked_at[0] - sent_at[0]) * 1000 if acked_at[0] and sent_at[0] else None
    out = {
        "packets": n, "acked": st["acked"] + 1, "acks": st["acks"], "naks": st["naks"],
        "rnr_naks": st["rnr"], "other_naks": st["other"], "msn_errors": st["msn_errors"][:5],
        "retransmitted": retransmitted, "first_ack_ms": first,
        "message_ack_ms_median": lat[len(lat) // 2] if lat else None,
        "message_ack_ms_max": lat[-1] if lat else None, "messages_timed": len(lat),
        "seconds": time.time() - start,
    }
    print(json.dumps(out))
    return 0 if out["acked"] == n else 1


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("responder", "requester"):
        s = sub.add_parser(name)
        s.add_argument("--iface", required=True)
        s.add_argument("--me", required=True)
        s.add_argument("--peer", required=True)
        s.add_argument("--gw-mac", required=True)
        s.add_argument("--qp", type=int, required=True)
        s.add_argument("--peer-qp", type=int, required=True)
        s.add_argument("--timeout", type=float, default=60)
    r = sub.choices["responder"]
    r.add_argument("--out", required=True)
    r.add_argument("--expect", type=int, default=0)
    r.add_argument("--first-psn", type=int, default=PSN_START)
    r.add_argument("--ready", help="file written once the sniffer runs")
    q = sub.choices["requester"]
    q.add_argument("--messages", type=int, default=50)
    q.add_argument("--packets-per-message", type=int, default=4)
    q.add_argument("--size", type=int, default=1024)
    q.add_argument("--window", type=int, default=64)
    args = ap.parse_args()
    return {"responder": cmd_responder, "requester": cmd_requester}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
