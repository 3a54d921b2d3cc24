#!/usr/bin/env python3
"""Splits the WAN round trips of a bench/cc-pt-trace run into their parts.

Input: DIR with wan-a.pcap and wan-b.pcap (UDP on each gateway's WAN
interface, one machine clock) and peers-a.jsonl (rowanctl peers of site A).
Datagrams are matched by order (no loss, no reordering on the emulated WAN at
0 % loss); a datagram from B acks the newest datagram that reached B before
it left. Per second: A->B datagrams and Mbit/s, B's ACK turnaround (arrival
of the acked datagram at B's wire to the ACK leaving B's wire), the path
(A's wire to B's wire and back, turnaround removed), and A's transport state.
"""
import json
import statistics
import subprocess
import sys

A, B = "198.19.0.1", "198.19.0.2"


def read(path):
    out = subprocess.run(
        ["tshark", "-r", path, "-T", "fields", "-e", "frame.time_epoch", "-e", "ip.src",
         "-e", "udp.length"], capture_output=True, text=True, check=True).stdout
    rows = []
    for line in out.splitlines():
        f = line.split("\t")
        if len(f) == 3 and f[2]:
            rows.append((float(f[0]), f[1], int(f[2])))
    return rows


def align(x, y):
    """Index offset k so that x[i] pairs with y[i + k] (same lengths)."""
    best, best_k = -1, 0
    for k in range(-50, 51):
        n = 0
        for i in range(min(400, len(x))):
            j = i + k
            if 0 <= j < len(y) and x[i][1] == y[j][1]:
                n += 1
        if n > best:
            best, best_k = n, k
    return best_k


def pct(v, p):
    if not v:
        return float("nan")
    v = sorted(v)
    return v[min(len(v) - 1, int(p * len(v)))]


def main():
    d = sys.argv[1]
    wa, wb = read(f"{d}/wan-a.pcap"), read(f"{d}/wan-b.pcap")
    a_out = [(t, n) for t, s, n in wa if s == A]
    a_in = [(t, n) for t, s, n in wa if s == B]
    b_in = [(t, n) for t, s, n in wb if s == A]
    b_out = [(t, n) for t, s, n in wb if s == B]
    k1, k2 = align(a_out, b_in), align(b_out, a_in)
    t0 = a_out[0][0] if a_out else 0
    peers = []
    try:
        with open(f"{d}/peers-a.jsonl") as f:
            peers = [json.loads(line) for line in f if line.strip()]
    except OSError:
        pass
    # Per B->A datagram: the A->B datagram it acks (newest arrived at B before it left).
    samples = []  # (t_at_A, turnaround, path)
    i = -1
    last_acked = -1
    for j, (tb, _) in enumerate(b_out):
        while i + 1 < len(b_in) and b_in[i + 1][0] <= tb:
            i += 1
        ia, ja = i - k1, j + k2
        if i < 0 or i == last_acked or not (0 <= ia < len(a_out)) or not (0 <= ja < len(a_in)):
            continue
        last_acked = i
        turn = tb - b_in[i][0]
        wire = a_in[ja][0] - a_out[ia][0]
        samples.append((a_in[ja][0] - t0, turn, wire - turn))
    print(f"A->B {len(a_out)} at A, {len(b_in)} at B (offset {k1}); "
          f"B->A {len(b_out)} at B, {len(a_in)} at A (offset {k2}); {len(samples)} first ACKs")
    print("| t (s) | A->B pkts | Mbit/s | turnaround p50/p90/max (ms) | path p10/p50/p90 (ms) |"
          " srtt / min_rtt (ms) | pacing (Mbit/s) | cwnd (KB) | in flight (KB) | send buf (KB) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    secs = int((a_out[-1][0] - t0) if a_out else 0) + 1
    for s in range(secs):
        pk = [n for t, n in a_out if s <= t - t0 < s + 1]
        sm = [x for x in samples if s <= x[0] < s + 1]
        tu = [x[1] * 1e3 for x in sm]
        pa = [x[2] * 1e3 for x in sm]
        pr = [p["peer"] for p in peers if s <= p["t"] - t0 < s + 1 and p.get("peer")]
        pe = pr[len(pr) // 2] if pr else {}
        print(f"| {s} | {len(pk)} | {sum(pk) * 8 / 1e6:.1f} | "
              f"{pct(tu, .5):.2f}/{pct(tu, .9):.2f}/{max(tu) if tu else float('nan'):.2f} | "
              f"{pct(pa, .1):.2f}/{pct(pa, .5):.2f}/{pct(pa, .9):.2f} | "
              f"{pe.get('srtt_s', 0) * 1e3:.2f} / {pe.get('min_rtt_s', 0) * 1e3:.2f} | "
              f"{pe.get('pacing_rate_bps', 0) / 1e6:.1f} | {pe.get('cwnd_bytes', 0) / 1e3:.0f} | "
              f"{pe.get('bytes_in_flight', 0) / 1e3:.0f} | "
              f"{pe.get('send_buffer_used_bytes', 0) / 1e3:.0f} |")
    tu = [x[1] * 1e3 for x in samples]
    pa = [x[2] * 1e3 for x in samples]
    if tu:
        over = sum(1 for v in tu if v > 1.0) / len(tu)
        print(f"\nall: turnaround p50 {pct(tu, .5):.3f} p90 {pct(tu, .9):.3f} p99 {pct(tu, .99):.3f} ms, "
              f"{over * 100:.0f} % above the 1 ms max_ack_delay; path p1 {pct(pa, .01):.3f} "
              f"p50 {pct(pa, .5):.3f} p90 {pct(pa, .9):.3f} ms")
    # One-way wire delays (positional pairs): the emulator must never deliver
    # a frame sooner than its configured one-way delay (--one-way MS).
    one_way = float(sys.argv[2]) if len(sys.argv) > 2 else None
    for name, src, dst, k in (("A->B", a_out, b_in, k1), ("B->A", b_out, a_in, k2)):
        ow = [(dst[i + k][0] - src[i][0]) * 1e3 for i in range(len(src)) if 0 <= i + k < len(dst)]
        if not ow:
            continue
        line = (f"one-way {name}: {len(ow)} frames, min {min(ow):.3f} p1 {pct(ow, .01):.3f} "
                f"p50 {pct(ow, .5):.3f} ms")
        if one_way is not None:
            line += f", {sum(1 for v in ow if v < one_way)} under {one_way:.3f} ms"
        print(line)
    try:
        with open(f"{d}/iperf3.json") as f:
            j = json.load(f)
        print(f"iperf3: {j['end']['sum_received']['bits_per_second'] / 1e6:.1f} Mbit/s, "
              f"host mean RTT {j['end']['streams'][0]['sender'].get('mean_rtt', 0) / 1e3:.1f} ms")
    except (OSError, KeyError, ValueError, IndexError):
        pass


if __name__ == "__main__":
    main()
