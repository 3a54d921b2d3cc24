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

  --cm (both): the connection is set up with RDMA CM MADs on QP1 first (UD
      SEND only to QP 1 with a DETH; IBA ch. 12): the requester sends a REQ
      (its QPN, path MTU code --mtu-code) and waits for the responder's REP
      (its QPN, the PSN the requester sends from), sends an RTU, and at the
      end a DREQ that the responder answers with a DREP. The gateways can
      then pair the flow before any data: even the first SEND is acknowledged
      locally. The responder reports the path MTU the REQ told it (a gateway
      may change it) and, with --mtu, accepts only packets of that MTU
      (FIRST/MIDDLE exactly, LAST/ONLY at most) and checks the data per
      message, so packets re-cut by the gateways are verified too.

  --vlan VID --pcp P --dscp D (both): the frames it sends carry an 802.1Q
      tag (VID, PCP) and DSCP D; the summaries list the tags ([PCP, VID], or
      null) and DSCPs of the requests received (responder: tags, dscps) and of
      the ACKs received (requester: ack_tags, ack_dscps).

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

from scapy.all import IP, UDP, Dot1Q, Ether, Raw, conf, sniff  # noqa: E402
from scapy.contrib.roce import AETH, BTH  # noqa: E402

SEND_ONLY = 0x04
WRITE_FIRST, WRITE_MIDDLE, WRITE_LAST = 0x06, 0x07, 0x08
ACK = 0x11
PSN_START = 0xFFFFF8  # the flow wraps the 24-bit PSN space right after pairing
ENDS = {0x02, 0x03, 0x04, 0x05, 0x08, 0x09, 0x0A, 0x0B}


def payload(qp, i, size):
    body = struct.pack("!II", qp, i) + bytes((qp * 31 + i * 7 + k) & 0xFF for k in range(size - 40))
    return body + hashlib.sha256(body).digest()


def l2(args):
    """Ethernet toward the gateway, with an 802.1Q tag when --vlan is given."""
    eth = Ether(dst=args.gw_mac)
    return eth / Dot1Q(prio=args.pcp, vlan=args.vlan) if args.vlan else eth


def tag_of(p):
    """[PCP, VID] of a captured frame's 802.1Q tag, or None."""
    return [p[Dot1Q].prio, p[Dot1Q].vlan] if Dot1Q in p else None


# BPF: RoCEv2, untagged or behind one 802.1Q tag.
ROCE_FILTER = "(udp port 4791) or (vlan and udp port 4791)"


def frame(args, opcode, qp, psn, ackreq, data=b"", ext=b"", syndrome=None, msn=0):
    pad = (-len(data)) % 4
    l3 = IP(src=args.me, dst=args.peer, flags="DF", tos=(args.dscp << 2) | 0x02)
    bth = BTH(opcode=opcode, padcount=pad, dqpn=qp, psn=psn & 0xFFFFFF, ackreq=int(ackreq))
    if syndrome is not None:
        pkt = l2(args) / l3 / UDP(sport=49200, dport=4791) / bth / \
            AETH(syndrome=syndrome, msn=msn)
    else:
        pkt = l2(args) / l3 / UDP(sport=49152, dport=4791) / bth / \
            Raw(ext + data + bytes(pad))
    return bytes(pkt)


UD_SEND_ONLY = 0x64
CM_REQ, CM_REP, CM_RTU, CM_DREQ, CM_DREP = 0x10, 0x13, 0x14, 0x15, 0x16
MTU_OF_CODE = {1: 256, 2: 512, 3: 1024, 4: 2048, 5: 4096}


def cm_frame(args, attr, fields):
    """A CM MAD: UD SEND only to QP 1, DETH, 24-byte MAD header, the message.
    `fields`: (offset in the CM message, bytes) to place."""
    msg = bytearray(232)
    for off, b in fields:
        msg[off:off + len(b)] = b
    mad = struct.pack("!BBBBHHQHHI", 1, 0x07, 2, 3, 0, 0, 0x1234, attr, 0, 0) + bytes(msg)
    deth = struct.pack("!II", 0x80010000, 1)
    l3 = IP(src=args.me, dst=args.peer, flags="DF")
    bth = BTH(opcode=UD_SEND_ONLY, padcount=0, dqpn=1, psn=0)
    return bytes(Ether(dst=args.gw_mac) / l3 / UDP(sport=49153, dport=4791) / bth /
                 Raw(deth + mad))


def cm_parse(p):
    """(attr, CM message bytes) of a CM MAD, or None."""
    if BTH not in p or p[BTH].opcode != UD_SEND_ONLY or p[BTH].dqpn != 1:
        return None
    raw = bytes(p[BTH].payload)
    if len(raw) < 8 + 24 + 64 or raw[8] != 1 or raw[9] != 0x07:
        return None
    return struct.unpack("!H", raw[8 + 16:8 + 18])[0], raw[8 + 24:]


def u24(b):
    return b[0] << 16 | b[1] << 8 | b[2]


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
          "nak_episode": False, "index": [], "cm_reqs": 0, "cm_dreqs": 0, "req_mtu": None,
          "mtu_errors": 0, "messages_checked": 0, "tags": [], "dscps": []}
    done = threading.Event()
    msg = bytearray()

    def on_cm(attr, m):
        if attr == CM_REQ:
            st["cm_reqs"] += 1
            st["req_mtu"] = MTU_OF_CODE.get(m[50] >> 4)
            # REP: our comm ID, theirs, our QPN, the PSN the requester sends from.
            sock.send(cm_frame(args, CM_REP, [(0, b"\x00\x00\xbb\x01"), (4, m[0:4]),
                                              (12, args.qp.to_bytes(3, "big")),
                                              (20, args.first_psn.to_bytes(3, "big"))]))
        elif attr == CM_DREQ:
            st["cm_dreqs"] += 1
            sock.send(cm_frame(args, CM_DREP, [(0, b"\x00\x00\xbb\x01"), (4, m[0:4])]))
            if args.expect and st["accepted"] >= args.expect:
                done.set()  # with --cm the summary waits for the teardown

    def check_message(body):
        # The requester's packets were --size bytes each, digest per packet.
        for k in range(0, len(body), args.size):
            data, digest = body[k:k + args.size - 32], body[k + args.size - 32:k + args.size]
            if hashlib.sha256(data).digest() != digest:
                st["bad_payload"] += 1
                continue
            qp, i = struct.unpack("!II", data[:8])
            if st["index"] and i != st["index"][-1] + 1:
                st["order_errors"] += 1
            st["index"].append(i)
        st["messages_checked"] += 1

    def handle(p):
        if BTH not in p or p[IP].dst != args.me:
            return
        if args.cm:
            cm = cm_parse(p)
            if cm is not None:
                on_cm(*cm)
                return
        bth = p[BTH]
        if bth.dqpn != args.qp or bth.opcode not in (0x00, 0x01, 0x02, SEND_ONLY, WRITE_FIRST,
                                                        WRITE_MIDDLE, WRITE_LAST, 0x0A):
            return
        st["received"] += 1
        if tag_of(p) not in st["tags"]:
            st["tags"].append(tag_of(p))
        if p[IP].tos >> 2 not in st["dscps"]:
            st["dscps"].append(p[IP].tos >> 2)
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
        if args.mtu:
            # The path MTU this responder runs: what the REQ told it.
            mtu = st["req_mtu"] or 1024
            first_or_middle = bth.opcode in (WRITE_FIRST, WRITE_MIDDLE)
            if (first_or_middle and len(body) != mtu) or len(body) > mtu:
                st["mtu_errors"] += 1
            msg.extend(body)
            if bth.opcode in ENDS:
                check_message(bytes(msg))
                msg.clear()
        elif len(body) >= 40:
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
        if args.expect and st["accepted"] >= args.expect and (not args.cm or st["cm_dreqs"]):
            done.set()

    def ready():
        if args.ready:
            with open(args.ready, "w") as f:
                f.write("ready\n")

    sniff(iface=args.iface, filter=ROCE_FILTER, prn=handle, timeout=args.timeout,
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
          "other": 0, "tags": [], "dscps": []}
    sent_at = [None] * n
    acked_at = [None] * n

    def on_ack(p):
        if BTH not in p or p[BTH].opcode != ACK or p[BTH].dqpn != args.qp or AETH not in p:
            return
        now = float(p.time)  # the capture time: no Python scheduling delay
        b, a = p[BTH], p[AETH]
        i = psn_diff(b.psn, PSN_START)
        with lock:
            if tag_of(p) not in st["tags"]:
                st["tags"].append(tag_of(p))
            if p[IP].tos >> 2 not in st["dscps"]:
                st["dscps"].append(p[IP].tos >> 2)
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
        # Not "and src host" in BPF: after `vlan` libpcap reads later fields
        # 4 bytes further in (on_packet checks the source instead).
        sniff(iface=args.iface, filter=ROCE_FILTER, prn=on_packet,
              started_callback=sniffer_ready.set, stop_filter=lambda _: stop.is_set(),
              timeout=args.timeout)

    cm = {"rep": None, "drep": False}

    def on_cm(p):
        c = cm_parse(p)
        if c is None:
            return
        attr, m = c
        if attr == CM_REP:
            cm["rep"] = (u24(m[12:15]), u24(m[20:23]), m[0:4], float(p.time))
        elif attr == CM_DREP:
            cm["drep"] = True

    def on_packet(p):
        if IP not in p or p[IP].src != args.peer:
            return
        if args.cm:
            on_cm(p)
        on_ack(p)

    t = threading.Thread(target=sniffer, daemon=True)
    t.start()
    sniffer_ready.wait(5)
    my_comm = b"\x00\x00\xaa\x01"
    if args.cm:
        req_at = time.time()
        sock.send(cm_frame(args, CM_REQ, [(0, my_comm), (32, args.qp.to_bytes(3, "big")),
                                          (44, (0x123456).to_bytes(3, "big")),
                                          (50, bytes([args.mtu_code << 4 | 7]))]))
        while cm["rep"] is None and time.time() - req_at < 10:
            time.sleep(0.001)
        if cm["rep"] is None:
            print(json.dumps({"error": "no CM REP"}))
            return 1
        rep_qp, rep_psn, peer_comm, _ = cm["rep"]
        if rep_qp != args.peer_qp or rep_psn != PSN_START:
            print(json.dumps({"error": "REP names QP %d PSN %d" % (rep_qp, rep_psn)}))
            return 1
        sock.send(cm_frame(args, CM_RTU, [(0, my_comm), (4, peer_comm)]))
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
    if args.cm and cm["rep"] is not None:
        sock.send(cm_frame(args, CM_DREQ, [(0, my_comm), (4, cm["rep"][2]),
                                           (8, args.peer_qp.to_bytes(3, "big"))]))
        dreq_at = time.time()
        # The far gateway holds the DREQ until the responder has
        # acknowledged all the data before it (a slow scapy responder).
        while not cm["drep"] and time.time() - dreq_at < 15:
            time.sleep(0.001)
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
        "seconds": time.time() - start, "ack_tags": st["tags"], "ack_dscps": st["dscps"],
    }
    if args.cm:
        out["cm_drep"] = cm["drep"]
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
        s.add_argument("--cm", action="store_true", help="RDMA CM set-up and teardown on QP1")
        s.add_argument("--size", type=int, default=1024, help="payload bytes per request packet")
        s.add_argument("--vlan", type=int, default=0, help="802.1Q VID of the frames sent (0: none)")
        s.add_argument("--pcp", type=int, default=0, help="their 802.1Q priority")
        s.add_argument("--dscp", type=int, default=0, help="their DSCP (ECT(0) always)")
    r = sub.choices["responder"]
    r.add_argument("--out", required=True)
    r.add_argument("--expect", type=int, default=0)
    r.add_argument("--first-psn", type=int, default=PSN_START)
    r.add_argument("--ready", help="file written once the sniffer runs")
    r.add_argument("--mtu", action="store_true",
                   help="enforce the REQ's path MTU and check data per message")
    q = sub.choices["requester"]
    q.add_argument("--messages", type=int, default=50)
    q.add_argument("--packets-per-message", type=int, default=4)
    q.add_argument("--mtu-code", type=int, default=3, help="path MTU code in the REQ (3: 1024)")
    q.add_argument("--window", type=int, default=64)
    args = ap.parse_args()
    return {"responder": cmd_responder, "requester": cmd_requester}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
